package driver

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purecuda/cuda/internal/cu"
)

// EventFlags are cuEventCreate flags.
type EventFlags uint32

// Event flags.
const (
	EventDefault       EventFlags = EventFlags(cu.CU_EVENT_DEFAULT)
	EventBlockingSync  EventFlags = EventFlags(cu.CU_EVENT_BLOCKING_SYNC)
	EventDisableTiming EventFlags = EventFlags(cu.CU_EVENT_DISABLE_TIMING)
	// EventInterprocess needs EventDisableTiming too.
	EventInterprocess EventFlags = EventFlags(cu.CU_EVENT_INTERPROCESS)
)

// Event is a CUDA event.
type Event struct {
	h         cu.CUevent
	ctx       *Context
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// NewEvent creates an event (cuEventCreate).
func (c *Context) NewEvent(flags EventFlags) (*Event, error) {
	if err := c.acquire("Context.NewEvent"); err != nil {
		return nil, err
	}
	e := &Event{ctx: c}
	if err := bound(c, func() error { return cu.EventCreate(&e.h, uint32(flags)) }); err != nil {
		c.release()
		return nil, err
	}
	return e, nil
}

func (e *Event) check(op string) error {
	if e == nil {
		return invalid(op, "nil event")
	}
	if e.closed.Load() {
		return closedErr(op, "event")
	}
	return nil
}

// Record captures the work queued on s so far (cuEventRecord).
func (e *Event) Record(s *Stream) error {
	if err := e.check("Event.Record"); err != nil {
		return err
	}
	if err := s.check("Event.Record"); err != nil {
		return err
	}
	if s.special {
		return s.ctx.use("Event.Record", func() error { return cu.EventRecord(e.h, s.h) })
	}
	return cu.EventRecord(e.h, s.h)
}

// Synchronize waits for the recorded work (cuEventSynchronize).
func (e *Event) Synchronize() error {
	if err := e.check("Event.Synchronize"); err != nil {
		return err
	}
	return cu.EventSynchronize(e.h)
}

// Query reports whether the recorded work has run (cuEventQuery).
func (e *Event) Query() (bool, error) {
	if err := e.check("Event.Query"); err != nil {
		return false, err
	}
	err := cu.EventQuery(e.h)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, cu.CUDA_ERROR_NOT_READY):
		return false, nil
	}
	return false, err
}

// Elapsed is the time between two recorded events (cuEventElapsedTime);
// both need timing enabled and must have completed.
func Elapsed(start, end *Event) (time.Duration, error) {
	if err := start.check("Elapsed"); err != nil {
		return 0, err
	}
	if err := end.check("Elapsed"); err != nil {
		return 0, err
	}
	var ms float32
	err := cu.EventElapsedTime(&ms, start.h, end.h)
	if err != nil && isNotSupported(err) {
		err = cu.EventElapsedTime_v2000(&ms, start.h, end.h)
	}
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event (cuEventDestroy); idempotent, first result kept.
func (e *Event) Close() error {
	if e == nil {
		return invalid("Event.Close", "nil event")
	}
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		e.closeErr = bound(e.ctx, func() error { return cu.EventDestroy(e.h) })
		e.ctx.release()
	})
	return e.closeErr
}
