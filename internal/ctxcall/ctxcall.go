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

// Seq is a C call made with a context current, in one crossing into C:
// the push of the context, the call (Op), the clearing that leaves the
// thread's context stack as it was. The caller fills Op in place, then
// calls Run. No thread needs locking, since one crossing runs on one
// thread (elsewhere ccall.Run locks the thread for the sequence).
type Seq struct {
	steps [3]ccall.Step
}

// Op is the call to make, for the caller to fill (Fn, N, Args).
func (q *Seq) Op() *ccall.Step { return &q.steps[1] }

// Run makes the call with h current; status turns its result into an
// error, and is called only for a result whose low 32 bits are not 0 (C's
// int 0, success, for every library called so). The caller holds h. A
// failed push makes no call; a failed clearing is reported when the call
// succeeded. Op's R1 holds the call's result once it ran. A Seq run again
// keeps the context calls it resolved (a Seq the caller keeps, under its
// own lock, touches no table of entry points after the first run).
func (q *Seq) Run(h cu.CUcontext, status func(r uintptr) error) error {
	if q.steps[0].Fn == 0 || q.steps[2].Fn == 0 {
		push, set, err := SwitchProcs()
		if err != nil {
			return err
		}
		q.steps[0].Fn, q.steps[2].Fn = push, set
	}
	q.steps[0].Stop, q.steps[0].N, q.steps[0].Args[0] = 1, 1, uintptr(h)
	q.steps[1].Stop = 0
	q.steps[2].Stop, q.steps[2].N, q.steps[2].Args[0] = 0, 1, 0
	if ccall.Run(q.steps[:]) == 1 {
		return cu.CtxPushCurrentStatus(q.steps[0].R1)
	}
	var err error
	if r := q.steps[1].R1; int32(r) != 0 {
		err = status(r)
	}
	if r := q.steps[2].R1; int32(r) != 0 && err == nil {
		err = cu.CtxSetCurrentStatus(r)
	}
	return err
}

// SwitchProcs are the entry points of a sequence's context switches:
// cuCtxPushCurrent and cuCtxSetCurrent (with no context: the clearing).
func SwitchProcs() (push, set uintptr, err error) {
	if push, err = cu.CtxPushCurrentProc(); err != nil {
		return 0, 0, err
	}
	if set, err = cu.CtxSetCurrentProc(); err != nil {
		return 0, 0, err
	}
	return push, set, nil
}

// Step makes the C call s with h current and leaves the thread's context
// stack as it found it, in one crossing into C (see Seq); s.R1 holds its
// result once it ran.
func Step(h cu.CUcontext, s *ccall.Step, status func(r uintptr) error) error {
	var q Seq
	q.steps[1] = *s
	err := q.Run(h, status)
	s.R1 = q.steps[1].R1
	return err
}
