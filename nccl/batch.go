package nccl

import (
	"fmt"

	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/ctxcall"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/ncclraw"
)

// NCCL's calls are made in sequences of C calls, each sequence one
// crossing into C (ccall.Run): an operation outside a group is the push of
// its communicator's context, the operation and the thread's clearing; a
// group is ncclGroupStart, each operation after a switch to its context
// when that changes, ncclGroupEnd and the clearing, made when the
// outermost Group returns. Crossings into C cost far more from Go than the
// calls inside cost in C.

// nativeCall is one NCCL operation, its arguments marshalled.
type nativeCall struct {
	name       string
	kind       kind
	comm       ncclraw.Comm
	stream     ncclraw.Stream
	send, recv uintptr
	count      uintptr
	dt         ncclraw.DataType
	red        ncclraw.RedOp
	peer       int32
}

// nativeOf marshals o for comm and stream s.
func nativeOf(o *operation, comm ncclraw.Comm, s ncclraw.Stream, send, recv uintptr) nativeCall {
	return nativeCall{name: o.name, kind: o.kind, comm: comm, stream: s, send: send, recv: recv,
		count: o.count, dt: o.dt, red: o.red, peer: o.peer}
}

// step fills s with the call, resolving NCCL's function: its N arguments
// (the others may hold anything: the callee reads only its own).
func (n *nativeCall) step(s *ccall.Step) error {
	if n.kind > opRecv {
		return fmt.Errorf("nccl: %s: unknown operation %d", n.name, n.kind)
	}
	return fillStep(s, n.kind, n.send, n.recv, n.count, n.dt, n.red, n.peer, n.comm, n.stream)
}

// fillStep fills s with the NCCL call of kind k (see step).
func fillStep(s *ccall.Step, k kind, send, recv, count uintptr, dt ncclraw.DataType, red ncclraw.RedOp, peer int32, comm ncclraw.Comm, stream ncclraw.Stream) error {
	var fn uintptr
	var err error
	a := &s.Args
	a[0], a[1], a[2], a[3] = send, recv, count, uintptr(dt)
	switch k {
	case opAllReduce:
		fn, err = ncclraw.AllReduceProc()
		a[4], a[5], a[6], s.N = uintptr(red), uintptr(comm), uintptr(stream), 7
	case opBroadcast:
		fn, err = ncclraw.BroadcastProc()
		a[4], a[5], a[6], s.N = uintptr(peer), uintptr(comm), uintptr(stream), 7
	case opReduce:
		fn, err = ncclraw.ReduceProc()
		a[4], a[5], a[6], a[7], s.N = uintptr(red), uintptr(peer), uintptr(comm), uintptr(stream), 8
	case opAllGather:
		fn, err = ncclraw.AllGatherProc()
		a[4], a[5], s.N = uintptr(comm), uintptr(stream), 6
	case opReduceScatter:
		fn, err = ncclraw.ReduceScatterProc()
		a[4], a[5], a[6], s.N = uintptr(red), uintptr(comm), uintptr(stream), 7
	case opSend:
		fn, err = ncclraw.SendProc()
		a[0], a[1], a[2], a[3], a[4], a[5] = send, count, uintptr(dt), uintptr(peer), uintptr(comm), uintptr(stream)
		s.N = 6
	case opRecv:
		fn, err = ncclraw.RecvProc()
		a[0], a[1], a[2], a[3], a[4], a[5] = recv, count, uintptr(dt), uintptr(peer), uintptr(comm), uintptr(stream)
		s.N = 6
	default:
		return fmt.Errorf("unknown operation %d", k)
	}
	s.Fn, s.R1, s.Stop = fn, 0, 0
	return err
}

// status is the error for result r of the call (nil for success and for
// a non-blocking communicator's ncclInProgress), as the raw table returns
// it.
func (n *nativeCall) status(r uintptr) error {
	if res := ncclraw.Result(int32(r)); res == ncclraw.Success || res == ncclraw.InProgress {
		return nil
	}
	switch n.kind {
	case opAllReduce:
		return ncclraw.AllReduceStatus(r)
	case opBroadcast:
		return ncclraw.BroadcastStatus(r)
	case opReduce:
		return ncclraw.ReduceStatus(r)
	case opAllGather:
		return ncclraw.AllGatherStatus(r)
	case opReduceScatter:
		return ncclraw.ReduceScatterStatus(r)
	case opSend:
		return ncclraw.SendStatus(r)
	default:
		return ncclraw.RecvStatus(r)
	}
}

// groupFns are the entry points of a group's sequence of C calls besides
// its operations', found on the first group that needs them and kept
// (calls.fns, under calls.mu): looking them up again touches a line of
// memory each, which NCCL's and CUDA's calls evict between groups.
type groupFns struct{ start, end, push, set uintptr }

// find fills f once.
func (f *groupFns) find() error {
	if f.set != 0 {
		return nil
	}
	start, err := ncclraw.GroupStartProc()
	if err != nil {
		return err
	}
	end, err := ncclraw.GroupEndProc()
	if err != nil {
		return err
	}
	push, set, err := ctxcall.SwitchProcs()
	if err != nil {
		return err
	}
	*f = groupFns{start: start, end: end, push: push, set: set}
	return nil
}

// ctxStep fills s with a context switch of a sequence: fn is
// cuCtxPushCurrent or cuCtxSetCurrent (the clearing, with h 0, pops what
// the push pushed). It stops the sequence when it fails, unless the
// caller clears Stop.
func ctxStep(s *ccall.Step, fn uintptr, h cu.CUcontext) {
	s.Fn, s.R1, s.Stop, s.N = fn, 0, 1, 1
	s.Args[0] = uintptr(h)
}

// ctxStatus is the error of a context step's result r.
func ctxStatus(push bool, r uintptr) error {
	if push {
		return cu.CtxPushCurrentStatus(r)
	}
	return cu.CtxSetCurrentStatus(r)
}

// callBound makes n with context h current on the calling thread and
// leaves the thread's context stack as it found it: push, call, clear, in
// one crossing into C. It returns NCCL's error as the raw table does
// (ncclInProgress included), or the context switch's.
func callBound(h cu.CUcontext, n *nativeCall) error {
	var q ctxcall.Seq
	if err := n.step(q.Op()); err != nil {
		return err
	}
	return q.Run(h, n.blockingStatus)
}

// blockingStatus is status, but ncclInProgress is an error (as the raw
// table returns it), for the caller to wait for.
func (n *nativeCall) blockingStatus(r uintptr) error {
	if res := ncclraw.Result(int32(r)); res == ncclraw.InProgress {
		return &ncclraw.Error{Func: "nccl" + n.name, Code: res}
	}
	return n.status(r)
}

// devSeqs are the sequences of C calls of operations outside a group, one
// per device, each filled and run under its device's call lock.
var devSeqs [len(devLocks)]ctxcall.Seq
