package nccl

import (
	"context"
	"fmt"

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
// of one element type (nil where the rank passes none).
type operation struct {
	name       string
	kind       kind
	send, recv any
	count      uintptr
	dt         ncclraw.DataType
	red        ncclraw.RedOp
	peer       int32 // the root or the peer
}

// enqueue checks and queues o on s for c.
func (c *Comm) enqueue(s *driver.Stream, o *operation) error {
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

// enqueueHeld is enqueue once c and s (by sref, which it takes over) are
// held.
func (c *Comm) enqueueHeld(s *driver.Stream, sref lifetime.Ref, o *operation) error {
	var p pendingOp
	p.refs[0] = sref
	hs, err := c.streamOf(o.name, s)
	var sendPtr, recvPtr uintptr
	if err == nil && o.send != nil {
		sendPtr, _, p.refs[2], err = seam.UseOn(o.name, o.send, s)
	}
	switch {
	case err == nil && o.recv != nil && o.recv == o.send:
		recvPtr = sendPtr // in place: one buffer, held once
	case err == nil && o.recv != nil:
		recvPtr, _, p.refs[3], err = seam.UseOn(o.name, o.recv, s)
	}
	if err != nil {
		p.drop()
		return fromDriver(err)
	}
	st := c.st
	inGroup := lockDevice(st.dev)
	if st.phase.Load() != live { // aborted while this call waited
		if inGroup {
			calls.pending = append(calls.pending, p) // released when the group ends
		}
		unlockDevice(st.dev, inGroup)
		if !inGroup {
			p.drop()
		}
		return fmt.Errorf("nccl: %s: the communicator failed: %w", o.name, st.failure())
	}
	p.sink = capture.Enter(s)
	n := nativeOf(o, st.h, hs, sendPtr, recvPtr)
	if inGroup {
		// Made when the group ends: held, and s entered, until then;
		// the device's lock, which the group holds, keeps an abort off
		// the communicator meanwhile.
		if !c.obj.Retain() {
			capture.Leave(s, p.sink)
			p.sink = nil
			calls.pending = append(calls.pending, p) // released when the group ends
			return fmt.Errorf("nccl: %s: %w", o.name, driver.ErrClosed)
		}
		p.refs[1] = lifetime.RefOf(&c.obj)
		st.track(s, sref) // its retirement waits for s
		p.c, p.cuctx, p.s, p.native = st, st.cuctx, s, n
		calls.pending = append(calls.pending, p)
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
