// Package ctxcall runs a call with a CUDA context current, for the
// libraries of purecuda that sit beside package driver and call libraries
// built on the CUDA runtime (NCCL, cuBLAS), which work in the calling
// thread's current context. It is not part of purecuda's public API.
package ctxcall

import (
	"runtime"

	"github.com/purecuda/cuda/internal/ccall"
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

// Step makes the C call s with h current and leaves the thread's context
// stack as it found it, in one crossing into C (ccall.Run): the push of h,
// s, the clearing. No thread needs locking, since one crossing runs on one
// thread. status turns s's result into an error (nil for success). The
// caller holds h. A failed push makes no call; a failed clearing is
// reported when s succeeded.
func Step(h cu.CUcontext, s *ccall.Step, status func(r uintptr) error) error {
	push, err := cu.CtxPushCurrentProc()
	if err != nil {
		return err
	}
	set, err := cu.CtxSetCurrentProc()
	if err != nil {
		return err
	}
	var steps [3]ccall.Step
	steps[0] = ccall.Step{Fn: push, Stop: 1, N: 1}
	steps[0].Args[0] = uintptr(h)
	steps[1] = *s
	steps[1].Stop = 0
	steps[2] = ccall.Step{Fn: set, N: 1}
	if ccall.Run(steps[:]) == 1 {
		return cu.CtxPushCurrentStatus(steps[0].R1)
	}
	s.R1 = steps[1].R1
	err = status(steps[1].R1)
	if e := cu.CtxSetCurrentStatus(steps[2].R1); err == nil {
		err = e
	}
	return err
}
