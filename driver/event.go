package driver

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// EventFlags are cuEventCreate flags.
type EventFlags uint32

// Event flags.
const (
	EventDefault       EventFlags = 0 // CU_EVENT_DEFAULT
	EventBlockingSync  EventFlags = 1 // CU_EVENT_BLOCKING_SYNC
	EventDisableTiming EventFlags = 2 // CU_EVENT_DISABLE_TIMING
	// EventInterprocess needs EventDisableTiming too.
	EventInterprocess EventFlags = 4 // CU_EVENT_INTERPROCESS
)

// Event is a CUDA event. Every call holds the event while it runs; Close
// destroys it once no call is using it. An Event dropped without Close is
// destroyed by a cleanup.
//
// An Event is safe for concurrent use: Record, Query, Synchronize and
// Stream.WaitEvent may run at once from several goroutines, and each sees
// the records CUDA received before it (the latest record counts, as in
// CUDA). A Close racing with them never destroys the event under a call in
// flight; calls that start after it fail with ErrClosed.
type Event struct {
	h   cu.CUevent
	ctx *Context
	// capture is the capture hook of the stream the event was last
	// recorded on, if that stream was being captured (see capture.go).
	// It lies within 16 bytes of the reference count: on one cache line.
	capture atomic.Pointer[captureHook]
	obj     lifetime.Object
	cleanup runtime.Cleanup // destroys an Event that became unreachable without Close
}

// NewEvent creates an event (cuEventCreate).
func (c *Context) NewEvent(flags EventFlags) (*Event, error) {
	const op = "Context.NewEvent"
	if err := c.hold(op); err != nil {
		return nil, err
	}
	e := &Event{ctx: c}
	if err := bound(c, func() error { return cu.EventCreate(&e.h, uint32(flags)) }); err != nil {
		c.release()
		return nil, err
	}
	h := e.h
	initDropped(e, &e.obj, &e.cleanup, dropped{destroy: func() error { return destroyEvent(h, c) }})
	return e, nil
}

// destroyEvent destroys event h of context c and releases c.
func destroyEvent(h cu.CUevent, c *Context) error {
	err := bound(c, func() error { return cu.EventDestroy(h) })
	c.release()
	return err
}

func (e *Event) acquire(op string) error {
	if e == nil {
		return invalid(op, "nil event")
	}
	if !e.obj.Acquire() {
		return notOpen(op, "event")
	}
	return nil
}

func (e *Event) release() { _ = e.obj.Release() }

// Record captures the work queued on s so far (cuEventRecord).
func (e *Event) Record(s *Stream) error {
	// Written out, without defers or a closure: a record costs little in
	// libcuda, so each of these shows (BenchmarkVersusC's EventRecord).
	// Nothing between acquire and release can panic.
	const op = "Event.Record"
	if err := e.acquire(op); err != nil {
		return err
	}
	if s.quickHold() {
		// The fast path: an owned stream, open and not captured, held by
		// its in-flight count alone (quickHold), which also keeps a
		// capture from beginning (capture.go). Nothing is released until
		// endQuick.
		err := cu.EventRecord(e.h, s.h)
		// The event's and the stream's first lines are read together (see
		// warmed), so that both come back from memory at once.
		warmed(e.obj.Refs() + int64(s.inflight.Load()))
		if err == nil && e.capture.Load() != nil {
			e.capture.Store(nil)
		}
		s.endQuick()
		if err != nil {
			// After endQuick: a sticky error cancels the context's pending
			// host functions, whose cancellations release what they held.
			err = s.ctx.sawError(err)
		}
		e.release()
		return err
	}
	return e.record(op, s)
}

// record is Record's general path: the legacy stream, a captured, closed
// or zero stream.
func (e *Event) record(op string, s *Stream) error {
	if err := s.acquire(op); err != nil {
		e.release()
		return err
	}
	h := s.enter()
	var err error
	if s.special {
		err = bound(s.ctx, func() error { return cu.EventRecord(e.h, s.h) })
	} else {
		err = cu.EventRecord(e.h, s.h)
	}
	if err == nil && (h != nil || e.capture.Load() != nil) {
		e.capture.Store(h) // a stream that waits for e joins the capture
	}
	s.leave(h)
	s.release()
	e.release()
	return s.ctx.sawError(err)
}

// Synchronize waits for the recorded work (cuEventSynchronize).
func (e *Event) Synchronize() error {
	if err := e.acquire("Event.Synchronize"); err != nil {
		return err
	}
	defer e.release()
	return e.ctx.sawError(cu.EventSynchronize(e.h))
}

// Query reports whether the recorded work has run (cuEventQuery).
func (e *Event) Query() (bool, error) {
	if err := e.acquire("Event.Query"); err != nil {
		return false, err
	}
	defer e.release()
	err := cu.EventQuery(e.h)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotReady):
		return false, nil
	}
	return false, e.ctx.sawError(err)
}

// Elapsed is the time between two recorded events (cuEventElapsedTime);
// both need timing enabled and must have completed.
func Elapsed(start, end *Event) (time.Duration, error) {
	if err := start.acquire("Elapsed"); err != nil {
		return 0, err
	}
	defer start.release()
	if err := end.acquire("Elapsed"); err != nil {
		return 0, err
	}
	defer end.release()
	sc := getScratch()
	defer putScratch(sc)
	ms := (*float32)(unsafe.Pointer(sc))
	err := cu.EventElapsedTime(ms, start.h, end.h)
	if err != nil && isNotSupported(err) {
		err = cu.EventElapsedTime_v2000(ms, start.h, end.h)
	}
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(*ms) * float64(time.Millisecond)), nil
}

// Raw calls f with the CUevent handle, with the event held and its context
// current on the calling OS thread; the handle must not be kept after f
// returns.
func (e *Event) Raw(f func(handle uintptr) error) error {
	const op = "Event.Raw"
	if f == nil {
		return invalid(op, "nil function")
	}
	if err := e.acquire(op); err != nil {
		return err
	}
	defer e.release()
	return bound(e.ctx, func() error { return f(uintptr(e.h)) }) // e holds its context
}

// holdRef takes a reference that keeps the CUDA event alive after Close until
// it is released: for graph nodes that record or wait for it (seam.Hold).
func (e *Event) holdRef() (lifetime.Ref, error) {
	if e == nil {
		return lifetime.Ref{}, invalid("hold", "nil event")
	}
	r, ok := e.obj.Hold()
	if !ok {
		return lifetime.Ref{}, notOpen("hold", "event")
	}
	return r, nil
}

// Context is the event's context (nil for a nil Event).
func (e *Event) Context() *Context {
	if e == nil {
		return nil
	}
	return e.ctx
}

// Close destroys the event (cuEventDestroy) once no call is using it;
// idempotent, first result kept.
func (e *Event) Close() error {
	if e == nil {
		return invalid("Event.Close", "nil event")
	}
	if e.ctx == nil {
		return nil
	}
	return e.obj.Close()
}
