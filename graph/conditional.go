package graph

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/seam"
)

// Condition is the condition of conditional nodes (a CUgraphConditionalHandle):
// a 32-bit value, kept on the device, that an if, if/else, while or switch
// node reads each time it runs, and that kernels set with
// cudaGraphSetConditional. Make one with Graph.NewCondition; the zero
// Condition belongs to no graph. A Condition is a value that never changes:
// it may be used from several goroutines at once.
//
// A kernel receives the condition as a 64-bit value: pass c.Handle() (a
// uint64) as the kernel argument, not c itself, which is refused as an
// argument since it holds its graph. In the kernel, include the header that
// package nvrtc builds in:
//
//	#include <purecuda/graph.h>
//	extern "C" __global__ void step(int *left, cudaGraphConditionalHandle h) {
//		if (--*left == 0) cudaGraphSetConditional(h, 0);
//	}
type Condition struct {
	g *Graph // the top-level graph it was made in
	h cu.CUgraphConditionalHandle
}

// Handle is the condition's CUDA handle, the value a kernel argument of type
// cudaGraphConditionalHandle takes (0 for the zero Condition).
func (c Condition) Handle() uint64 { return uint64(c.h) }

// IsZero reports whether c is the zero Condition.
func (c Condition) IsZero() bool { return c.g == nil }

// Graph is the top-level graph the condition belongs to (nil for the zero
// Condition). Conditional nodes of that graph and of all its bodies may use
// it.
func (c Condition) Graph() *Graph { return c.g }

// ConditionFlags are the flags of Graph.NewCondition.
type ConditionFlags uint32

// Condition flags.
const (
	// AssignDefault sets the condition to its default value at the start of
	// every launch of an executable (CU_GRAPH_COND_ASSIGN_DEFAULT). Without
	// it, CUDA gives no value at launch: a kernel upstream of the
	// conditional node must set the condition before the node reads it.
	AssignDefault ConditionFlags = 1 // CU_GRAPH_COND_ASSIGN_DEFAULT
)

// Driver versions (as cuDriverGetVersion reports them) that the kinds of
// conditional node need.
const (
	versionIfWhile      = 12030 // condition handles, if (one body) and while
	versionIfElseSwitch = 12080 // if/else (two bodies) and switch
)

// MaxSwitchBranches is the most branches Switch accepts (a purecuda limit,
// so that a wrong count cannot make millions of body graphs).
const MaxSwitchBranches = 1 << 16

// driverVersion returns the loaded driver's CUDA version in
// cuDriverGetVersion's form, 13000 for 13.0. Tests replace it to simulate
// an older driver.
var driverVersion = func() (int, error) {
	major, minor, err := driver.Version()
	if err != nil {
		return 0, err
	}
	return major*1000 + minor*10, nil
}

// needDriver returns an error matching driver.ErrNotSupported when the
// driver is older than need, naming what needs which version.
func needDriver(op, what string, need int) error {
	have, err := driverVersion()
	if err != nil {
		return fmt.Errorf("graph: %s: %w", op, err)
	}
	return checkVersion(op, what, need, have)
}

// checkVersion compares the driver version have with need.
func checkVersion(op, what string, need, have int) error {
	if have >= need {
		return nil
	}
	return fmt.Errorf("graph: %s: %s needs a CUDA %d.%d driver, this one is %d.%d: %w",
		op, what, need/1000, need%1000/10, have/1000, have%1000/10, driver.ErrNotSupported)
}

// NewCondition makes a condition for conditional nodes of g, its bodies
// and their bodies (cuGraphConditionalHandleCreate, CUDA 12.3). Called on
// a body graph, it makes it in the top-level graph the body belongs to.
//
// defaultValue is the value each launch starts with when flags has
// AssignDefault; otherwise a kernel must set the condition before a
// conditional node reads it. A condition that no conditional node uses
// makes Instantiate fail (InstantiateConditionalHandleUnused). CUDA has no
// call to destroy a condition: it lives as long as the graph.
func (g *Graph) NewCondition(defaultValue uint32, flags ConditionFlags) (Condition, error) {
	const op = "Graph.NewCondition"
	if g == nil {
		return Condition{}, invalid(op, "nil graph")
	}
	if flags&^AssignDefault != 0 {
		return Condition{}, invalid(op, "unknown flags %#x", uint32(flags&^AssignDefault))
	}
	if err := needDriver(op, "a condition handle", versionIfWhile); err != nil {
		return Condition{}, err
	}
	if err := g.enter(op); err != nil {
		return Condition{}, err
	}
	defer g.leave()
	t := g.top()
	h := new(cu.CUgraphConditionalHandle)
	err := t.bind(func() error {
		return cu.GraphConditionalHandleCreate(h, t.h, cu.CUcontext(seam.Context(t.ctx)), defaultValue, uint32(flags))
	})
	if err != nil {
		return Condition{}, err
	}
	return Condition{g: g.topHandle(), h: *h}, nil
}

// topHandle is the handle of g's top-level graph: g, or a body's up.
func (g *Graph) topHandle() *Graph {
	if g.up != nil {
		return g.up
	}
	return g
}

// If adds a root if node; see Builder.If.
func (g *Graph) If(c Condition) (Node, *Graph, error) { return g.After().If(c) }

// IfElse adds a root if/else node; see Builder.IfElse.
func (g *Graph) IfElse(c Condition) (Node, *Graph, *Graph, error) { return g.After().IfElse(c) }

// While adds a root while node; see Builder.While.
func (g *Graph) While(c Condition) (Node, *Graph, error) { return g.After().While(c) }

// Switch adds a root switch node; see Builder.Switch.
func (g *Graph) Switch(c Condition, n int) (Node, []*Graph, error) {
	return g.After().Switch(c, n)
}

// If adds an if node (a conditional node of type CU_GRAPH_COND_TYPE_IF with
// one body; CUDA 12.3): each time it runs, its body runs once if c is not
// zero. Fill the body with the same add methods as any graph; it may hold
// conditional nodes itself.
//
// Body graphs, and what their nodes hold, belong to the node: they are
// held as long as the top-level graph, or an executable made from it, may
// run them. A body cannot be closed, cloned, instantiated or used as a
// child on its own; it stops working (ErrClosed) when its node, or a node
// it is nested in, is destroyed, or its top-level graph is closed.
//
// CUDA's rules for graphs with conditional nodes (driver 580 checked):
// bodies, at any depth, may hold only kernel, empty, child-graph, memset,
// memcpy and conditional nodes, and no copy of a Go slice (pageable
// memory); other nodes and such copies are accepted by the add and refused
// by Instantiate (an *InstantiateError, e.g.
// InstantiateNodeOperationUnsupported). Such a graph cannot
// be cloned or be a child (ErrNotSupported), and it has one executable at a
// time: Instantiate fails with ErrNotSupported until the first is closed.
func (b Builder) If(c Condition) (Node, *Graph, error) {
	n, bodies, err := b.conditional("Graph.If", "an if node", c, cu.CU_GRAPH_COND_TYPE_IF, 1, versionIfWhile)
	if err != nil {
		return Node{}, nil, err
	}
	return n, bodies[0], nil
}

// IfElse adds an if/else node (CU_GRAPH_COND_TYPE_IF with two bodies; CUDA
// 12.8): each time it runs, then runs once if c is not zero, els once if
// it is. Bodies are as for If.
func (b Builder) IfElse(c Condition) (n Node, then, els *Graph, err error) {
	n, bodies, err := b.conditional("Graph.IfElse", "an if/else node", c, cu.CU_GRAPH_COND_TYPE_IF, 2, versionIfElseSwitch)
	if err != nil {
		return Node{}, nil, nil, err
	}
	return n, bodies[0], bodies[1], nil
}

// While adds a while node (CU_GRAPH_COND_TYPE_WHILE; CUDA 12.3): each time
// it runs, it runs its body again and again while c is not zero, checking
// c before each run — so a kernel in the body must eventually set it to
// zero. Bodies are as for If.
func (b Builder) While(c Condition) (Node, *Graph, error) {
	n, bodies, err := b.conditional("Graph.While", "a while node", c, cu.CU_GRAPH_COND_TYPE_WHILE, 1, versionIfWhile)
	if err != nil {
		return Node{}, nil, err
	}
	return n, bodies[0], nil
}

// Switch adds a switch node with n branches (CU_GRAPH_COND_TYPE_SWITCH;
// CUDA 12.8): each time it runs, branch i runs once when c is i, and none
// when c is n or more. n is 1 to MaxSwitchBranches. Bodies are as for If.
func (b Builder) Switch(c Condition, n int) (Node, []*Graph, error) {
	const op = "Graph.Switch"
	if n < 1 || n > MaxSwitchBranches {
		return Node{}, nil, invalid(op, "%d branches (want 1 to %d)", n, MaxSwitchBranches)
	}
	return b.conditional(op, "a switch node", c, cu.CU_GRAPH_COND_TYPE_SWITCH, n, versionIfElseSwitch)
}

// conditional adds a conditional node of type typ with size bodies
// (cuGraphAddNode with CU_GRAPH_NODE_TYPE_CONDITIONAL) and wraps its body
// graphs.
//
// The bodies are wrapped only once the add has fully succeeded, so a
// failed add leaves nothing behind. Each body is registered with the node
// (newBody) and also with every conditional node whose bodies contain the
// graph the node is added to, so that destroying an outer node closes the
// bodies nested in it at any depth (their CUDA graphs go with it).
func (b Builder) conditional(op, what string, c Condition, typ cu.CUgraphConditionalNodeType, size, need int) (Node, []*Graph, error) {
	g := b.g
	if g == nil {
		return Node{}, nil, invalid(op, "nil graph")
	}
	if c.g == nil {
		return Node{}, nil, invalid(op, "zero Condition (make one with Graph.NewCondition)")
	}
	if c.g != g.topHandle() {
		return Node{}, nil, invalid(op, "the condition belongs to another graph")
	}
	if err := needDriver(op, what, need); err != nil {
		return Node{}, nil, err
	}
	if err := b.check(op); err != nil {
		return Node{}, nil, err
	}
	p := new(cu.CUgraphNodeParams) // zero: the reserved fields must be
	handles := make([]cu.CUgraph, size)
	var bodies []*Graph
	node, err := g.add(op, b.deps, nil, func(d *cu.CUgraphNode, n uintptr) error {
		*p = cu.CUgraphNodeParams{Type: cu.CU_GRAPH_NODE_TYPE_CONDITIONAL}
		cp := p.Anon0.Conditional()
		*cp = cu.CUDA_CONDITIONAL_NODE_PARAMS{Handle: c.h, Type: typ, Size: uint32(size), Ctx: cu.CUcontext(seam.Context(g.ctx))}
		if err := cu.GraphAddNode(&g.scr.node, g.h, d, nil, n, p); err != nil {
			return err
		}
		h := g.scr.node
		if cp.PhGraph_out == nil {
			err := fmt.Errorf("graph: %s: the driver returned no body graphs: %w", op, driver.ErrInvalidValue)
			if derr := cu.GraphDestroyNode(h); derr != nil {
				return fmt.Errorf("%w (and removing the node: %v)", err, derr)
			}
			return err
		}
		// The array is CUDA's, valid for the node's life: copy it now.
		copy(handles, unsafe.Slice(cp.PhGraph_out, size))
		var err error
		bodies, err = g.wrapBodies(h, handles)
		if err != nil {
			if derr := cu.GraphDestroyNode(h); derr != nil {
				return fmt.Errorf("%w (and removing the node: %v)", err, derr)
			}
		}
		return err
	})
	if err != nil {
		return Node{}, nil, err
	}
	return node, bodies, nil
}

// wrapBodies makes the Graphs of node h's body graphs hs and registers
// them with h and with every conditional node whose bodies contain g, so
// that destroying an outer node closes the bodies nested in it at any
// depth (their CUDA graphs go with it). The family lock is held; if it
// fails, nothing is registered.
func (g *Graph) wrapBodies(h cu.CUgraphNode, hs []cu.CUgraph) ([]*Graph, error) {
	out := make([]*Graph, len(hs))
	for i, bh := range hs {
		b, err := g.newBody(bh, h)
		if err != nil {
			g.dropBodies(h)
			return nil, err
		}
		out[i] = b
	}
	if t := g.top(); t != g.graphCore {
		for k, list := range t.bodies {
			if k != h && slices.Contains(list, g.graphCore) {
				for _, b := range out {
					t.bodies[k] = append(t.bodies[k], b.graphCore)
				}
			}
		}
	}
	return out, nil
}
