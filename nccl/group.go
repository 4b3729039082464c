package nccl

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// calls is the open Group: NCCL keeps a group per OS thread, so Group
// locks its goroutine to its thread and records the goroutine (groupID);
// operations on that goroutine belong to the group. Only one Group runs at a time (mu), and
// it holds the call lock of every device it queued operations for until it
// ends (held), so that no other goroutine calls those devices'
// communicators meanwhile.
var calls struct {
	mu      sync.Mutex   // held by the open Group
	groupID atomic.Int64 // the goroutine of the open Group (groupID), 0 when none
	depth   int          // Group nesting on that thread
	pending []pendingOp  // the group's operations, launched by ncclGroupEnd
	held    []int        // the devices whose call locks the group holds
	current bool         // an operation pushed its context on the group's thread, current until the group ends
	cur     cu.CUcontext // the context current there when current: the last operation's that was made current
}

// spare is the storage of an ended group's pending operations, handed to
// the next group once the ended group has finished them (after it gave up
// calls.mu), so that a group in a loop allocates nothing.
var spare struct {
	mu  sync.Mutex
	ops []pendingOp
}

// The call locks of devices: NCCL forbids two threads to call
// communicators of one device at once.
var (
	devLocks     [64]sync.Mutex
	devLocksMore sync.Map // ordinal (64 and up) → *sync.Mutex
)

// deviceLock is the call lock of device ordinal dev.
func deviceLock(dev int) *sync.Mutex {
	if dev >= 0 && dev < len(devLocks) {
		return &devLocks[dev]
	}
	m, _ := devLocksMore.LoadOrStore(dev, new(sync.Mutex))
	return m.(*sync.Mutex)
}

// lockDevice takes the call lock of dev for an operation, unless the
// calling goroutine runs the open Group: then the group takes it, once,
// and holds it until it ends. It reports whether the caller is in the
// group.
func lockDevice(dev int) (inGroup bool) {
	if onGroupThread() {
		if !slices.Contains(calls.held, dev) {
			deviceLock(dev).Lock()
			calls.held = append(calls.held, dev)
		}
		return true
	}
	deviceLock(dev).Lock()
	return false
}

// unlockDevice undoes lockDevice.
func unlockDevice(dev int, inGroup bool) {
	if !inGroup {
		deviceLock(dev).Unlock()
	}
}

// pendingOp is an operation of the open group: NCCL launches it at
// ncclGroupEnd, so what it names stays held, and its stream entered,
// until then. One NCCL refused has no c, s or sink: only its references
// wait for the group's end.
type pendingOp struct {
	c     *commState
	cuctx cu.CUcontext
	s     any // the *driver.Stream, entered with sink
	sink  capture.Sink
	refs  [4]lifetime.Ref // the stream, the communicator, up to two buffers
}

// onGroupThread reports whether the calling goroutine runs the open
// Group's function: the group's OS thread is locked to it, so no other
// goroutine runs there.
func onGroupThread() bool {
	t := calls.groupID.Load()
	return t != 0 && t == groupID()
}

// notInGroup refuses a call that NCCL would defer to the open group's
// ncclGroupEnd (creating a communicator) when the caller runs the Group's
// function.
func notInGroup(op string) error {
	if onGroupThread() {
		return invalid("%s: inside Group's function, where NCCL would make the communicator only when the group ends: call it before or after Group", op)
	}
	return nil
}

// Group runs f with the operations it queues grouped (ncclGroupStart, then
// ncclGroupEnd, which is called however f returns, a panic included): NCCL
// launches them together when f returns. One process driving several GPUs
// must group the operations it queues for them (each would wait for the
// others), as must ranks that send to and receive from each other at once.
//
// The operations of a group are queued on their streams by ncclGroupEnd:
// the buffers and streams they name are held until then, and a capture on
// those streams cannot begin or end while f runs. So f must queue the
// group's operations itself, on its own goroutine, and must not begin or
// end a capture on their streams (begin it before Group, end it after).
// Other goroutines' operations on the devices the group queued for wait
// until it ends, and so does another goroutine's Group.
// Communicators are made before or after Group: inside f, InitRank,
// InitAll and Split refuse. Groups nest; the outermost launches. A group
// may mix collectives and point-to-point operations (a Send and its Recv
// between two GPUs of the process must be in one group).
//
// The error is f's, joined with ncclGroupEnd's.
func Group(f func() error) (err error) {
	if f == nil {
		return invalid("Group: nil function")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	id := groupID()
	outer := calls.groupID.Load() != id
	if outer {
		calls.mu.Lock()
		calls.groupID.Store(id)
	}
	calls.depth++
	if serr := ncclraw.GroupStart(); serr != nil {
		calls.depth--
		if outer {
			calls.groupID.Store(0)
			calls.mu.Unlock()
		}
		return wrap(serr, 0)
	}
	defer func() {
		eerr := endGroup(outer)
		err = errors.Join(err, eerr)
	}()
	return f()
}

// endGroup ends the innermost group; the outermost launches the pending
// operations and hands what they hold to their captures or releases it.
func endGroup(outer bool) error {
	var h cu.CUcontext
	if outer {
		for i := range calls.pending {
			if h = calls.pending[i].cuctx; h != 0 { // not a refused one
				break
			}
		}
	}
	// NCCL restores the current device after launching: with one current,
	// it creates no context on device 0.
	var err error
	switch {
	case outer && calls.current:
		// An operation's context is current (see call), pushed on the
		// group's locked thread, and alive: its operation, pending, holds
		// its stream until finish. ncclGroupEnd runs with it, then it is
		// popped, leaving the thread's stack as the group found it.
		err = ncclraw.GroupEnd()
		if e := cu.CtxSetCurrent(0); err == nil {
			err = e
		}
		calls.current, calls.cur = false, 0
	case h != 0:
		err = bound(h, ncclraw.GroupEnd)
	default:
		err = ncclraw.GroupEnd()
	}
	inProgress := isInProgress(err)
	if inProgress {
		err = nil
	}
	calls.depth--
	if !outer {
		return wrapIf(err, 0)
	}
	pending := calls.pending
	spare.mu.Lock()
	calls.pending, spare.ops = spare.ops, nil
	spare.mu.Unlock()
	if inProgress {
	waits:
		for i := range pending {
			if p := &pending[i]; p.c != nil && p.c.nonBlocking {
				for j := range i {
					if pending[j].c == p.c {
						continue waits // waited for already
					}
				}
				if werr := p.c.waitInProgress(context.Background()); werr != nil {
					// The others are still waited for: NCCL wants no
					// call on a communicator in progress.
					err = errors.Join(err, werr)
				}
			}
		}
	}
	for _, d := range calls.held {
		deviceLock(d).Unlock()
	}
	calls.held = calls.held[:0]
	calls.groupID.Store(0)
	calls.mu.Unlock()
	// Released once the locks are given back: a buffer's free waits for the
	// context's work, and a communicator's finalize for its operations,
	// which may wait for ranks whose goroutines wait for the lock.
	for i := range pending {
		pending[i].finish()
	}
	clear(pending)
	spare.mu.Lock()
	if cap(pending) > cap(spare.ops) {
		spare.ops = pending[:0]
	}
	spare.mu.Unlock()
	return wrapIf(err, 0)
}

// finish ends a pending operation after ncclGroupEnd: queued into a
// capture, what it names goes to the capture's sink, even when
// ncclGroupEnd failed (it may have queued part of the group, and the sink
// releases it with the graph, or at once when the capture is discarded);
// otherwise it is released. Then the stream is left.
func (p *pendingOp) finish() {
	keep := p.sink != nil
	var owners []release.Owner
	for i := 1; i < len(p.refs); i++ { // the stream's reference (0) is only the call's
		if r := p.refs[i]; r.Valid() {
			if keep {
				owners = append(owners, r)
			} else {
				_ = r.Release()
			}
		}
	}
	if keep {
		p.sink.Keep(owners)
	}
	capture.Leave(p.s, p.sink)
	_ = p.refs[0].Release()
}
