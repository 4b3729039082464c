//go:build linux && (amd64 || arm64)

package nccl

// curg is the address of the calling goroutine's runtime descriptor (its
// g), which stays the same for the goroutine's life: read in assembly, a
// load instead of a gettid system call.
func curg() uintptr

// groupID identifies the calling goroutine while it runs a Group's
// function (no other goroutine alive has the same g).
func groupID() int64 { return int64(curg()) }
