package stress

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
)

// LeftCurrent checks that a call bound to a context leaves the OS thread's
// current context as it found it. On a locked thread it makes a second
// context on ctx's device, uses it, destroys it from another thread, and then
// queues copies on s (a stream of ctx) from the first thread. CUDA keeps a
// destroyed context current on every thread that had it and fails calls
// there with CUDA_ERROR_CONTEXT_IS_DESTROYED, even calls that name their own
// stream, so a context left behind shows.
func LeftCurrent(ctx *driver.Context, s *driver.Stream) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf, err := driver.Alloc[int32](ctx, 64)
	if err != nil {
		return err
	}
	defer buf.Close()
	var before, after cu.CUcontext
	if err := cu.CtxGetCurrent(&before); err != nil {
		return err
	}
	other, err := ctx.Device().NewContext(driver.ContextSchedAuto)
	if err != nil {
		return err
	}
	_, _, err = other.MemGetInfo()
	if err == nil {
		err = cu.CtxGetCurrent(&after)
	}
	closed := make(chan error)
	go func() {
		runtime.LockOSThread() // another thread than the caller's
		defer runtime.UnlockOSThread()
		closed <- other.Close()
	}()
	if err := errors.Join(err, <-closed); err != nil {
		return err
	}
	var left error
	if after != before {
		left = fmt.Errorf("a bound call left the thread's context %#x current (it was %#x)", after, before)
	}

	// Only stream-carried calls from here on: a bound one would replace
	// whatever was left current.
	in, out := make([]int32, 64), make([]int32, 64)
	for i := range in {
		in[i] = int32(7 * i)
	}
	if err := errors.Join(buf.CopyFromHostAsync(s, in), buf.CopyToHostAsync(s, out), s.Synchronize()); err != nil {
		return errors.Join(left, fmt.Errorf("stream work after another context was destroyed: %w", err))
	}
	if out[63] != in[63] {
		return errors.Join(left, fmt.Errorf("copy round trip: got %d, want %d", out[63], in[63]))
	}
	return left
}
