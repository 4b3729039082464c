package driver

import (
	"errors"
	"slices"
	"sync"
	"weak"

	"github.com/purecuda/cuda/internal/cu"
)

// Waiting for a context's work before a free or an unload, without holding
// up a capture.
//
// cuMemFree, cuMemFreeHost and cuModuleUnload wait for the context's work
// (or must: a module's queued kernels), and cuMemFree holds up other
// threads' allocations while it waits. So purecuda waits first. It cannot
// do so with cuCtxSynchronize: while a stream of the context is being
// captured that call fails and invalidates the capture, and a capture
// could begin between the look for one and the call unless BeginCapture
// were kept out for the whole wait (then a BeginCapture waited for the
// context's work, a host function waiting for BeginCapture's caller
// included: a deadlock). Instead the wait records an event on each of the
// context's streams, no capture beginning on a stream while its event is
// recorded, and on its legacy stream while no stream of the context is
// being captured, and waits for those events holding nothing: a capture
// may begin meanwhile, and the events, recorded outside it, do not touch
// it. Only then does the caller look for a capture (unlessCaptured) and,
// keeping captures out, synchronise the context and call CUDA: the wait
// there is for little or nothing (work queued on streams purecuda did not
// make, or left on destroyed streams: a closed stream is destroyed only
// once its host functions, the work that may wait for a goroutine, have
// run). Work queued on the context's streams during the drain is not
// covered by it, and may be a host function that waits for a goroutine
// waiting for a BeginCapture: so, captures kept out, the caller first asks
// each stream without waiting whether it is idle (queuedSince); if one is
// not, it lets captures in again and drains once more, up to drainRounds
// times, after which it synchronises whatever is queued (work queued in a
// loop faster than it runs would otherwise keep the release waiting for
// good).

// liveStreams lists, per CUDA context, the streams made in it (weakly: a
// dropped stream is still released by its cleanup). Keyed by handle, as
// two Context values may share one context.
var liveStreams struct {
	mu    sync.Mutex
	byCtx map[cu.CUcontext][]weak.Pointer[Stream]
}

// noteStream lists s, a stream just made, among its context's streams;
// when the list has doubled, it forgets the streams gone or destroyed.
func noteStream(s *Stream) {
	liveStreams.mu.Lock()
	defer liveStreams.mu.Unlock()
	if liveStreams.byCtx == nil {
		liveStreams.byCtx = make(map[cu.CUcontext][]weak.Pointer[Stream])
	}
	k := s.ctx.h
	ws := append(liveStreams.byCtx[k], weak.Make(s))
	if n := len(ws); n >= 64 && n&(n-1) == 0 {
		ws = slices.DeleteFunc(ws, func(w weak.Pointer[Stream]) bool {
			s := w.Value()
			return s == nil || s.obj.Destroyed()
		})
	}
	liveStreams.byCtx[k] = ws
}

// streamsOf holds and returns the live streams of context c's CUDA
// context, closed ones included (a host function queued on a closed stream
// holds it until it has run), forgetting those gone or destroyed; the
// caller releases each.
func streamsOf(c *Context) []*Stream {
	liveStreams.mu.Lock()
	defer liveStreams.mu.Unlock()
	k := c.h
	var held []*Stream
	ws := slices.DeleteFunc(liveStreams.byCtx[k], func(w weak.Pointer[Stream]) bool {
		s := w.Value()
		if s == nil || !s.obj.Retain() {
			return true
		}
		held = append(held, s)
		return false
	})
	if len(ws) == 0 {
		delete(liveStreams.byCtx, k)
	} else {
		liveStreams.byCtx[k] = ws
	}
	return held
}

// forgetContext drops what is kept per CUDA context for context h, whose
// Context value is being destroyed (nothing holds it, nor any stream of
// it), before CUDA may give the handle to a new context: the streams
// listed for it that are gone, and, unless it is a primary context (which
// other Context values may share), its capture gate, unused from now on.
func forgetContext(h cu.CUcontext, primary bool) {
	liveStreams.mu.Lock()
	ws := slices.DeleteFunc(liveStreams.byCtx[h], func(w weak.Pointer[Stream]) bool {
		s := w.Value()
		return s == nil || s.obj.Destroyed()
	})
	if len(ws) == 0 {
		delete(liveStreams.byCtx, h)
	} else {
		liveStreams.byCtx[h] = ws
	}
	liveStreams.mu.Unlock()
	if !primary {
		captures.mu.Lock()
		delete(captures.gates, h)
		captures.mu.Unlock()
	}
}

// drain waits for the work queued so far in context c, on its streams
// not yet destroyed and its legacy stream, without keeping any capture
// from beginning (see above). The caller holds c. It returns the first
// error: a fault in the context (which the synchronisation after it
// reports too), or a failure of the drain itself (which leaves that
// synchronisation to wait for the work).
// Work on streams purecuda did not make, or left on a stream destroyed
// (closed, with no host function of its left to run), is not waited for
// here: the synchronisation after it is.
func drain(c *Context) error {
	// Querying or waiting for an event is among the calls a capture in
	// global mode on another thread refuses, and is invalidated by (seen
	// on the H200): the wait runs with this thread's mode relaxed.
	var first error
	_ = relaxedHere(func() error {
		first = drainRelaxed(c)
		return nil
	})
	return first
}

// drainRelaxed is drain, on a locked thread whose capture mode is relaxed.
func drainRelaxed(c *Context) error {
	var evs []cu.CUevent
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, s := range streamsOf(c) {
		ev, err := s.recordUncaptured()
		s.release()
		if err == errRawCapture {
			continue
		}
		// A fault seen here releases what the host functions queued in s's
		// Context hold (CUDA will never run them), closed streams included.
		note(s.ctx.sawError(err))
		if ev != 0 {
			evs = append(evs, ev)
		}
	}
	// The legacy stream synchronises with the blocking streams: using it
	// while one is being captured would invalidate the capture.
	g := captureGate(c.h)
	g.RLock()
	if capturing(c) == nil {
		note(bound(c, func() error {
			var ev cu.CUevent
			if err := cu.EventCreate(&ev, uint32(cu.CU_EVENT_DISABLE_TIMING)); err != nil {
				return err
			}
			if err := cu.EventRecord(ev, cu.CU_STREAM_LEGACY); err != nil {
				_ = cu.EventDestroy(ev)
				return err
			}
			evs = append(evs, ev)
			return nil
		}))
	}
	g.RUnlock()
	for _, ev := range evs {
		note(cu.EventSynchronize(ev))
	}
	if len(evs) > 0 {
		note(bound(c, func() error {
			var err error
			for _, ev := range evs {
				if e := cu.EventDestroy(ev); err == nil {
					err = e
				}
			}
			return err
		}))
	}
	return first
}

// drainRounds is how many times drainThenUnlessCaptured drains at most.
const drainRounds = 4

// queuedSince reports whether a stream of c (one purecuda made, not
// destroyed, and not being captured), or its legacy stream, has work that
// has not run, asking each without waiting (cuStreamQuery). The caller
// keeps purecuda's captures in c from beginning (the capture gate, with
// none of c's streams being captured), has c current and the thread's
// capture mode relaxed. A failed query counts as work: the next drain, or
// the final synchronisation, reports what is wrong. It returns the streams
// it held, for the caller to release once captures may begin again (the
// last reference's release destroys a stream).
//
// A stream with a capture's sink installed is asked too: that capture
// has not begun (it waits for the gate the caller holds), so the query
// cannot touch it, and the work queued on the stream before it is no
// capture's: the final synchronisation would wait for it, and a host
// function there may wait for that very BeginCapture.
func queuedSince(c *Context) (busy bool, held []*Stream) {
	held = streamsOf(c)
	for _, s := range held {
		var st cu.CUstreamCaptureStatus
		if err := cu.StreamIsCapturing(s.h, &st); err != nil || st == cu.CU_STREAM_CAPTURE_STATUS_NONE {
			if err != nil || cu.StreamQuery(s.h) != nil {
				return true, held
			}
		}
	}
	return cu.StreamQuery(cu.CU_STREAM_LEGACY) != nil, held
}

// drainThenUnlessCaptured waits for c's work (drain), then, with c current
// and the thread's capture mode relaxed (a capture in global mode in
// another context would refuse the calls and be invalidated), waits with
// cuCtxSynchronize for what is left (work on streams purecuda did not
// make: usually nothing; work queued on its streams since the drain is
// drained again first, see above) and runs call; unless a stream
// of c is being captured: then it hands retry to that capture's end
// (unlessCaptured) and reports false. A failed synchronisation fails the
// call too, after it ran; a fault either wait sees releases what the host
// functions queued in c hold (sawError), as a Synchronize would.
func drainThenUnlessCaptured(c *Context, retry func() error, call func() error) (ran bool, err error) {
	var derr error
	for round := 1; ; round++ {
		derr = drain(c)
		busy := false
		var held []*Stream
		ran, err = unlessCaptured(c, retry, func() error {
			return bound(c, func() error {
				return relaxed(func() error {
					if round < drainRounds {
						if busy, held = queuedSince(c); busy {
							return nil // drain again, captures let in meanwhile
						}
					}
					serr := c.sync()
					if err := call(); err != nil {
						return err
					}
					return serr
				})
			})
		})
		for _, s := range held {
			s.release()
		}
		if !busy {
			break
		}
	}
	// A failure of the drain alone is no failure of the call: the
	// synchronisation waited for the same work, and reports a fault.
	_ = c.sawError(errors.Join(derr, err))
	return ran, err
}
