package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/trampoline"
)

// StreamFlags are cuStreamCreate flags.
type StreamFlags uint32

// Stream flags.
const (
	// StreamDefault streams synchronise with the legacy default stream.
	StreamDefault StreamFlags = StreamFlags(cu.CU_STREAM_DEFAULT)
	// StreamNonBlocking streams run concurrently with the legacy default stream.
	StreamNonBlocking StreamFlags = StreamFlags(cu.CU_STREAM_NON_BLOCKING)
)

// Stream is a CUDA stream. Stream-ordered work in purecuda always names its
// stream; a nil *Stream is an error (ErrNilStream), never the default stream.
//
// A Stream is safe for concurrent use; work submitted from several goroutines
// is ordered as CUDA receives it.
type Stream struct {
	// The fields a launch reads come first, together.
	h      cu.CUstream
	ctx    *Context
	closed atomic.Bool
	owned  bool // false for the legacy and per-thread default streams
	// special streams (legacy, per-thread) need the context current.
	special bool
	lim     dimLimits // the device's, copied
	frame   hotFrame  // for Launch
	blk     argBlock  // Launch's argument block while it holds frame

	closeOnce sync.Once
	closeErr  error

	errMu sync.Mutex
	errs  []error // host-function panics, returned by the next Synchronize
}

// NewStream creates a stream (cuStreamCreate).
func (c *Context) NewStream(flags StreamFlags) (*Stream, error) {
	return c.newStream("Context.NewStream", func(h *cu.CUstream) error { return cu.StreamCreate(h, uint32(flags)) })
}

// NewStreamWithPriority creates a stream with a priority; lower numbers are
// higher priorities, within StreamPriorityRange (cuStreamCreateWithPriority).
func (c *Context) NewStreamWithPriority(flags StreamFlags, priority int) (*Stream, error) {
	return c.newStream("Context.NewStreamWithPriority", func(h *cu.CUstream) error {
		return cu.StreamCreateWithPriority(h, uint32(flags), int32(priority))
	})
}

func (c *Context) newStream(op string, create func(*cu.CUstream) error) (*Stream, error) {
	if err := c.acquire(op); err != nil {
		return nil, err
	}
	s := newStreamFor(c, 0, false)
	if err := bound(c, func() error { return create(&s.h) }); err != nil {
		c.release()
		return nil, err
	}
	return s, nil
}

// newStreamFor makes the Stream value: an owned stream (h set by the
// caller) or a special default stream.
func newStreamFor(c *Context, h cu.CUstream, special bool) *Stream {
	s := &Stream{h: h, ctx: c, owned: !special, special: special, lim: c.dev.lim}
	s.blk.init()
	// Without cuLaunchKernel the frame stays unready and launches take the
	// pooled path, which reports the missing symbol.
	_ = s.frame.ready()
	return s
}

// StreamPriorityRange returns the least and greatest stream priorities
// (cuCtxGetStreamPriorityRange).
func (c *Context) StreamPriorityRange() (least, greatest int, err error) {
	var l, g int32
	err = c.use("Context.StreamPriorityRange", func() error { return cu.CtxGetStreamPriorityRange(&l, &g) })
	return int(l), int(g), err
}

// LegacyStream is the context's legacy default stream (CU_STREAM_LEGACY),
// which synchronises with every blocking stream. Close on it does nothing.
func (c *Context) LegacyStream() *Stream {
	return newStreamFor(c, cu.CU_STREAM_LEGACY, true)
}

// PerThreadStream is the per-thread default stream (CU_STREAM_PER_THREAD).
// Close on it does nothing.
func (c *Context) PerThreadStream() *Stream {
	return newStreamFor(c, cu.CU_STREAM_PER_THREAD, true)
}

// Context is the stream's context.
func (s *Stream) Context() *Context { return s.ctx }

// check reports whether s can take work.
func (s *Stream) check(op string) error {
	if s == nil {
		return fmt.Errorf("driver: %s: %w", op, ErrNilStream)
	}
	if s.closed.Load() {
		return closedErr(op, "stream")
	}
	if s.special {
		return s.ctx.check(op)
	}
	return nil
}

// do runs f with the context current when the stream does not carry it
// (the special default streams); streams made with NewStream carry their
// context, so their hot paths skip the binding.
func (s *Stream) do(op string, f func() error) error {
	if s.special {
		return s.ctx.use(op, f)
	}
	return f()
}

// bind runs f with the stream's context current, for calls that need it
// whatever the stream; a special stream holds no reference of its own, so
// its context is held for the call.
func (s *Stream) bind(op string, f func() error) error {
	if s.special {
		return s.ctx.use(op, f)
	}
	return bound(s.ctx, f)
}

// Raw calls f with the CUstream handle, for use with other CUDA libraries.
// The handle must not be kept after f returns, and s must not be closed
// while f runs.
func (s *Stream) Raw(f func(handle uintptr) error) error {
	if err := s.check("Stream.Raw"); err != nil {
		return err
	}
	return f(uintptr(s.h))
}

// Close destroys the stream (cuStreamDestroy). Work already queued still
// runs. Close is idempotent and returns the first call's result.
func (s *Stream) Close() error {
	if s == nil {
		return fmt.Errorf("driver: Stream.Close: %w", ErrNilStream)
	}
	if !s.owned {
		return nil
	}
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.closeErr = bound(s.ctx, func() error { return cu.StreamDestroy(s.h) })
		s.ctx.release()
	})
	return s.closeErr
}

func (s *Stream) takeErrs(err error) error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if len(s.errs) == 0 {
		return err
	}
	all := append([]error{err}, s.errs...)
	s.errs = nil
	return errors.Join(all...)
}

// Synchronize waits until all work on the stream has run
// (cuStreamSynchronize). It also returns, once, the panics of host
// functions that ran on the stream since the last call.
func (s *Stream) Synchronize() error {
	if err := s.check("Stream.Synchronize"); err != nil {
		return err
	}
	return s.takeErrs(s.do("Stream.Synchronize", func() error { return cu.StreamSynchronize(s.h) }))
}

// Query reports whether all work on the stream has run (cuStreamQuery).
func (s *Stream) Query() (bool, error) {
	if err := s.check("Stream.Query"); err != nil {
		return false, err
	}
	err := s.do("Stream.Query", func() error { return cu.StreamQuery(s.h) })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, cu.CUDA_ERROR_NOT_READY):
		return false, nil
	}
	return false, err
}

// SynchronizeContext waits like Synchronize but gives up when ctx is done,
// returning ctx.Err(); the work itself goes on. It polls cuStreamQuery with
// a back-off from 5µs to 1ms, so it does not keep a core busy.
func (s *Stream) SynchronizeContext(ctx context.Context) error {
	if err := s.check("Stream.SynchronizeContext"); err != nil {
		return err
	}
	wait := 5 * time.Microsecond
	var timer *time.Timer
	for {
		done, err := s.Query()
		if err != nil || done {
			return s.takeErrs(err)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		if wait < time.Millisecond {
			wait *= 2
		}
	}
}

// WaitEvent makes later work on s wait for e (cuStreamWaitEvent).
func (s *Stream) WaitEvent(e *Event) error {
	if err := s.check("Stream.WaitEvent"); err != nil {
		return err
	}
	if err := e.check("Stream.WaitEvent"); err != nil {
		return err
	}
	return s.do("Stream.WaitEvent", func() error { return cu.StreamWaitEvent(s.h, e.h, 0) })
}

// Priority is the stream's priority (cuStreamGetPriority).
func (s *Stream) Priority() (int, error) {
	if err := s.check("Stream.Priority"); err != nil {
		return 0, err
	}
	var p int32
	err := s.do("Stream.Priority", func() error { return cu.StreamGetPriority(s.h, &p) })
	return int(p), err
}

// LaunchHostFunc queues f to run on a CUDA thread once the work before it
// on s has run (cuLaunchHostFunc). f runs exactly once and is then
// released. f must not call CUDA. A panic in f is recovered: the process and
// the stream go on, and the next Synchronize returns it as an error.
func (s *Stream) LaunchHostFunc(f func()) error {
	if err := s.check("Stream.LaunchHostFunc"); err != nil {
		return err
	}
	if f == nil {
		return invalid("Stream.LaunchHostFunc", "nil function")
	}
	return s.enqueueHost(f)
}

func (s *Stream) enqueueHost(f func()) error {
	tramp, err := trampoline.HostFn()
	if err != nil {
		return err
	}
	id := trampoline.Register(&trampoline.Entry{Fn: f, Once: true, OnPanic: s.recordPanic})
	if err := s.bind("Stream.LaunchHostFunc", func() error { return cu.LaunchHostFunc(s.h, cu.CUhostFn(tramp), idPointer(id)) }); err != nil {
		trampoline.Unregister(id) // nothing half-built: it will never run
		return err
	}
	return nil
}

func (s *Stream) recordPanic(p any, stack []byte) {
	s.errMu.Lock()
	s.errs = append(s.errs, fmt.Errorf("driver: host function panicked: %v\n%s", p, stack))
	s.errMu.Unlock()
}
