package nccl

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/ctxcall"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Comm is one rank's communicator: the rank's place in a group of ranks
// (one per GPU) that run collectives together, bound to one CUDA device.
//
// # Lifetime
//
// Close releases the Comm's own reference. The communicator is finalized
// and destroyed (ncclCommFinalize, then ncclCommDestroy) once nothing holds
// it (no call in flight, no graph that captured one of its operations) and
// the streams it queued operations on have run them: at once, in Close,
// when they have; otherwise Close returns and the communicator retires in
// the background once they have. Meanwhile its failure is still watched
// for: a peer gone aborts it instead (ncclCommAbort), which ends its
// operations still waiting, and the error goes to lifetime.Errors. So
// Close never waits for a peer. The streams a communicator queued work on
// stay held until it is retired. A Comm dropped without Close is released
// the same way by a cleanup. A Comm that failed or was aborted is already
// released: Close only drops the Go side.
//
// # Failure
//
// A watchdog goroutine asks NCCL, every 50 ms, whether each communicator
// has failed (ncclCommGetAsyncError: a peer gone, a network error). When
// one has, it aborts the communicator (ncclCommAbort), which ends its
// kernels still waiting for a peer, so that Synchronize on their streams
// returns; from then on every call on the Comm returns that error, and Err
// and Wait report it. Abort does the same on request. NCCL's abort can
// itself take long (it waits for NCCL's threads): Abort waits at most
// AbortTimeout for it, and then returns an error while the abort finishes
// in the background. Operations are queued one at a time (see
// Concurrency), so those of every communicator of the process wait until
// the abort has returned.
//
// A graph that captured an operation of a communicator must not be launched
// after the communicator failed or was aborted: its kernels would use the
// communicator's freed state.
//
// # Concurrency
//
// A Comm is safe for concurrent use. NCCL forbids two threads to call
// communicators of one device at once, so this package queues the calls
// for each device one at a time (each takes a few microseconds), while
// communicators of different devices are called in parallel: one
// goroutine per GPU, each with its own communicator, is the usual way to
// drive several GPUs from one process. A Group holds the devices of the
// operations it queues until it ends, and only one Group runs at a time.
// Creating communicators (InitRank, InitAll) and the watchdog's checks run
// beside them all; Split and Abort wait for the calls of their device.
type Comm struct {
	obj     lifetime.Object
	st      *commState
	ctx     *driver.Context
	cleanup runtime.Cleanup
}

// commState is what the Comm's destroy, its cleanup and the watchdog need:
// nothing in it points to the Comm, so a dropped Comm becomes unreachable.
type commState struct {
	// What an operation reads comes first, within one cache line
	// (NCCL's and CUDA's calls evict the caller's data between
	// operations: each line touched is a miss).
	h           ncclraw.Comm
	cuctx       cu.CUcontext // held through ctxRef
	dev         int
	nonBlocking bool
	phase       atomic.Int32                  // a phase; changed under mu, read without it by operations
	last        atomic.Pointer[driver.Stream] // the stream tracked last
	ctxRef      lifetime.Ref
	rank, size  int

	abortTimeout time.Duration
	strs         [][]byte          // the configuration's C strings, kept for the communicator's life
	opMu         sync.Mutex        // held by the calls that need the communicator alone beside its device's call lock (abort, split), and by track
	streams      []tracked         // the streams it queued work on, held until it is retired (under opMu)
	mu           sync.Mutex        // phase changes, err, abortDone, abortErr; held by each ncclCommGetAsyncError
	err          error             // why the communicator failed or was aborted
	abortDone    chan struct{}     // closed when ncclCommAbort returned
	abortErr     error             // its error, once abortDone is closed
	pins         []*runtime.Pinner // memory NCCL may still write, pinned until the communicator is released
}

// The phases of a communicator's life (commState.phase).
const (
	live       = iota // usable
	aborting          // ncclCommAbort was started (failure or Abort)
	destroying        // the last reference is gone: finalize and destroy under way
	gone              // destroyed, or aborted and the abort returned
)

// newComm wraps st, a new communicator made in ctx (st holds ctx's
// reference), and registers it with the watchdog. On failure it aborts the
// communicator and releases the reference.
func newComm(st *commState, ctx *driver.Context) (*Comm, error) {
	var n, r, d int32
	err := st.call(func() error { return ncclraw.CommCount(st.h, &n) })
	if err == nil {
		err = st.call(func() error { return ncclraw.CommUserRank(st.h, &r) })
	}
	if err == nil {
		err = st.call(func() error { return ncclraw.CommCuDevice(st.h, &d) })
	}
	if err != nil {
		err = wrap(err, st.h)
		st.abortThenRelease(err)
		return nil, err
	}
	st.size, st.rank, st.dev = int(n), int(r), int(d)
	c := &Comm{st: st, ctx: ctx}
	c.obj.Init(func() error {
		c.cleanup.Stop()
		if onGroupThread() {
			// The group holds the device's call lock until it ends (and
			// its operations the communicator): destroyed off this
			// thread, once the group is over.
			release.Defer(lifetime.OwnerFunc(st.destroy))
			return nil
		}
		return st.destroy()
	})
	c.cleanup = runtime.AddCleanup(c, func(st *commState) { release.Defer(droppedComm{st}) }, st)
	watch(st)
	return c, nil
}

// lockForSplit takes the calls of the communicator's device, then the
// communicator's own: a Group on another goroutine that queued operations
// on it holds its device until the group ends.
func (st *commState) lockForSplit() {
	deviceLock(st.dev).Lock()
	st.opMu.Lock()
}

// unlockForSplit undoes lockForSplit.
func (st *commState) unlockForSplit() {
	st.opMu.Unlock()
	deviceLock(st.dev).Unlock()
}

// droppedComm releases the communicator of a Comm dropped without Close.
type droppedComm struct{ st *commState }

func (d droppedComm) Release() error {
	release.Counters.Objects.Add(-1) // the Comm's lifetime Object, never released
	return lifetime.OwnerFunc(d.st.destroy).Release()
}

// call runs f with the communicator's context current on a locked thread,
// as NCCL's calls need (they launch on the current device's context).
func (st *commState) call(f func() error) error { return bound(st.cuctx, f) }

// bound runs f with h current on the calling OS thread, locked for the
// call, and leaves the thread without a current context, as package driver
// does.
func bound(h cu.CUcontext, f func() error) error { return ctxcall.Bound(h, f) }

// Rank is this communicator's rank, from 0 to Size-1 (-1 for a nil Comm).
func (c *Comm) Rank() int {
	if c == nil || c.st == nil {
		return -1
	}
	return c.st.rank
}

// Size is the number of ranks (0 for a nil Comm).
func (c *Comm) Size() int {
	if c == nil || c.st == nil {
		return 0
	}
	return c.st.size
}

// Device is the ordinal of the CUDA device the communicator uses (-1 for a
// nil Comm).
func (c *Comm) Device() int {
	if c == nil || c.st == nil {
		return -1
	}
	return c.st.dev
}

// Context is the CUDA context the communicator was made in: the device's
// primary context (nil for a nil Comm). Its operations run on streams of
// this context, on buffers of it.
func (c *Comm) Context() *driver.Context {
	if c == nil {
		return nil
	}
	return c.ctx
}

// acquire holds c for a call, or explains why it cannot be used.
func (c *Comm) acquire(op string) error {
	if c == nil || c.st == nil {
		return invalid("%s: nil or zero communicator", op)
	}
	if !c.obj.Acquire() {
		return fmt.Errorf("nccl: %s: %w", op, driver.ErrClosed)
	}
	if c.st.phase.Load() == live {
		return nil // the common case, without failure's lock
	}
	if err := c.st.failure(); err != nil {
		_ = c.obj.Release()
		return fmt.Errorf("nccl: %s: the communicator failed: %w", op, err)
	}
	return nil
}

func (c *Comm) release() { _ = c.obj.Release() }

// failure is the error that ended the communicator, or nil while it is live.
func (st *commState) failure() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.phase.Load() == live {
		return nil
	}
	if st.err == nil {
		return driver.ErrClosed
	}
	return st.err
}

// Err reports whether the communicator has failed: nil while it works, the
// error that ended it once NCCL reported an asynchronous error (then the
// watchdog aborted it) or Abort was called. It reads NCCL's state at once
// (ncclCommGetAsyncError) rather than waiting for the watchdog.
func (c *Comm) Err() error {
	if c == nil || c.st == nil {
		return invalid("Comm.Err: nil or zero communicator")
	}
	if err := c.st.failure(); err != nil {
		return err
	}
	if !c.obj.Acquire() {
		return c.st.failure()
	}
	defer c.release()
	return c.st.check(true)
}

// check asks NCCL for the communicator's asynchronous error and aborts it
// when there is one; it returns that error (nil while none, or while a
// non-blocking operation is still in progress). With wait, it waits for
// the abort as Abort does; the watchdog does not, so that one slow abort
// holds up neither the others nor the checks.
func (st *commState) check(wait bool) error {
	st.mu.Lock()
	if st.phase.Load() != live {
		err := st.err
		st.mu.Unlock()
		return err
	}
	var r ncclraw.Result
	err := ncclraw.CommGetAsyncError(st.h, &r) // NCCL allows it beside any other call but itself (waitInProgress)
	st.mu.Unlock()
	if err == nil && r != ncclraw.Success && r != ncclraw.InProgress {
		err = newError("ncclCommGetAsyncError", Status(r), st.h)
	} else if err != nil {
		err = wrap(err, st.h)
	}
	if err == nil {
		return nil
	}
	_ = st.abortNow(err, wait)
	return st.failure()
}

// Close releases the communicator: see Lifetime in Comm's documentation.
// It returns what finalizing and destroying it returned when that happened
// at once (nil when the communicator retires later); an error the
// communicator failed with is not returned again. Idempotent.
func (c *Comm) Close() error {
	if c == nil {
		return invalid("Comm.Close: nil communicator")
	}
	if c.st == nil {
		return nil
	}
	return c.obj.Close()
}

// destroy retires the communicator once the last reference is gone (see
// retire.go): at once when the streams it queued work on have run it,
// otherwise in the background once they have; or, when it failed or was
// aborted, once the abort has returned.
func (st *commState) destroy() error {
	unwatch(st)
	st.mu.Lock()
	switch st.phase.Load() {
	case aborting, gone:
		done := st.abortDone
		st.mu.Unlock()
		if done != nil {
			select {
			case <-done:
			default:
				go func() {
					<-done
					st.dropStreams()
					_ = st.releaseContext(nil)
				}()
				return nil
			}
		}
		st.dropStreams()
		return st.releaseContext(nil)
	}
	st.phase.Store(destroying)
	st.mu.Unlock()
	w := &retirement{st: st, marks: make([]seam.Marker, len(st.streams))}
	if w.step() {
		return w.finish()
	}
	go w.run()
	return nil
}

// abortThenRelease aborts a communicator no Comm was made for, and
// releases its context once the abort has returned.
func (st *commState) abortThenRelease(why error) {
	_ = st.abortNow(why, true)
	st.mu.Lock()
	done := st.abortDone
	st.mu.Unlock()
	if done == nil {
		_ = st.releaseContext(nil)
		return
	}
	go func() {
		<-done
		_ = st.releaseContext(nil)
	}()
}

// keepPinned keeps p's pins until the communicator is released: memory
// NCCL may still write (a failed non-blocking split's result).
func (st *commState) keepPinned(p *runtime.Pinner) {
	st.mu.Lock()
	st.pins = append(st.pins, p)
	st.mu.Unlock()
}

// releaseContext drops the communicator's reference on its context and
// returns err joined with that release's error. NCCL is done with the
// communicator: the memory kept pinned for it is let go.
func (st *commState) releaseContext(err error) error {
	st.mu.Lock()
	pins := st.pins
	st.pins = nil
	st.mu.Unlock()
	for _, p := range pins {
		p.Unpin()
	}
	if st.ctxRef.Valid() {
		err = errors.Join(err, st.ctxRef.Release())
		st.ctxRef = lifetime.Ref{}
	}
	return err
}

// wrapIf is wrap for an error that may be nil.
func wrapIf(err error, comm ncclraw.Comm) error {
	if err == nil {
		return nil
	}
	return wrap(err, comm)
}

// streamOf returns s's raw handle for a call of c's: s must be a stream of
// c's context. The caller holds s.
func (c *Comm) streamOf(op string, s *driver.Stream) (ncclraw.Stream, error) {
	sc := s.Context()
	if sc != c.ctx && !sc.Same(c.ctx) {
		return 0, invalid("%s: the stream belongs to another context than the communicator (device %d's primary context)", op, c.st.dev)
	}
	return ncclraw.Stream(seam.Stream(s)), nil
}
