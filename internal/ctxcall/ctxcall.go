// Package ctxcall runs a call with a CUDA context current, for the
// libraries of purecuda that sit beside package driver and call libraries
// built on the CUDA runtime (NCCL, cuBLAS), which work in the calling
// thread's current context. It is not part of purecuda's public API.
package ctxcall

import (
	"runtime"

	"github.com/purecuda/cuda/internal/cu"
)

// Bound runs f with h current on the calling OS thread, locked for the
// call, and leaves the thread without a current context, as package driver
// does: the current context is per OS thread and goroutines move between
// threads, and a context left current would outlive its use (once
// destroyed, calls on a thread that still has it current fail). The caller
// holds h. f must not destroy h or change the thread's context stack; a
// panic in f still clears the thread.
func Bound(h cu.CUcontext, f func() error) (err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.CtxPushCurrent(h); err != nil {
		return err
	}
	defer func() {
		if e := cu.CtxSetCurrent(0); err == nil {
			err = e
		}
	}()
	return f()
}
