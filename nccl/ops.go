package nccl

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// What every operation promises (collectives and point-to-point alike):
//
//   - it is queued on stream s, in s's order: it reads its send buffer
//     once the work queued on s before it has run, and the work queued
//     after it sees its receive buffer written. Order work on other
//     streams with events, as for a kernel;
//   - s is a stream of the communicator's context, and every buffer is
//     memory of that context; element types pick NCCL's data type;
//   - the buffers and the communicator stay allocated until s has passed
//     the operation, whatever is closed meanwhile; inside a capture
//     (graph.Capture), the graph holds them like a kernel's buffers;
//   - a refused call (a nil, closed or mismatched argument, a wrong count)
//     queues nothing.

// kind is which NCCL function an operation calls.
type kind uint8

const (
	opAllReduce kind = iota
	opBroadcast
	opReduce
	opAllGather
	opReduceScatter
	opSend
	opRecv
)

// operation is one call, marshalled: the buffers are *driver.Buffer values
// of one element type (nil where the rank passes none), as interfaces for
// the general path and as pointers for the quick one.
type operation struct {
	name         string
	kind         kind
	send, recv   any
	sendP, recvP unsafe.Pointer
	count        uintptr
	dt           ncclraw.DataType
	red          ncclraw.RedOp
	peer         int32 // the root or the peer
}

// enqueue checks and queues o on s for c.
func (c *Comm) enqueue(s *driver.Stream, o *operation) error {
	if ok, err := c.enqueueQuick(s, o); ok {
		return err
	}
	if err := c.acquire(o.name); err != nil {
		return err
	}
	if s == nil {
		c.release()
		return fmt.Errorf("nccl: %s: %w", o.name, driver.ErrNilStream)
	}
	sref, err := seam.Hold(s)
	if err != nil {
		c.release()
		return fmt.Errorf("nccl: %s: %w", o.name, err)
	}
	err = c.enqueueHeld(s, sref, o)
	c.release()
	return err
}

// enqueueQuick is enqueue's common case: a blocking communicator's
// operation outside a group, on the stream of its last operation (tracked
// already), uncaptured, on open buffers of the stream's context (inside
// the caller's Group, recordQuick records it instead). It holds
// the communicator, then takes the device's call lock, then holds the
// stream and buffers the cheapest way (seam.Use), as the general path
// takes the lock before it enters the stream, and makes the call in one
// crossing into C, filling the device's own sequence in place. It is
// written out in one function: NCCL's calls evict the caller's code from
// the CPU caches, and every function run costs misses of its own. It
// reports false, having made nothing and holding nothing, for the general
// path (enqueueHeld), which does the same work in every case or explains
// the refusal.
func (c *Comm) enqueueQuick(s *driver.Stream, o *operation) (bool, error) {
	if c == nil || s == nil {
		return false, nil
	}
	st := c.st
	if st == nil || st.last.Load() != s || uint(st.dev) >= uint(len(devSeqs)) {
		return false, nil
	}
	if calls.groupID.Load() != 0 && onGroupThread() {
		return c.recordQuick(s, o)
	}
	if st.nonBlocking || !c.obj.Acquire() {
		return false, nil
	}
	var q seam.Quick
	o.quick(&q)
	mu := &devLocks[st.dev]
	mu.Lock()
	if st.phase.Load() != live || !seam.Use(unsafe.Pointer(s), &q) {
		mu.Unlock()
		_ = c.obj.Release()
		return false, nil
	}
	send, recv := o.pointers(&q)
	seq := &devSeqs[st.dev]
	ok := q.Ctx == uintptr(st.cuctx) && fillStep(seq.Op(), o.kind, send, recv, o.count, o.dt, o.red, o.peer, st.h, ncclraw.Stream(q.Strm)) == nil
	var err error
	if ok {
		err = seq.Run(st.cuctx, func(r uintptr) error {
			n := nativeOf(o, st.h, ncclraw.Stream(q.Strm), send, recv)
			return n.blockingStatus(r)
		})
		if isInProgress(err) {
			err = st.waitInProgress(context.Background())
		}
	}
	seam.Leave(unsafe.Pointer(s))
	mu.Unlock()
	seam.Release(&q)
	_ = c.obj.Release()
	if !ok {
		return false, nil
	}
	if err != nil {
		return true, wrap(err, st.h)
	}
	return true, nil
}

// quick names o's buffers in q, for seam.Use: an in-place operation's
// buffer once.
func (o *operation) quick(q *seam.Quick) {
	if o.sendP != nil {
		q.Buf[0], q.N = o.sendP, 1
	}
	if o.recvP != nil && o.recvP != o.sendP {
		q.Buf[q.N] = o.recvP
		q.N++
	}
}

// pointers are the device addresses of o's send and receive buffers (0
// for none), from q, which o.quick filled and seam.Use held.
func (o *operation) pointers(q *seam.Quick) (send, recv uintptr) {
	switch {
	case o.sendP == nil:
		return 0, q.Ptr[0]
	case o.recvP == nil:
		return q.Ptr[0], 0
	case o.recvP == o.sendP:
		return q.Ptr[0], q.Ptr[0]
	}
	return q.Ptr[0], q.Ptr[1]
}

// recordQuick is enqueueQuick inside the caller's Group (c's stream s is
// tracked already): it records the operation, in its place among the
// group's, with the communicator held by a reference and the stream and
// buffers the cheapest way (seam.Use) until the group ends (finish). The
// device's call lock, which the group then holds until it ends, is taken
// before the stream is held, as in the general path. It reports false,
// having recorded nothing and holding nothing, for the general path.
func (c *Comm) recordQuick(s *driver.Stream, o *operation) (bool, error) {
	st := c.st
	if !c.obj.Acquire() {
		return false, nil
	}
	lockDevice(st.dev)
	if st.phase.Load() != live {
		_ = c.obj.Release() // on the group's thread, a destroy goes to the release queue
		return false, nil
	}
	calls.pending = append(calls.pending, pendingOp{})
	p := &calls.pending[len(calls.pending)-1]
	o.quick(&p.q)
	if !seam.Use(unsafe.Pointer(s), &p.q) {
		// Its place given back cleared: the storage outlives the group
		// (spare), and would keep the buffers it names reachable.
		*p = pendingOp{}
		calls.pending = calls.pending[:len(calls.pending)-1]
		_ = c.obj.Release()
		return false, nil
	}
	p.quick, p.s = true, s
	p.refs[1] = lifetime.RefOf(&c.obj) // the hold taken above, released by finish
	if p.q.Ctx != uintptr(st.cuctx) {
		// A stream of another context: refused by the general path. This
		// one stays recorded as refused (no call), its holds let go when
		// the group ends.
		return false, nil
	}
	send, recv := o.pointers(&p.q)
	p.c, p.cuctx, p.native = st, st.cuctx, nativeOf(o, st.h, ncclraw.Stream(p.q.Strm), send, recv)
	return true, nil
}

// enqueueHeld is enqueue once c and s (by sref, which it takes over) are
// held.
func (c *Comm) enqueueHeld(s *driver.Stream, sref lifetime.Ref, o *operation) error {
	// Inside the caller's group, the operation is built in its place
	// among the group's operations, not copied there.
	var local pendingOp
	p := &local
	if onGroupThread() {
		calls.pending = append(calls.pending, pendingOp{})
		p = &calls.pending[len(calls.pending)-1]
	}
	p.refs[0] = sref
	hs, err := c.streamOf(o.name, s)
	var sendPtr, recvPtr uintptr
	if err == nil && o.send != nil {
		sendPtr, _, p.refs[2], err = seam.UseOn(o.name, o.send, s)
	}
	switch {
	case err == nil && o.recv != nil && o.recvP == o.sendP:
		recvPtr = sendPtr // in place: one buffer, held once
	case err == nil && o.recv != nil:
		recvPtr, _, p.refs[3], err = seam.UseOn(o.name, o.recv, s)
	}
	if err != nil {
		p.drop()
		if p != &local { // no lock is held: released now, and its place given back
			calls.pending = calls.pending[:len(calls.pending)-1]
		}
		return fromDriver(err)
	}
	st := c.st
	inGroup := lockDevice(st.dev) // p is the group's exactly when inGroup
	if st.phase.Load() != live {  // aborted while this call waited
		// In the group, p is released when the group ends (its device's
		// lock is held until then).
		unlockDevice(st.dev, inGroup)
		if !inGroup {
			p.drop()
		}
		return fmt.Errorf("nccl: %s: the communicator failed: %w", o.name, st.failure())
	}
	if inGroup {
		// An earlier operation of the group holds s entered until the
		// group ends: entering again could wait for a capture beginning
		// or ending on s, which waits for the group.
		p.sink, p.shared = enteredInGroup(s)
	}
	if !p.shared {
		p.sink = capture.Enter(s)
	}
	n := nativeOf(o, st.h, hs, sendPtr, recvPtr)
	if inGroup {
		// Made when the group ends: held, and s entered, until then;
		// the device's lock, which the group holds, keeps an abort off
		// the communicator meanwhile.
		if !c.obj.Retain() {
			if !p.shared {
				capture.Leave(s, p.sink)
			}
			p.sink, p.shared = nil, false // refused: released when the group ends
			return fmt.Errorf("nccl: %s: %w", o.name, driver.ErrClosed)
		}
		p.refs[1] = lifetime.RefOf(&c.obj)
		st.track(s, sref) // its retirement waits for s
		p.c, p.cuctx, p.s, p.native = st, st.cuctx, s, n
		return nil
	}
	// The device's call lock, held, keeps every other NCCL call on the
	// communicator away (an abort and a split take it first).
	err = callBound(st.cuctx, &n)
	if err == nil || isInProgress(err) {
		st.track(s, sref) // its retirement waits for s
	}
	if isInProgress(err) {
		err = st.waitInProgress(context.Background())
	}
	// What the call held is released once the lock is given back: a
	// buffer's free waits for the context's work, which may wait for a rank
	// whose goroutine waits for the lock.
	switch {
	case err != nil:
		if p.sink != nil {
			// A failure NCCL reported after queuing (a non-blocking
			// call's): the graph may name the operation.
			p.keep(&c.obj)
		}
		capture.Leave(s, p.sink)
	case p.sink != nil:
		// Captured: the graph holds the communicator and the buffers.
		p.keep(&c.obj)
		capture.Leave(s, p.sink)
	default:
		// Queued: a buffer's free waits for the work of its context's
		// streams (or, allocated in stream order, for s), and finalizing
		// the communicator for its operations.
		capture.Leave(s, nil)
	}
	unlockDevice(st.dev, false)
	p.drop()
	if err != nil {
		return wrap(err, st.h)
	}
	return nil
}

// keep hands p's sink a reference on the communicator (obj) and p's
// references on the buffers.
func (p *pendingOp) keep(obj *lifetime.Object) {
	owners := make([]release.Owner, 0, 3)
	if obj.Retain() {
		owners = append(owners, lifetime.RefOf(obj))
	}
	for i := 2; i < len(p.refs); i++ {
		if p.refs[i].Valid() {
			owners = append(owners, p.refs[i])
			p.refs[i] = lifetime.Ref{}
		}
	}
	p.sink.Keep(owners)
}

// drop releases what p holds.
func (p *pendingOp) drop() {
	for i := range p.refs {
		if p.refs[i].Valid() {
			_ = p.refs[i].Release()
			p.refs[i] = lifetime.Ref{}
		}
	}
}
