package nccl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// calls is the open Group: NCCL keeps a group per OS thread, so Group
// locks its goroutine to its thread and records the goroutine (groupID);
// operations on that goroutine belong to the group. Only one Group runs at
// a time (mu), and it holds the call lock of every device it queued
// operations for until it ends (held), so that no other goroutine calls
// those devices' communicators meanwhile. The group's operations are
// recorded (pending) and made in NCCL's group when the outermost Group
// ends, in one sequence of C calls (steps).
var calls struct {
	mu      sync.Mutex   // held by the open Group
	groupID atomic.Int64 // the goroutine of the open Group (groupID), 0 when none
	depth   int          // Group nesting on that thread
	pending []pendingOp  // the group's operations, made when it ends
	held    []int        // the devices whose call locks the group holds
	steps   []ccall.Step // the storage of the group's sequence of C calls
	fns     groupFns     // the entry points of the sequence besides the operations'
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

// pendingOp is an operation of the open group: it is made when the group
// ends, so what it names stays held, and its stream entered, until then.
// One refused has no c, s or sink: only its references wait for the
// group's end.
type pendingOp struct {
	c        *commState
	cuctx    cu.CUcontext
	s        any // the *driver.Stream, entered with sink (or held by q)
	sink     capture.Sink
	refs     [4]lifetime.Ref // the stream, the communicator, up to two buffers
	native   nativeCall      // the NCCL call
	step     int             // its step in the group's sequence, -1 when not in it
	switched bool            // the step before it makes its context current
	shared   bool            // s was entered by an earlier operation of the group, with sink
	quick    bool            // recorded by recordQuick: q holds the stream and buffers
	q        seam.Quick
}

func init() { seam.GroupHolds = groupHolds }

// groupHolds is seam.GroupHolds: whether the calling goroutine runs the
// open Group's function and an operation of the group holds s.
func groupHolds(s any) bool {
	if calls.groupID.Load() == 0 || !onGroupThread() {
		return false
	}
	for i := range calls.pending {
		if p := &calls.pending[i]; p.s != nil && p.s == s {
			return true
		}
	}
	return false
}

// onGroupThread reports whether the calling goroutine runs the open
// Group's function: the group's OS thread is locked to it, so no other
// goroutine runs there.
func onGroupThread() bool {
	t := calls.groupID.Load()
	return t != 0 && t == groupID()
}

// notInGroup refuses a communicator's creation or split when the caller
// runs the Group's function: the group holds the call locks of the devices
// it queued for until it ends (a split would wait for them forever), and
// NCCL would defer a creation inside its group to ncclGroupEnd.
func notInGroup(op string) error {
	if onGroupThread() {
		return invalid("%s: inside Group's function, which holds its devices until the group ends: call it before or after Group", op)
	}
	return nil
}

// Group runs f with the operations it queues grouped: NCCL launches them
// together when f returns (ncclGroupStart, the operations, ncclGroupEnd,
// made when the outermost Group returns, however f returns, a panic
// included). One process driving several GPUs must group the operations
// it queues for them (each would wait for the others), as must ranks that
// send to and receive from each other at once.
//
// Inside f, an operation is checked as outside and, when it passes,
// recorded: it returns nil, and NCCL sees it when the group ends. NCCL's
// refusal of an operation (which makes NCCL drop the whole group) is then
// in Group's error, naming the operation. The operations of a group are
// queued on their streams by ncclGroupEnd: the buffers and streams they
// name are held until then, and a capture on those streams cannot begin
// or end while f runs. So f must queue the group's operations itself, on
// its own goroutine, and must not begin or end a capture on their streams
// (begin it before Group, end it after): inside f, graph.BeginCapture (or
// Capture) and StreamCapture's End and Abort refuse such a stream with an
// error matching driver.ErrInvalidArgument. Other goroutines' operations on
// the devices the group queued for wait until it ends, and so does
// another goroutine's Group. Communicators are made before or after
// Group: inside f, InitRank, InitAll and Split refuse. Groups nest; the
// outermost launches. A group may mix collectives and point-to-point
// operations (a Send and its Recv between two GPUs of the process must be
// in one group).
//
// The error is f's, joined with NCCL's refusals of the group's operations
// and ncclGroupEnd's error.
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
	defer func() {
		if eerr := endGroup(outer); eerr != nil {
			err = errors.Join(err, eerr)
		}
	}()
	return f()
}

// endGroup ends the innermost group; the outermost makes the pending
// operations in NCCL's group and hands what they hold to their captures
// or releases it.
func endGroup(outer bool) error {
	calls.depth--
	if !outer {
		return nil
	}
	inProgress, opErr, ncclErr, ctxErr := runGroup()
	var err error
	if opErr != nil || ncclErr != nil || ctxErr != nil {
		err = errors.Join(opErr, wrapIf(ncclErr, 0), wrapIf(ctxErr, 0))
	}
	pending := calls.pending
	spare.mu.Lock()
	calls.pending, spare.ops = spare.ops, nil
	spare.mu.Unlock()
	if inProgress {
	waits:
		for i := range pending {
			if p := &pending[i]; p.c != nil && p.c.nonBlocking && p.step >= 0 {
				for j := range i {
					if pending[j].c == p.c && pending[j].step >= 0 {
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
	// Last first: an operation that shares an earlier one's entry of its
	// stream hands its capture what it names before that entry is left
	// (the capture may end then).
	for i := len(pending) - 1; i >= 0; i-- {
		pending[i].finish()
	}
	clear(pending)
	spare.mu.Lock()
	if cap(pending) > cap(spare.ops) {
		spare.ops = pending[:0]
	}
	spare.mu.Unlock()
	return err
}

// runGroup makes the open group's operations in NCCL's group, in one
// sequence of C calls: ncclGroupStart; each operation, after making its
// communicator's context current when it is not already (the first
// pushed over what the thread had current); ncclGroupEnd, with the last
// operation's context current (NCCL restores the current device after
// launching: with one current, it creates no context on device 0); then
// the pop that gives the thread back its context stack as the group found
// it. It returns whether ncclGroupEnd answered ncclInProgress
// (non-blocking communicators), NCCL's refusals of operations, the error of
// ncclGroupStart or ncclGroupEnd, and the context switches' errors, the
// last two as the raw tables give them. A group with no operation calls
// nothing.
func runGroup() (inProgress bool, opErr, ncclErr, ctxErr error) {
	steps, err := groupSteps(calls.steps[:0], calls.pending, &calls.fns)
	defer func() { calls.steps = steps[:0] }()
	if err != nil || len(steps) == 0 {
		return false, nil, err, nil
	}
	end := len(steps) - 2
	ran := ccall.Run(steps)
	if ran <= 2 && ran < len(steps) {
		// ncclGroupStart failed (nothing was made), or the first context
		// switch (NCCL's group holds no operation yet: it is ended, and
		// the thread's stack is as the group found it).
		if ran == 1 {
			return false, nil, ncclraw.GroupStartStatus(steps[0].R1), nil
		}
		return false, nil, ncclraw.GroupEnd(), ctxStatus(true, steps[1].R1)
	}
	for i := range calls.pending {
		if p := &calls.pending[i]; p.step >= 0 {
			if p.switched && p.step-1 > 1 { // a later switch, made before the operation
				ctxErr = errors.Join(ctxErr, ctxStatus(false, steps[p.step-1].R1))
			}
			if e := p.native.status(steps[p.step].R1); e != nil {
				// NCCL's last error text is the group's last by now.
				opErr = errors.Join(opErr, fmt.Errorf("nccl: %s in the group: %w", p.native.name, wrap(e, p.native.comm)))
			}
		}
	}
	ncclErr = ncclraw.GroupEndStatus(steps[end].R1)
	if isInProgress(ncclErr) {
		inProgress, ncclErr = true, nil
	}
	if e := ctxStatus(false, steps[end+1].R1); e != nil {
		ctxErr = errors.Join(ctxErr, e)
	}
	return inProgress, opErr, ncclErr, ctxErr
}

// groupSteps appends to steps the sequence of C calls of a group of the
// pending operations (see runGroup), and marks in each pending operation
// its step and whether a context switch comes before it. A group of no
// operation (each refused) has no step.
func groupSteps(steps []ccall.Step, pending []pendingOp, fns *groupFns) ([]ccall.Step, error) {
	var cur cu.CUcontext
	pushed := false
	for i := range pending {
		p := &pending[i]
		p.step, p.switched = -1, false
		if p.c == nil {
			continue // refused
		}
		if len(steps) == 0 {
			if err := fns.find(); err != nil {
				return steps, err
			}
			s := nextStep(&steps)
			s.Fn, s.Stop, s.N = fns.start, 1, 0
		}
		if !pushed || cur != p.cuctx {
			s := nextStep(&steps)
			if pushed {
				ctxStep(s, fns.set, p.cuctx)
			} else {
				ctxStep(s, fns.push, p.cuctx)
			}
			// Only the first switch stops the sequence (before NCCL saw
			// any operation). A later one failing leaves the previous
			// context current, which NCCL does not need to record the
			// operation: the group goes on whole, never launching part
			// of a collective, and the failure is reported.
			if pushed {
				s.Stop = 0
			}
			pushed, cur, p.switched = true, p.cuctx, true
		}
		if err := p.native.step(nextStep(&steps)); err != nil {
			return steps[:0], err
		}
		p.step = len(steps) - 1
	}
	if len(steps) == 0 {
		return steps, nil
	}
	s := nextStep(&steps)
	s.Fn, s.Stop, s.N = fns.end, 0, 0
	s = nextStep(&steps)
	ctxStep(s, fns.set, 0)
	s.Stop = 0
	return steps, nil
}

// nextStep appends a step to *steps and returns it, its result cleared:
// its other fields, the arguments included, are the caller's to set (a
// callee reads only its own arguments).
// Reusing the storage of the last group, it neither clears nor copies a
// whole step.
func nextStep(steps *[]ccall.Step) *ccall.Step {
	n := len(*steps)
	if n < cap(*steps) {
		*steps = (*steps)[:n+1]
	} else {
		*steps = append(*steps, ccall.Step{})
	}
	s := &(*steps)[n]
	s.R1 = 0
	return s
}

// finish ends a pending operation after ncclGroupEnd: queued into a
// capture, what it names goes to the capture's sink, even when
// ncclGroupEnd failed (it may have queued part of the group, and the sink
// releases it with the graph, or at once when the capture is discarded);
// otherwise it is released. Then the stream is left.
func (p *pendingOp) finish() {
	if p.quick {
		seam.Leave(unsafe.Pointer(p.s.(*driver.Stream)))
		seam.Release(&p.q)
		_ = p.refs[1].Release()
		return
	}
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
	if !p.shared {
		capture.Leave(p.s, p.sink)
	}
	_ = p.refs[0].Release()
}

// enteredInGroup reports whether an operation of the open group holds s
// entered, or held by a quick hold, until the group ends (one refused
// names no stream), and the sink it entered with (nil for uncaptured):
// the caller's operation, the group's last, goes where that one goes.
func enteredInGroup(s *driver.Stream) (capture.Sink, bool) {
	ops := calls.pending[:len(calls.pending)-1]
	for i := range ops {
		if p := &ops[i]; p.s == any(s) {
			return p.sink, true
		}
	}
	return nil, false
}
