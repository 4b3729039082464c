//go:build !linux

package nccl

// groupID stands for the goroutine's identity where NCCL does not exist:
// every call fails before it matters, and groups are never open.
func groupID() int64 { return -1 }
