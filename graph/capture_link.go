package graph

import (
	"errors"
	"fmt"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Links into a capture: Fork and Join, and a stream that joins by waiting
// for an event recorded in the capture (the sink's Join and Joined).
//
// A link runs under st.evMu, from its check of evDone until the stream is
// linked and begun, and the end sets evDone under evMu before it begins:
// so no link reaches CUDA while the capture ends or after (when the end
// has released the streams it held and destroyed the event), and every
// stream linked is begun before the end moves it to ending. Nothing waits
// for st.mu, a stream's gate or its calls in flight while it holds evMu,
// and evMu is never taken with st.mu held (Install waits for a stream's
// calls in flight under st.mu; one of them may wait for the gate of a
// stream a link is about to begin).

// testLinkHook, when set by a test, runs in Fork and Join just before they
// take evMu: a test ends the capture there.
var testLinkHook func()

// event returns the capture's event, made on first use; the context is
// bound, and evMu held (or evDone set by the end, the only link then).
func (st *captureState) event() (cu.CUevent, error) {
	if st.ev == 0 {
		var ev cu.CUevent
		if err := cu.EventCreate(&ev, uint32(cu.CU_EVENT_DISABLE_TIMING)); err != nil {
			return 0, err
		}
		st.ev = ev
	}
	return st.ev, nil
}

// ctxEvent is a link event of a context other than the capture's: an
// event is recorded only on streams of its own context.
type ctxEvent struct {
	ctx *driver.Context // held by a stream of the capture while it is used, and by the capture's graph
	ev  cu.CUevent
}

// eventIn returns the capture's event of the current context, ctx, made on
// first use; evMu is held (or evDone set by the end).
func (st *captureState) eventIn(ctx *driver.Context) (cu.CUevent, error) {
	if ctx == st.ctx || ctx.Same(st.ctx) {
		return st.event()
	}
	for _, ce := range st.evs {
		if ce.ctx.Same(ctx) {
			return ce.ev, nil
		}
	}
	var ev cu.CUevent
	if err := cu.EventCreate(&ev, uint32(cu.CU_EVENT_DISABLE_TIMING)); err != nil {
		return 0, err
	}
	st.evs = append(st.evs, ctxEvent{ctx: ctx, ev: ev})
	return ev, nil
}

// linkLocked makes later work on waiter wait for the work queued on from,
// through an event of from's context (CUDA records an event only on a
// stream of its context; a stream waits for an event of any context);
// evMu is held (or evDone set by the end), and the caller holds both
// streams.
func (st *captureState) linkLocked(from, waiter *driver.Stream) error {
	ctx := from.Context()
	return ctx.Raw(func(uintptr) error {
		ev, err := st.eventIn(ctx)
		if err != nil {
			return err
		}
		if err := cu.EventRecord(ev, cu.CUstream(seam.Stream(from))); err != nil {
			return err
		}
		return cu.StreamWaitEvent(cu.CUstream(seam.Stream(waiter)), ev, 0)
	})
}

// contextHold returns a reference on s's context when it is not the
// capture's (a stream of another device joins; the zero Ref otherwise),
// for keepContext once the stream is linked: what the work captured there
// names is held by its calls, and the context itself by the graph, with
// the rest of what the capture keeps. It is refused for a capture into a
// conditional node's body, which runs in its graph's context only.
func (st *captureState) contextHold(op string, s *driver.Stream) (lifetime.Ref, error) {
	ctx := s.Context()
	if ctx == st.ctx || ctx.Same(st.ctx) {
		return lifetime.Ref{}, nil
	}
	if st.target != nil && st.target.root != nil {
		return lifetime.Ref{}, invalid(op, "the stream belongs to another context than the capture: a conditional node's body runs in its graph's context only (CUDA requires it)")
	}
	return seam.Hold(ctx)
}

// keepContext keeps ref, from contextHold, for the capture's graph and
// marks it as spanning contexts, once a link brought its stream in (a
// refused Fork or stream wait leaves neither). evMu is held with evDone
// unset (st.mu is not taken under evMu): the end takes them with evDone.
func (st *captureState) keepContext(ref *lifetime.Ref) {
	if ref.Valid() {
		st.ctxs = append(st.ctxs, *ref)
		*ref = lifetime.Ref{}
	}
}

func (st *captureState) fork(op string, other *driver.Stream) error {
	st.mu.Lock()
	ending := st.ending
	st.mu.Unlock()
	if ending {
		return fmt.Errorf("graph: %s: %w", op, ErrNotCapturing)
	}
	if other == nil {
		return fmt.Errorf("graph: %s: %w", op, driver.ErrNilStream)
	}
	if other == st.origin {
		return invalid(op, "a stream cannot fork from itself")
	}
	if other.IsLegacy() {
		return invalid(op, "CUDA does not capture the legacy default stream")
	}
	cref, err := st.contextHold(op, other)
	if err != nil {
		return err
	}
	defer func() { _ = cref.Release() }() // unless a link kept it (the zero Ref then)
	for {
		wait, err := st.forkOnce(op, other, &cref)
		if wait == nil {
			return err
		}
		<-wait // another call is bringing the stream in: see how it ends
	}
}

// forkOnce is one try of fork; it returns a channel to wait on, and try
// again after, while another call brings other in. A link keeps cref
// (other's context, when not the capture's).
func (st *captureState) forkOnce(op string, other *driver.Stream, cref *lifetime.Ref) (<-chan struct{}, error) {
	ref, err := seam.Hold(other)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	if st.ending {
		st.mu.Unlock()
		_ = ref.Release()
		return nil, fmt.Errorf("graph: %s: %w", op, ErrNotCapturing)
	}
	var pf *pending // set: this call brings other in
	if capture.Installed(other) == capture.Sink(st) {
		// Already brought in: fork again, once it is linked. The
		// reference is held for the link all the same (a failed stream
		// wait may take the stream out meanwhile).
		if p, _ := st.entryOf(other); p != nil && !p.settled() {
			st.mu.Unlock()
			_ = ref.Release()
			return p.done, nil
		}
		defer ref.Release()
	} else {
		if err := capture.Install(other, st); err != nil {
			st.mu.Unlock()
			_ = ref.Release()
			if errors.Is(err, capture.ErrInstalled) {
				return nil, fmt.Errorf("graph: %s: %w", op, ErrCapturing)
			}
			return nil, err
		}
		pf = newPending()
		st.streams = append(st.streams, heldStream{s: other, ref: ref, pf: pf})
	}
	st.mu.Unlock()
	if testLinkHook != nil {
		testLinkHook()
	}
	st.evMu.Lock()
	err = fmt.Errorf("graph: %s: %w", op, ErrNotCapturing)
	if !st.evDone {
		err = st.linkLocked(st.origin, other)
	}
	if err == nil {
		st.keepContext(cref)
		capture.Began(other, st)
		if pf != nil {
			pf.linked = true
		}
	}
	st.evMu.Unlock()
	if pf != nil {
		if err != nil {
			st.drop(pf, other, true)
		}
		close(pf.done)
	}
	return nil, err
}

// entryOf finds s among the capture's streams and returns its mark (nil
// for the origin, or a stream linked from the start); st.mu is held.
func (st *captureState) entryOf(s *driver.Stream) (pf *pending, ok bool) {
	for _, hs := range st.streams {
		if hs.s == s {
			return hs.pf, true
		}
	}
	return nil, false
}

// drop takes s, marked pf, out of the capture again (a failed or refused
// link), releasing the capture's reference on it if rel is set (else the
// caller keeps it). Only the call that brought the stream in drops it,
// before it closes pf.done. The sink comes off first, with no lock held:
// until then s's gate is held, and a call on another stream of the
// capture may wait for it while holding what st.mu's holder waits for.
func (st *captureState) drop(pf *pending, s *driver.Stream, rel bool) {
	capture.Remove(s, st)
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, hs := range st.streams {
		if hs.pf == pf {
			if rel {
				_ = hs.ref.Release()
			}
			st.streams = append(st.streams[:i], st.streams[i+1:]...)
			return
		}
	}
}

func (st *captureState) join(op string, other *driver.Stream) error {
	if other == nil {
		return fmt.Errorf("graph: %s: %w", op, driver.ErrNilStream)
	}
	if other == st.origin {
		return invalid(op, "a stream cannot join itself")
	}
	for {
		st.mu.Lock()
		p, member := st.entryOf(other)
		ending := st.ending
		st.mu.Unlock()
		if ending {
			return fmt.Errorf("graph: %s: %w", op, ErrNotCapturing)
		}
		if !member {
			return invalid(op, "the stream is not part of the capture (Fork it first)")
		}
		if p == nil || p.settled() {
			break
		}
		<-p.done // being brought in: see how that ends
	}
	ref, err := seam.Hold(other) // a failed stream wait may take it out meanwhile
	if err != nil {
		return err
	}
	defer ref.Release()
	if testLinkHook != nil {
		testLinkHook()
	}
	st.evMu.Lock()
	defer st.evMu.Unlock()
	if st.evDone {
		return fmt.Errorf("graph: %s: %w", op, ErrNotCapturing)
	}
	return st.linkLocked(other, st.origin)
}

// Join implements capture.Sink: s is about to wait for an event recorded
// in the capture. On success it returns with evMu held, which Joined lets
// go: the wait is a link.
func (st *captureState) Join(s any, ref lifetime.Ref) (any, bool) {
	ds, _ := s.(*driver.Stream)
	if ds == nil {
		return nil, false
	}
	cref, err := st.contextHold("Stream.WaitEvent", ds)
	if err != nil {
		return nil, false
	}
	st.mu.Lock()
	if st.ending || capture.Install(ds, st) != nil {
		st.mu.Unlock()
		_ = cref.Release()
		return nil, false
	}
	pf := newPending()
	st.streams = append(st.streams, heldStream{s: ds, ref: ref, pf: pf})
	st.mu.Unlock()
	st.evMu.Lock()
	if st.evDone {
		st.evMu.Unlock()
		st.drop(pf, ds, false) // the caller keeps ref
		close(pf.done)
		_ = cref.Release()
		return nil, false
	}
	return joinToken{pf, ds, cref}, true
}

// Joined implements capture.Sink: the wait that Join let in is over, and
// ok says whether it worked (the stream has begun); if it did not, the
// stream is taken out of the capture again.
func (st *captureState) Joined(token any, ok bool) {
	j, _ := token.(joinToken)
	if j.pf == nil {
		return // not a token of Join's
	}
	if ok {
		j.pf.linked = true
		st.keepContext(&j.cref)
	}
	st.evMu.Unlock()
	_ = j.cref.Release() // a failed wait: the stream is out again
	if !ok {
		st.drop(j.pf, j.s, true)
	}
	close(j.pf.done)
}

// joinToken is what Join hands the caller for Joined.
type joinToken struct {
	pf   *pending
	s    *driver.Stream
	cref lifetime.Ref // the stream's context when not the capture's, kept once the wait worked
}
