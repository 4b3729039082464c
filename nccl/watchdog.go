package nccl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/internal/release"
)

// watchEvery is how often the watchdog asks NCCL whether a communicator
// failed.
const watchEvery = 50 * time.Millisecond

// DefaultAbortTimeout is how long Abort, and the watchdog's abort of a
// failed communicator, wait for ncclCommAbort when Config.AbortTimeout is
// not set.
const DefaultAbortTimeout = 10 * time.Second

// ErrAborted is matched by the error of every call on a communicator that
// Abort ended.
var ErrAborted = errors.New("nccl: the communicator was aborted")

// ErrAbortTimeout is matched by Abort's error when ncclCommAbort did not
// return within the communicator's abort timeout; it goes on in the
// background.
var ErrAbortTimeout = errors.New("nccl: the abort did not finish in time")

// The watchdog: one goroutine, running while communicators are live, that
// polls each with ncclCommGetAsyncError (never from a host function or
// callback: a kernel waiting for a dead peer would block it) and aborts
// the failed ones.
var watchdog struct {
	mu      sync.Mutex
	comms   map[*commState]struct{}
	running bool
}

// watch registers st with the watchdog, starting it if needed.
func watch(st *commState) {
	watchdog.mu.Lock()
	defer watchdog.mu.Unlock()
	if watchdog.comms == nil {
		watchdog.comms = make(map[*commState]struct{})
	}
	watchdog.comms[st] = struct{}{}
	if !watchdog.running {
		watchdog.running = true
		go watchLoop()
	}
}

// unwatch forgets st.
func unwatch(st *commState) {
	watchdog.mu.Lock()
	delete(watchdog.comms, st)
	watchdog.mu.Unlock()
}

// watchLoop checks every live communicator every watchEvery, and ends
// when none is left.
func watchLoop() {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	var comms []*commState
	for range t.C {
		watchdog.mu.Lock()
		if len(watchdog.comms) == 0 {
			watchdog.running = false
			watchdog.mu.Unlock()
			return
		}
		comms = comms[:0]
		for st := range watchdog.comms {
			comms = append(comms, st)
		}
		watchdog.mu.Unlock()
		for _, st := range comms {
			_ = st.check(false)
		}
		clear(comms)
	}
}

// Abort ends the communicator at once (ncclCommAbort): its operations
// still queued or running stop (their results are undefined), and every
// later call returns an error matching ErrAborted. Use it when a peer is
// known to be gone. It waits at most the communicator's abort timeout
// (Config.AbortTimeout) for NCCL, and then returns an error matching
// ErrAbortTimeout while the abort finishes in the background. Inside
// Group's function, where no NCCL call of another goroutine can run, it
// returns at once and the abort runs when the group ends. Aborting a
// communicator that failed or was aborted already returns nil. Close is
// still needed to drop the Go side (or let the Comm go).
func (c *Comm) Abort() error {
	if c == nil || c.st == nil {
		return invalid("Comm.Abort: nil or zero communicator")
	}
	if !c.obj.Acquire() {
		if c.obj.Destroyed() {
			return nil // finalized and destroyed already
		}
		return fmt.Errorf("nccl: Comm.Abort: %w", driver.ErrClosed)
	}
	defer c.release()
	return c.st.abortNow(ErrAborted, true)
}

// abortNow aborts the communicator because of why, unless it failed or was
// aborted already, and with wait waits at most its abort timeout for the
// abort.
func (st *commState) abortNow(why error, wait bool) error {
	st.mu.Lock()
	if st.phase.Load() != live {
		// Failed or aborted already, or being finalized: finalizing
		// reports a failure and aborts.
		st.mu.Unlock()
		return nil
	}
	st.phase.Store(aborting)
	st.err = why
	done := make(chan struct{})
	st.abortDone = done
	timeout := st.abortTimeout
	st.mu.Unlock()
	go func() {
		// No operation may be queued on the communicator meanwhile
		// (NCCL forbids two threads on one communicator).
		// A group on another goroutine holding the device ends first.
		deviceLock(st.dev).Lock()
		st.opMu.Lock()
		err := st.call(func() error { return ncclraw.CommAbort(st.h) })
		st.opMu.Unlock()
		deviceLock(st.dev).Unlock()
		st.mu.Lock()
		st.abortErr = wrapIf(err, 0)
		st.phase.Store(gone)
		st.mu.Unlock()
		if err != nil {
			release.NoteError(fmt.Errorf("nccl: ncclCommAbort: %w", err))
		}
		close(done)
	}()
	if !wait || onGroupThread() {
		// Not waited for; on the group's thread, the abort waits for
		// the group this goroutine runs and cannot finish before Group
		// returns.
		return nil
	}
	select {
	case <-done:
		return st.abortErr
	case <-time.After(timeout):
		return fmt.Errorf("nccl: Comm.Abort: ncclCommAbort did not return within %v (it goes on): %w", timeout, ErrAbortTimeout)
	}
}

// Wait waits until s has run the work queued on it so far, or until the
// communicator fails, or ctx is done, whichever comes first. Unlike
// s.Synchronize, it returns when a peer is gone: NCCL's kernels waiting
// for that peer never end until the communicator is aborted, which the
// watchdog (or Wait itself, when it sees the failure first) does. It
// returns nil once s is idle and the communicator has not failed, the
// communicator's error when it failed, and ctx's error when ctx ended
// first (the work goes on). s must belong to the communicator's context.
func (c *Comm) Wait(ctx context.Context, s *driver.Stream) error {
	const op = "Comm.Wait"
	if ctx == nil {
		return invalid("%s: nil Go context", op)
	}
	if s == nil {
		return fmt.Errorf("nccl: %s: %w", op, driver.ErrNilStream)
	}
	if err := c.acquire(op); err != nil {
		return err
	}
	defer c.release()
	if _, err := c.streamOf(op, s); err != nil {
		return err
	}
	pause := time.Microsecond
	for {
		done, err := s.Query()
		if err != nil {
			return err
		}
		if cerr := c.st.check(true); cerr != nil {
			return fmt.Errorf("nccl: %s: the communicator failed: %w", op, cerr)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Millisecond)
	}
}
