package graph

import (
	"fmt"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
)

// Executable update
//
// cuGraphRetainUserObject takes only a graph, so what an update gives an
// executable cannot be tied to it the way a graph's owners are. Instead the
// Exec keeps them itself, in owner sets (retire.go): owners introduced by a
// per-node change are kept per node, and a whole-graph Update takes its own
// references on the new graph's user objects (cuUserObjectRetain). Both
// stay alive until the executable is closed and every launch enqueued
// before then has finished; sets a later change replaces are retired the
// same way.

// UpdateResult is the driver's reason for a failed whole-graph update
// (CUgraphExecUpdateResult).
type UpdateResult int

// Update results.
const (
	UpdateSuccess                   UpdateResult = 0 // CU_GRAPH_EXEC_UPDATE_SUCCESS
	UpdateFailed                    UpdateResult = 1 // CU_GRAPH_EXEC_UPDATE_ERROR
	UpdateTopologyChanged           UpdateResult = 2 // CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED
	UpdateNodeTypeChanged           UpdateResult = 3 // CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED
	UpdateFunctionChanged           UpdateResult = 4 // CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED
	UpdateParametersChanged         UpdateResult = 5 // CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED
	UpdateNotSupported              UpdateResult = 6 // CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED
	UpdateUnsupportedFunctionChange UpdateResult = 7 // CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE
	UpdateAttributesChanged         UpdateResult = 8 // CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED
)

// String is the C name of the result.
func (r UpdateResult) String() string { return cu.CUgraphExecUpdateResult(r).String() }

// UpdateError is a failed whole-graph update with the driver's reason and
// the nodes it blames.
type UpdateError struct {
	Err      error        // the driver's error
	Result   UpdateResult // why
	Node     Node         // the offending node of the update graph, or zero
	FromNode Node         // its counterpart in the executable's own graph, or zero
}

func (e *UpdateError) Error() string {
	if e == nil {
		return "graph: Exec.Update: <nil>"
	}
	return fmt.Sprintf("graph: Exec.Update: %v (%v)", e.Err, e.Result)
}

// Unwrap returns the driver's error.
func (e *UpdateError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// uoOwner is a reference on a CUDA user object taken with
// cuUserObjectRetain.
type uoOwner cu.CUuserObject

func (u uoOwner) Release() error { return cu.UserObjectRelease(cu.CUuserObject(u), 1) }

// Update replaces the executable's parameters with those of g, a graph of
// the same topology (cuGraphExecUpdate); later launches run g's work. The
// executable holds what g's nodes hold from then on, even after g is
// closed, and panics of g's host nodes are reported by its Err too. On
// failure the error is an *UpdateError with the driver's reason and the
// offending node, and nothing changed.
func (e *Exec) Update(g *Graph) error {
	const op = "Exec.Update"
	if err := e.acquire(op); err != nil {
		return err
	}
	defer e.obj.Release()
	if err := g.acquire(op); err != nil {
		return err
	}
	defer g.release()
	if g.root != nil {
		return invalid(op, "a body graph cannot be the update")
	}
	if !g.ctx.Same(e.ctx) {
		return invalid(op, "the graph belongs to another context")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := lockTwo(op, e.fam, g.fam); err != nil {
		return err
	}
	defer unlockTwo(e.fam, g.fam)
	info := new(cu.CUgraphExecUpdateResultInfo)
	var held []release.Owner
	updated := false
	err := g.bind(func() error {
		// Retain g's user objects first, so that nothing has changed when
		// that fails.
		for _, uo := range g.uos {
			if err := cu.UserObjectRetain(uo, 1); err != nil {
				return err
			}
			held = append(held, uoOwner(uo))
		}
		if err := cu.GraphExecUpdate(e.h, g.h, info); err != nil {
			return err
		}
		updated = true
		return nil
	})
	if !updated {
		for _, o := range held {
			_ = o.Release()
		}
		ue := &UpdateError{Err: err, Result: UpdateResult(info.Result)}
		if info.ErrorNode != 0 {
			ue.Node = g.nodeOf(info.ErrorNode)
		}
		if info.ErrorFromNode != 0 && e.src != nil {
			ue.FromNode = e.src.nodeOf(info.ErrorFromNode)
		}
		return ue
	}
	// The executable now runs g's parameters: what earlier updates gave it
	// is replaced.
	var old []release.Owner
	for _, o := range e.own {
		old = append(old, o)
	}
	e.own = nil
	old = e.argOwners(old)
	e.updated = true // the source graph's nodes no longer tell the kernels' parameters
	e.multi = g.multi
	if e.held != nil {
		old = append(old, e.held)
	}
	e.held = newOwnerSet(held)
	e.retire(old)
	g.shared()
	g.sink.forward(e.sink)
	return nil
}

// setNode changes node n of the executable with call, which runs with the
// context bound and may return more owners to hold. With replace, owners
// are held for the node from then on and those an earlier change gave it
// are retired; without, the node's owners stay as they are. It takes
// owners: on failure they are released (with every lock let go: a Raw
// operand's owner may call back into the graph). other, if set, is a
// graph call reads (SetChild's child), whose family is locked too. It
// works after the source graph is closed (the executable holds it), but
// not on a node destroyed since.
func (e *Exec) setNode(op string, n Node, owners []release.Owner, other *Graph, replace bool, call func() ([]release.Owner, error)) error {
	refused, err := e.setNodeHeld(op, n, owners, other, replace, call)
	releaseOwners(refused)
	return err
}

// setNodeHeld is setNode under the locks; it returns the owners to release.
func (e *Exec) setNodeHeld(op string, n Node, owners []release.Owner, other *Graph, replace bool, call func() ([]release.Owner, error)) ([]release.Owner, error) {
	if err := e.acquire(op); err != nil {
		return owners, err
	}
	defer e.obj.Release()
	g := n.g
	if g == nil || n.h == 0 {
		return owners, fmt.Errorf("graph: %s: zero Node: %w", op, ErrForeignNode)
	}
	if g.graphCore == nil || g.top() != e.src.graphCore {
		return owners, fmt.Errorf("graph: %s: the node is not of the graph the executable was made from: %w", op, ErrForeignNode)
	}
	var of *family
	if other != nil {
		of = other.fam
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := lockTwo(op, e.fam, of); err != nil {
		return owners, err
	}
	defer unlockTwo(e.fam, of) // held across the call: n cannot be destroyed under it
	if g.root != nil && g.obj.Closed() {
		return owners, fmt.Errorf("graph: %s: the body's conditional node was destroyed: %w", op, ErrDestroyedNode)
	}
	if err := g.node(op, n); err != nil {
		return owners, err
	}
	if other != nil {
		if err := other.bodyGone(op); err != nil {
			return owners, err
		}
	}
	var more []release.Owner
	if err := e.ctx.Raw(func(uintptr) error {
		var err error
		more, err = call()
		return err
	}); err != nil {
		return append(owners, more...), err
	}
	owners = append(owners, more...)
	if !replace {
		return owners, nil
	}
	if e.own == nil {
		e.own = map[cu.CUgraphNode]*ownerSet{}
	}
	old, had := e.own[n.h]
	if len(owners) > 0 {
		e.own[n.h] = newOwnerSet(owners)
	} else {
		delete(e.own, n.h)
	}
	if had {
		e.retire([]release.Owner{old})
	}
	return nil, nil
}

// SetKernel changes kernel node n of the executable to launch fn over grid
// × block threads with args (cuGraphExecKernelNodeSetParams), without
// instantiating again. The arguments are checked as Graph.Kernel checks
// them, and the buffers among them and fn's module are held for as long as
// the executable may run them.
func (e *Exec) SetKernel(n Node, fn *driver.Function, grid driver.GridDim, block driver.BlockDim, args ...any) error {
	return e.setKernel("Exec.SetKernel", n, fn, driver.LaunchConfig{Grid: grid, Block: block}, args)
}

// SetKernelWith is SetKernel with dynamic shared memory (cfg.SharedMem).
func (e *Exec) SetKernelWith(n Node, fn *driver.Function, cfg driver.LaunchConfig, args ...any) error {
	return e.setKernel("Exec.SetKernelWith", n, fn, cfg, args)
}

func (e *Exec) setKernel(op string, n Node, fn *driver.Function, cfg driver.LaunchConfig, args []any) error {
	if fn == nil {
		return invalid(op, "nil function")
	}
	if err := checkConfig(op, cfg); err != nil {
		return err
	}
	if err := e.check(op); err != nil {
		return err
	}
	if err := e.singleContext(op); err != nil {
		return err
	}
	p, err := seam.MarshalArgs(fn, e.ctx, args)
	if err != nil {
		return err
	}
	defer p.Free()
	var owners []release.Owner
	for _, r := range p.TakeRefs(nil) {
		owners = append(owners, r)
	}
	fh, kern := seam.Function(fn)
	kp := new(cu.CUDA_KERNEL_NODE_PARAMS_v2)
	fillKernel(kp, cfg, fh, kern, p.Pointer(), e.ctx)
	return e.setNode(op, n, owners, nil, true, func() ([]release.Owner, error) { return nil, e.setKernelParams(op, n, kp) })
}

// SetMemset changes memset node n to set dst's elements to value
// (cuGraphExecMemsetNodeSetParams); dst is held as Builder.Memset holds it.
func (e *Exec) SetMemset(n Node, dst Operand, value uint32, elemSize int) error {
	const op = "Exec.SetMemset"
	err := e.check(op)
	if err == nil {
		err = e.singleContext(op)
	}
	if err != nil {
		dst.discard()
		return err
	}
	o, err := dst.resolve(op, e.ctx, false)
	if err != nil {
		return err
	}
	if err := checkMemset(op, value, elemSize); err != nil {
		o.release()
		return err
	}
	if o.host || o.bytes == 0 || o.bytes%elemSize != 0 {
		o.release()
		return invalid(op, "memset of %d bytes of %s memory in %d-byte elements", o.bytes, map[bool]string{true: "host", false: "device"}[o.host], elemSize)
	}
	p := &cu.CUDA_MEMSET_NODE_PARAMS_v1{Dst: cu.CUdeviceptr(o.dev), Value: value, ElementSize: uint32(elemSize),
		Width: uintptr(o.bytes / elemSize), Height: 1}
	return e.setNode(op, n, o.owners(), nil, true, func() ([]release.Owner, error) {
		return nil, cu.GraphExecMemsetNodeSetParams(e.h, n.h, p, cu.CUcontext(seam.Context(e.ctx)))
	})
}

// SetMemcpy changes memcpy node n to copy all of src into dst
// (cuGraphExecMemcpyNodeSetParams); both are held as Builder.Memcpy holds
// them.
func (e *Exec) SetMemcpy(n Node, dst, src Operand) error {
	const op = "Exec.SetMemcpy"
	err := e.check(op)
	if err == nil {
		err = e.singleContext(op)
	}
	if err != nil {
		dst.discard()
		src.discard()
		return err
	}
	d, err := dst.resolve(op, e.ctx, false)
	if err != nil {
		src.discard()
		return err
	}
	s, err := src.resolve(op, e.ctx, false)
	if err != nil {
		d.release()
		return err
	}
	if s.bytes == 0 || s.bytes > d.bytes {
		d.release()
		s.release()
		return invalid(op, "copy of %d bytes into %d", s.bytes, d.bytes)
	}
	c := &cu.CUDA_MEMCPY3D_v2{WidthInBytes: uintptr(s.bytes), Height: 1, Depth: 1}
	c.SrcMemoryType, c.SrcHost, c.SrcDevice = s.side()
	c.DstMemoryType, c.DstHost, c.DstDevice = d.side()
	return e.setNode(op, n, append(d.owners(), s.owners()...), nil, true, func() ([]release.Owner, error) {
		return nil, cu.GraphExecMemcpyNodeSetParams(e.h, n.h, c, cu.CUcontext(seam.Context(e.ctx)))
	})
}

// SetHostFunc changes host node n to run f (cuGraphExecHostNodeSetParams);
// f is held for as long as the executable may run it.
func (e *Exec) SetHostFunc(n Node, f func()) error {
	const op = "Exec.SetHostFunc"
	if err := e.check(op); err != nil {
		return err
	}
	if f == nil {
		return invalid(op, "nil function")
	}
	tramp, err := hostfn.HostFn()
	if err != nil {
		return err
	}
	id := hostfn.Register(hostfn.Callback{Fn: f, Sink: e.sink})
	if e.sink != nil {
		e.sink.hosts.Store(true)
	}
	p := &cu.CUDA_HOST_NODE_PARAMS_v1{Fn: cu.CUhostFn(tramp), UserData: id}
	return e.setNode(op, n, []release.Owner{hostfn.CallbackOwner(id)}, nil, true, func() ([]release.Owner, error) {
		return nil, cu.GraphExecHostNodeSetParams(e.h, n.h, p)
	})
}

// SetEventRecord changes event-record node n to record ev
// (cuGraphExecEventRecordNodeSetEvent); ev is held.
func (e *Exec) SetEventRecord(n Node, ev *driver.Event) error {
	return e.setEvent("Exec.SetEventRecord", n, ev, cu.GraphExecEventRecordNodeSetEvent)
}

// SetEventWait changes event-wait node n to wait for ev
// (cuGraphExecEventWaitNodeSetEvent); ev is held.
func (e *Exec) SetEventWait(n Node, ev *driver.Event) error {
	return e.setEvent("Exec.SetEventWait", n, ev, cu.GraphExecEventWaitNodeSetEvent)
}

func (e *Exec) setEvent(op string, n Node, ev *driver.Event, call func(cu.CUgraphExec, cu.CUgraphNode, cu.CUevent) error) error {
	if err := e.check(op); err != nil {
		return err
	}
	ref, err := seam.Hold(ev)
	if err != nil {
		return err
	}
	if !ev.Context().Same(e.ctx) {
		_ = ref.Release()
		return invalid(op, "the event belongs to another context")
	}
	h := cu.CUevent(seam.Event(ev))
	return e.setNode(op, n, []release.Owner{ref}, nil, true, func() ([]release.Owner, error) { return nil, call(e.h, n.h, h) })
}

// SetChild changes child-graph node n to run a copy of child, which must
// have the node's topology (cuGraphExecChildGraphNodeSetParams). What
// child's nodes hold is kept for as long as the executable may run it.
func (e *Exec) SetChild(n Node, child *Graph) error {
	const op = "Exec.SetChild"
	if err := e.check(op); err != nil {
		return err
	}
	if err := child.acquire(op); err != nil {
		return err
	}
	defer child.release()
	if child.root != nil {
		return invalid(op, "a body graph cannot be a child")
	}
	if !child.ctx.Same(e.ctx) {
		return invalid(op, "the child graph belongs to another context")
	}
	// Under child's family lock too (setNode takes it with the
	// executable's): the driver reads child while it copies it, and the
	// executable takes its own references on child's user objects.
	return e.setNode(op, n, nil, child, true, func() ([]release.Owner, error) {
		var owners []release.Owner
		for _, uo := range child.uos {
			if err := cu.UserObjectRetain(uo, 1); err != nil {
				return owners, err
			}
			owners = append(owners, uoOwner(uo))
		}
		if err := cu.GraphExecChildGraphNodeSetParams(e.h, n.h, child.h); err != nil {
			return owners, err
		}
		child.shared()
		child.sink.forward(e.sink) // the executable runs child's host nodes from now on
		return owners, nil
	})
}

// SetEnabled enables or disables node n of the executable
// (cuGraphNodeSetEnabled): a disabled node does nothing when the
// executable runs. Kernel, memcpy and memset nodes can be disabled.
func (e *Exec) SetEnabled(n Node, on bool) error {
	if err := e.check("Exec.SetEnabled"); err != nil {
		return err
	}
	v := uint32(0)
	if on {
		v = 1
	}
	return e.setNode("Exec.SetEnabled", n, nil, nil, false, func() ([]release.Owner, error) { return nil, cu.GraphNodeSetEnabled(e.h, n.h, v) })
}

// Enabled reports whether node n of the executable is enabled
// (cuGraphNodeGetEnabled).
func (e *Exec) Enabled(n Node) (bool, error) {
	if err := e.check("Exec.Enabled"); err != nil {
		return false, err
	}
	v := new(uint32)
	err := e.setNode("Exec.Enabled", n, nil, nil, false, func() ([]release.Owner, error) { return nil, cu.GraphNodeGetEnabled(e.h, n.h, v) })
	return *v != 0, err
}
