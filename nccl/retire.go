package nccl

import (
	"context"
	"errors"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Retiring a communicator. NCCL's finalize waits for the communicator's
// queued operations, and a blocking one cannot be interrupted: with a
// peer gone, it would wait for good, and aborting it meanwhile would free
// the communicator under it. So the communicator's last release first
// waits, without blocking a thread on CUDA, for the streams it queued
// work on to pass that work (a marker event on each, polled), watching
// NCCL for a failure all the while: a failure aborts the communicator,
// which ends its kernels. Only then does it finalize (with nothing left
// to wait for) and destroy it. When the streams are idle already this
// happens at once, in Close; otherwise on a goroutine of its own.

// tracked is a stream a communicator queued work on, held until the
// communicator is retired.
type tracked struct {
	s   *driver.Stream
	ref lifetime.Ref
}

// track remembers s, which the call holds by held, as a stream st queued
// work on. The stream of the communicator's last operation is seen without
// a lock (the common case: one stream); only a new one takes opMu. The
// caller holds the communicator, so no retirement runs meanwhile.
func (st *commState) track(s *driver.Stream, held lifetime.Ref) {
	if st.last.Load() == s {
		return
	}
	st.opMu.Lock()
	defer st.opMu.Unlock()
	for _, t := range st.streams {
		if t.s == s {
			st.last.Store(s)
			return
		}
	}
	if r, ok := held.Clone(); ok {
		st.streams = append(st.streams, tracked{s, r})
		st.last.Store(s)
	}
}

// dropStreams releases the tracked streams.
func (st *commState) dropStreams() {
	st.opMu.Lock()
	streams := st.streams
	st.streams = nil
	st.last.Store(nil)
	st.opMu.Unlock()
	for _, t := range streams {
		_ = t.ref.Release()
	}
}

// retirement waits for a communicator's streams, then finalizes it.
type retirement struct {
	st    *commState
	marks []seam.Marker // per tracked stream: its marker, once recorded
	done  []bool        // per tracked stream: passed
	err   error         // the failure seen meanwhile, which aborts
}

// step looks once: it records the markers not yet recorded (a stream
// being captured is tried again later), asks whether each has passed,
// and asks NCCL whether the communicator failed. It reports whether the
// waiting is over.
func (w *retirement) step() bool {
	st := w.st
	if w.done == nil {
		w.done = make([]bool, len(st.streams))
	}
	all := true
	for i, t := range st.streams {
		if w.done[i] {
			continue
		}
		if w.marks[i] == nil {
			m, ok, err := seam.Mark(t.s)
			switch {
			case err != nil:
				// Nothing can be waited for on this stream: finalizing
				// will wait for it instead.
				w.done[i] = true
				continue
			case !ok:
				all = false
				continue
			}
			w.marks[i] = m
		}
		passed, err := w.marks[i].Passed()
		if passed || err != nil {
			w.done[i] = true
			continue
		}
		all = false
	}
	if all {
		return true
	}
	var r ncclraw.Result
	st.mu.Lock() // one query at a time (see waitInProgress)
	qerr := ncclraw.CommGetAsyncError(st.h, &r)
	st.mu.Unlock()
	if err := qerr; err != nil {
		w.err = wrap(err, st.h)
	} else if r != ncclraw.Success && r != ncclraw.InProgress {
		w.err = newError("ncclCommGetAsyncError", Status(r), st.h)
	}
	return w.err != nil
}

// run polls until the waiting is over, then finishes; the error goes
// where the errors of releases nobody waits for go.
func (w *retirement) run() {
	pause := 50 * time.Microsecond
	for !w.step() {
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
	if err := w.finish(); err != nil {
		release.NoteError(err)
	}
}

// finish finalizes and destroys the communicator, or aborts it after a
// failure, and releases what it held.
func (w *retirement) finish() error {
	st := w.st
	for _, m := range w.marks {
		if m != nil {
			m.Release()
		}
	}
	// No other call on the device's communicators meanwhile (a Group on
	// another goroutine that holds the device ends first; Close inside a
	// Group's function hands its release to the release queue).
	deviceLock(st.dev).Lock()
	err := w.err
	if err == nil {
		err = st.call(func() error { return ncclraw.CommFinalize(st.h) })
		if isInProgress(err) {
			err = nil
		}
		if err == nil && st.nonBlocking {
			err = st.waitInProgress(context.Background())
		} else if err != nil {
			err = wrap(err, st.h)
		}
	}
	var derr error
	if err != nil {
		// A failure: abort frees what is left and ends the kernels.
		derr = st.call(func() error { return ncclraw.CommAbort(st.h) })
	} else {
		derr = st.call(func() error { return ncclraw.CommDestroy(st.h) })
	}
	deviceLock(st.dev).Unlock()
	st.mu.Lock()
	st.phase.Store(gone)
	if err != nil {
		st.err = err
	}
	st.mu.Unlock()
	st.dropStreams()
	return st.releaseContext(errors.Join(err, wrapIf(derr, 0)))
}
