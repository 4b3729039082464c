package nccl

import "syscall"

// gettid is the calling OS thread's id: NCCL keeps an open group per
// thread.
func gettid() int64 { return int64(syscall.Gettid()) }
