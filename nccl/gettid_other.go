//go:build !linux

package nccl

// gettid stands for the thread's id where NCCL does not exist: every call
// fails before it matters, and groups are never open.
func gettid() int64 { return -1 }
