package driver

import (
	"errors"
	"fmt"

	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
)

// A host function's panic (or Goexit) is returned by a Synchronize that
// waits for it: its stream's while the stream is open; once the stream is
// closed, its Context's (Close moves the stream's untaken panics there);
// once the context is closed too, nobody can be given it any more, and
// lifetime.Errors reports it. The legacy stream's panics are the context's
// from the start: every LegacyStream call returns a new Stream value.

// streamPanics is a stream as the sink of its host functions' panics.
type streamPanics struct{ s *Stream }

// CallbackPanicked implements hostfn.PanicSink.
func (p streamPanics) CallbackPanicked(v any, stack []byte) { p.s.callbackPanicked(v, stack) }

// callbackPanicked records a host function's panic (or Goexit) for the
// next Synchronize.
func (s *Stream) callbackPanicked(p any, stack []byte) {
	if s == nil {
		return
	}
	var err error
	if e, ok := p.(*hostfn.Goexited); ok {
		err = fmt.Errorf("driver: host function: %w", e)
	} else {
		err = fmt.Errorf("driver: host function panicked: %v\n%s", p, stack)
	}
	s.errMu.Lock()
	if s.special || s.obj.Closed() {
		// No Synchronize of s can return it: the context's can. (Each
		// LegacyStream call returns a new Stream value: the context keeps
		// the legacy stream's panics, for the next Synchronize of either.)
		s.errMu.Unlock()
		s.ctx.hostPanicked(err)
		return
	}
	s.errs = append(s.errs, err)
	s.nerrs.Store(int32(len(s.errs)))
	s.errMu.Unlock()
}

// takeErrs joins err and the panics kept for s's next Synchronize, and
// forgets them.
func (s *Stream) takeErrs(err error) error {
	if s != nil && s.special {
		return s.ctx.takeErrs(err) // see callbackPanicked
	}
	if s == nil || s.nerrs.Load() == 0 {
		return err
	}
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if len(s.errs) == 0 {
		return err
	}
	all := append([]error{err}, s.errs...)
	s.errs = nil
	s.nerrs.Store(0)
	return errors.Join(all...)
}

// hostPanicked keeps the panics of host functions of a closed stream of c
// for c's next Synchronize, or, once c is closed, reports them through
// lifetime.Errors.
func (c *Context) hostPanicked(errs ...error) {
	if len(errs) == 0 {
		return
	}
	c.errMu.Lock()
	if c.obj.Closed() {
		c.errMu.Unlock()
		for _, e := range errs {
			release.NoteLost(e)
		}
		return
	}
	c.errs = append(c.errs, errs...)
	c.nerrs.Store(int32(len(c.errs)))
	c.errMu.Unlock()
}

// takeErrs joins err and the panics hostPanicked kept, and forgets them.
func (c *Context) takeErrs(err error) error {
	if c.nerrs.Load() == 0 {
		return err
	}
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if len(c.errs) == 0 {
		return err
	}
	all := append([]error{err}, c.errs...)
	c.errs = nil
	c.nerrs.Store(0)
	return errors.Join(all...)
}
