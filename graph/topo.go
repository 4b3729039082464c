package graph

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
)

// Nodes returns every node of the graph (cuGraphGetNodes).
func (g *Graph) Nodes() ([]Node, error) {
	return g.list("Graph.Nodes", func(p *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetNodes(g.h, p, n) })
}

// Roots returns the nodes without dependencies (cuGraphGetRootNodes).
func (g *Graph) Roots() ([]Node, error) {
	return g.list("Graph.Roots", func(p *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetRootNodes(g.h, p, n) })
}

// list runs a count-then-fill query of nodes.
func (g *Graph) list(op string, q func(*cu.CUgraphNode, *uintptr) error) ([]Node, error) {
	if err := g.enter(op); err != nil {
		return nil, err
	}
	defer g.leave()
	var hs []cu.CUgraphNode
	err := g.bind(func() error {
		var err error
		hs, err = fetchNodes(q)
		return err
	})
	if err != nil {
		return nil, err
	}
	return g.nodesOf(hs), nil
}

// fetchNodes asks for the count, then the nodes; it retries if the count
// grew in between.
func fetchNodes(q func(*cu.CUgraphNode, *uintptr) error) ([]cu.CUgraphNode, error) {
	n := new(uintptr)
	for {
		*n = 0
		if err := q(nil, n); err != nil {
			return nil, err
		}
		if *n == 0 {
			return nil, nil
		}
		want := *n
		hs := make([]cu.CUgraphNode, want)
		if err := q(&hs[0], n); err != nil {
			return nil, err
		}
		if *n <= want {
			return hs[:*n], nil
		}
	}
}

// Edge is a dependency: To runs after From.
type Edge struct{ From, To Node }

// Edges returns every dependency of the graph (cuGraphGetEdges).
func (g *Graph) Edges() ([]Edge, error) {
	const op = "Graph.Edges"
	if err := g.enter(op); err != nil {
		return nil, err
	}
	defer g.leave()
	var from, to []cu.CUgraphNode
	err := g.bind(func() error {
		n := new(uintptr)
		for {
			*n = 0
			if err := cu.GraphGetEdges(g.h, nil, nil, nil, n); err != nil {
				return err
			}
			if *n == 0 {
				return nil
			}
			want := *n
			from, to = make([]cu.CUgraphNode, want), make([]cu.CUgraphNode, want)
			if err := cu.GraphGetEdges(g.h, &from[0], &to[0], nil, n); err != nil {
				return err
			}
			if *n <= want {
				from, to = from[:*n], to[:*n]
				return nil
			}
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]Edge, len(from))
	for i := range from {
		out[i] = Edge{g.nodeOf(from[i]), g.nodeOf(to[i])}
	}
	return out, nil
}

// AddEdge makes to depend on from (cuGraphAddDependencies). Both must be
// live nodes of g, and the edge must not close a cycle.
func (g *Graph) AddEdge(from, to Node) error {
	return g.edge("Graph.AddEdge", from, to, true)
}

// RemoveEdge removes the dependency of to on from
// (cuGraphRemoveDependencies). CUDA refuses it in graphs that have memory
// alloc or free nodes.
func (g *Graph) RemoveEdge(from, to Node) error {
	return g.edge("Graph.RemoveEdge", from, to, false)
}

func (g *Graph) edge(op string, from, to Node, add bool) error {
	if err := g.enter(op); err != nil {
		return err
	}
	defer g.leave()
	if err := g.node(op, from); err != nil {
		return err
	}
	if err := g.node(op, to); err != nil {
		return err
	}
	if from.h == to.h {
		return fmt.Errorf("graph: %s: a node cannot depend on itself: %w", op, ErrCycle)
	}
	f, t := new(cu.CUgraphNode), new(cu.CUgraphNode)
	*f, *t = from.h, to.h
	return g.bind(func() error {
		if !add {
			return cu.GraphRemoveDependencies(g.h, f, t, nil, 1)
		}
		cyc, err := reaches(to.h, from.h)
		if err != nil {
			return err
		}
		if cyc {
			return fmt.Errorf("graph: %s: %w", op, ErrCycle)
		}
		return cu.GraphAddDependencies(g.h, f, t, nil, 1)
	})
}

// reaches reports whether there is a path from a to b along dependents.
func reaches(a, b cu.CUgraphNode) (bool, error) {
	seen := map[cu.CUgraphNode]bool{a: true}
	stack := []cu.CUgraphNode{a}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		next, err := fetchNodes(func(p *cu.CUgraphNode, c *uintptr) error { return cu.GraphNodeGetDependentNodes(n, p, nil, c) })
		if err != nil {
			return false, err
		}
		for _, m := range next {
			if m == b {
				return true, nil
			}
			if !seen[m] {
				seen[m] = true
				stack = append(stack, m)
			}
		}
	}
	return false, nil
}

// DOTFlags choose what WriteDOT shows (CUgraphDebugDot_flags).
type DOTFlags uint32

// DOT flags.
const (
	DOTVerbose          DOTFlags = 1     // CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE
	DOTKernelParams     DOTFlags = 4     // CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_PARAMS
	DOTMemcpyParams     DOTFlags = 8     // CU_GRAPH_DEBUG_DOT_FLAGS_MEMCPY_NODE_PARAMS
	DOTMemsetParams     DOTFlags = 16    // CU_GRAPH_DEBUG_DOT_FLAGS_MEMSET_NODE_PARAMS
	DOTHostParams       DOTFlags = 32    // CU_GRAPH_DEBUG_DOT_FLAGS_HOST_NODE_PARAMS
	DOTEventParams      DOTFlags = 64    // CU_GRAPH_DEBUG_DOT_FLAGS_EVENT_NODE_PARAMS
	DOTKernelAttributes DOTFlags = 512   // CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_ATTRIBUTES
	DOTHandles          DOTFlags = 1024  // CU_GRAPH_DEBUG_DOT_FLAGS_HANDLES
	DOTMemAllocParams   DOTFlags = 2048  // CU_GRAPH_DEBUG_DOT_FLAGS_MEM_ALLOC_NODE_PARAMS
	DOTMemFreeParams    DOTFlags = 4096  // CU_GRAPH_DEBUG_DOT_FLAGS_MEM_FREE_NODE_PARAMS
	DOTConditional      DOTFlags = 32768 // CU_GRAPH_DEBUG_DOT_FLAGS_CONDITIONAL_NODE_PARAMS
)

// WriteDOT writes the graph in Graphviz DOT form to w
// (cuGraphDebugDotPrint, through a temporary file).
func (g *Graph) WriteDOT(w io.Writer, flags DOTFlags) error {
	const op = "Graph.WriteDOT"
	if w == nil {
		return invalid(op, "nil writer")
	}
	dir, err := os.MkdirTemp("", "purecuda-dot")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "graph.dot")
	cpath := append([]byte(path), 0)
	if err := g.enter(op); err != nil {
		return err
	}
	err = g.bind(func() error { return cu.GraphDebugDotPrint(g.h, &cpath[0], uint32(flags)) })
	g.leave()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Clone copies the graph (cuGraphClone). The clone holds what the
// original's nodes hold, so it works after the original is closed; Find
// maps a node of the original to its counterpart. The clone is of the
// original's family: calls on the two are serialised.
func (g *Graph) Clone() (*Graph, error) {
	const op = "Graph.Clone"
	if err := g.enter(op); err != nil {
		return nil, err
	}
	defer g.leave()
	if g.root != nil {
		return nil, invalid(op, "a body graph belongs to its node: clone the graph it belongs to")
	}
	ref, ok := g.ctxRef.Clone() // works after the user closed the context
	if !ok {
		return nil, closed(op, "graph's context")
	}
	c := newCore(g.ctx, ref, g.sink, g.fam)
	h := new(cu.CUgraph)
	if err := g.bind(func() error { return cu.GraphClone(h, g.h) }); err != nil {
		_ = ref.Release()
		return nil, err
	}
	c.h = *h
	c.uos = append([]cu.CUuserObject(nil), g.uos...)
	c.multi = g.multi
	g.shared()
	return c.open(), nil
}

// Find returns the node of clone g that corresponds to orig, a node of the
// graph g was cloned from (cuGraphNodeFindInClone). The original must still
// be open.
func (g *Graph) Find(orig Node) (Node, error) {
	const op = "Graph.Find"
	og := orig.g
	if og == nil || orig.h == 0 {
		return Node{}, fmt.Errorf("graph: %s: zero Node: %w", op, ErrForeignNode)
	}
	if err := g.acquire(op); err != nil {
		return Node{}, err
	}
	defer g.release()
	if og.graphCore == g.graphCore {
		if err := g.lock(op); err != nil {
			return Node{}, err
		}
		defer g.fam.mu.Unlock()
		return orig, g.node(op, orig)
	}
	if err := og.acquire(op); err != nil {
		return Node{}, err
	}
	defer og.release()
	if err := lockFamilies(op, g, og); err != nil {
		return Node{}, err
	}
	defer unlockFamilies(g, og)
	if err := og.bodyGone(op); err != nil {
		return Node{}, err
	}
	if err := og.node(op, orig); err != nil {
		return Node{}, err
	}
	out := new(cu.CUgraphNode)
	if err := g.bind(func() error { return cu.GraphNodeFindInClone(out, orig.h, g.h) }); err != nil {
		return Node{}, err
	}
	if *out == 0 {
		return Node{}, fmt.Errorf("graph: %s: no counterpart: %w", op, driver.ErrInvalidValue)
	}
	return g.nodeOf(*out), nil
}
