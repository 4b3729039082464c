//go:build linux && !amd64 && !arm64

package nccl

import "syscall"

// groupID identifies the calling goroutine while it runs a Group's
// function: here the id of its OS thread, to which Group locks it.
func groupID() int64 { return int64(syscall.Gettid()) }
