package graph

import (
	"fmt"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/tables"
)

// Node is a node of a Graph (CUgraphNode). It is a small value; the zero
// Node belongs to no graph.
//
// A Node names one node for good: once the node is destroyed (Destroy, an
// aborted capture, its conditional node's destruction), every use of the
// Node is an error matching ErrDestroyedNode, even after CUDA gives its
// handle to a new node.
//
// A Node may be copied and used from several goroutines at once: its
// methods go through its graph, which runs one call of its family at a
// time (see Graph). After the graph's Close they fail with
// driver.ErrClosed.
type Node struct {
	g    *Graph
	h    cu.CUgraphNode
	slot uint32 // in g.nodes: the node's generation
}

// Graph is the graph the node belongs to (nil for the zero Node).
func (n Node) Graph() *Graph { return n.g }

// IsZero reports whether n is the zero Node.
func (n Node) IsZero() bool { return n.g == nil || n.h == 0 }

// register records h, a node just added to g, and returns its Node. The
// family lock is held.
func (g *Graph) register(h cu.CUgraphNode) Node {
	slot := uint32(len(g.nodes))
	g.nodes = append(g.nodes, h)
	if g.slots != nil {
		g.slots[h] = slot
	}
	return Node{g: g, h: h, slot: slot}
}

// nodeOf returns the Node of h, a node of g that CUDA reported (a query, a
// capture), registering it if g has not seen it yet. The family lock is
// held.
func (g *Graph) nodeOf(h cu.CUgraphNode) Node {
	if g.slots == nil {
		g.slots = make(map[cu.CUgraphNode]uint32, len(g.nodes))
		for i, x := range g.nodes {
			if x != 0 {
				g.slots[x] = uint32(i)
			}
		}
	}
	if slot, ok := g.slots[h]; ok {
		return Node{g: g, h: h, slot: slot}
	}
	return g.register(h)
}

// nodesOf is nodeOf for several.
func (g *Graph) nodesOf(hs []cu.CUgraphNode) []Node {
	out := make([]Node, len(hs))
	for i, h := range hs {
		out[i] = g.nodeOf(h)
	}
	return out
}

// forget records that node h of c was destroyed; its slot is never used
// again. The family lock is held.
func (c *graphCore) forget(h cu.CUgraphNode) {
	if c.slots != nil {
		if slot, ok := c.slots[h]; ok {
			c.nodes[slot] = 0
			delete(c.slots, h)
		}
		return
	}
	for i, x := range c.nodes {
		if x == h {
			c.nodes[i] = 0
		}
	}
}

// node checks that n is a live node of g; the family lock is held.
func (g *Graph) node(op string, n Node) error {
	if n.g == nil || n.h == 0 {
		return fmt.Errorf("graph: %s: zero Node: %w", op, ErrForeignNode)
	}
	if n.g.graphCore != g.graphCore {
		return fmt.Errorf("graph: %s: %w", op, ErrForeignNode)
	}
	if int(n.slot) >= len(g.nodes) || g.nodes[n.slot] != n.h {
		return fmt.Errorf("graph: %s: %w", op, ErrDestroyedNode)
	}
	return nil
}

// Kind is a node's type (CUgraphNodeType).
type Kind int

// Node kinds.
const (
	KindKernel      Kind = 0  // CU_GRAPH_NODE_TYPE_KERNEL
	KindMemcpy      Kind = 1  // CU_GRAPH_NODE_TYPE_MEMCPY
	KindMemset      Kind = 2  // CU_GRAPH_NODE_TYPE_MEMSET
	KindHost        Kind = 3  // CU_GRAPH_NODE_TYPE_HOST
	KindChild       Kind = 4  // CU_GRAPH_NODE_TYPE_GRAPH
	KindEmpty       Kind = 5  // CU_GRAPH_NODE_TYPE_EMPTY
	KindEventWait   Kind = 6  // CU_GRAPH_NODE_TYPE_WAIT_EVENT
	KindEventRecord Kind = 7  // CU_GRAPH_NODE_TYPE_EVENT_RECORD
	KindMemAlloc    Kind = 10 // CU_GRAPH_NODE_TYPE_MEM_ALLOC
	KindMemFree     Kind = 11 // CU_GRAPH_NODE_TYPE_MEM_FREE
	KindConditional Kind = 13 // CU_GRAPH_NODE_TYPE_CONDITIONAL
)

var kindNames = map[Kind]string{
	KindKernel: "kernel", KindMemcpy: "memcpy", KindMemset: "memset", KindHost: "host",
	KindChild: "child graph", KindEmpty: "empty", KindEventWait: "event wait",
	KindEventRecord: "event record", KindMemAlloc: "memory alloc", KindMemFree: "memory free",
	KindConditional: "conditional",
}

// String names the kind.
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// use runs f with n's graph held, locked and bound, after checking n is a
// live node of it.
func (n Node) use(op string, f func() error) error {
	g := n.g
	if g == nil || n.h == 0 {
		return fmt.Errorf("graph: %s: zero Node: %w", op, ErrForeignNode)
	}
	if err := g.enter(op); err != nil {
		return err
	}
	defer g.leave()
	if err := g.node(op, n); err != nil {
		return err
	}
	return g.bind(f)
}

// Kind is the node's type (cuGraphNodeGetType).
func (n Node) Kind() (Kind, error) {
	t := new(cu.CUgraphNodeType)
	err := n.use("Node.Kind", func() error { return cu.GraphNodeGetType(n.h, t) })
	return Kind(*t), err
}

// Dependencies are the nodes n depends on (cuGraphNodeGetDependencies).
func (n Node) Dependencies() ([]Node, error) {
	return n.neighbours("Node.Dependencies", func(p *cu.CUgraphNode, c *uintptr) error { return cu.GraphNodeGetDependencies(n.h, p, nil, c) })
}

// Dependents are the nodes that depend on n (cuGraphNodeGetDependentNodes).
func (n Node) Dependents() ([]Node, error) {
	return n.neighbours("Node.Dependents", func(p *cu.CUgraphNode, c *uintptr) error { return cu.GraphNodeGetDependentNodes(n.h, p, nil, c) })
}

func (n Node) neighbours(op string, q func(*cu.CUgraphNode, *uintptr) error) ([]Node, error) {
	var out []Node
	err := n.use(op, func() error {
		hs, err := fetchNodes(q)
		out = n.g.nodesOf(hs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Destroy removes the node and its edges (cuGraphDestroyNode). What the
// node held is released at once unless a clone, executable or parent graph
// made since the node was added may still use it; then it is released with
// the last of those. Using n afterwards is an error matching
// ErrDestroyedNode. CUDA refuses to destroy nodes of graphs that have
// memory alloc or free nodes.
func (n Node) Destroy() error {
	var owners []release.Owner
	err := n.use("Node.Destroy", func() error {
		g := n.g
		if err := cu.GraphDestroyNode(n.h); err != nil {
			return err
		}
		g.forget(n.h)
		g.dropBodies(n.h)
		owners = g.takeOwners(n.h)
		return nil
	})
	// Released with the graph's lock let go: an owner's Release (a Raw
	// operand's) may call back into the graph.
	if rerr := tables.ReleaseAll(owners); err == nil {
		err = rerr
	}
	return err
}

// KernelInfo is a kernel node's parameters as the driver reports them.
type KernelInfo struct {
	Function     uintptr // CUfunction (0 when launched through a CUkernel)
	Kernel       uintptr // CUkernel of a library kernel
	Grid         driver.GridDim
	Block        driver.BlockDim
	SharedMemory int
}

// KernelParams reads a kernel node's parameters (cuGraphKernelNodeGetParams).
func (n Node) KernelParams() (KernelInfo, error) {
	p := new(cu.CUDA_KERNEL_NODE_PARAMS_v2)
	err := n.use("Node.KernelParams", func() error { return cu.GraphKernelNodeGetParams(n.h, p) })
	if err != nil {
		return KernelInfo{}, err
	}
	return KernelInfo{
		Function: uintptr(p.Func), Kernel: uintptr(p.Kern),
		Grid:         driver.GridDim{X: int(p.GridDimX), Y: int(p.GridDimY), Z: int(p.GridDimZ)},
		Block:        driver.BlockDim{X: int(p.BlockDimX), Y: int(p.BlockDimY), Z: int(p.BlockDimZ)},
		SharedMemory: int(p.SharedMemBytes),
	}, nil
}

// MemsetInfo is a memset node's parameters.
type MemsetInfo struct {
	Dst      driver.DevicePtr
	Value    uint32
	ElemSize int // 1, 2 or 4 bytes
	Count    int // elements per row
	Rows     int
	Pitch    int
}

// MemsetParams reads a memset node's parameters (cuGraphMemsetNodeGetParams).
func (n Node) MemsetParams() (MemsetInfo, error) {
	p := new(cu.CUDA_MEMSET_NODE_PARAMS_v1)
	err := n.use("Node.MemsetParams", func() error { return cu.GraphMemsetNodeGetParams(n.h, p) })
	if err != nil {
		return MemsetInfo{}, err
	}
	return MemsetInfo{Dst: driver.DevicePtr(p.Dst), Value: p.Value, ElemSize: int(p.ElementSize),
		Count: int(p.Width), Rows: int(p.Height), Pitch: int(p.Pitch)}, nil
}

// MemcpyInfo is a one-dimensional memcpy node's parameters: each side's
// address (device or host) and the size.
type MemcpyInfo struct {
	Dst, Src         uintptr
	DstHost, SrcHost bool
	Bytes            int
}

// MemcpyParams reads a memcpy node's parameters (cuGraphMemcpyNodeGetParams).
func (n Node) MemcpyParams() (MemcpyInfo, error) {
	p := new(cu.CUDA_MEMCPY3D_v2)
	err := n.use("Node.MemcpyParams", func() error { return cu.GraphMemcpyNodeGetParams(n.h, p) })
	if err != nil {
		return MemcpyInfo{}, err
	}
	side := func(t cu.CUmemorytype, host uintptr, dev cu.CUdeviceptr) (uintptr, bool) {
		if t == cu.CU_MEMORYTYPE_HOST {
			return host, true
		}
		return uintptr(dev), false
	}
	var m MemcpyInfo
	m.Dst, m.DstHost = side(p.DstMemoryType, uintptr(p.DstHost), p.DstDevice)
	m.Src, m.SrcHost = side(p.SrcMemoryType, uintptr(p.SrcHost), p.SrcDevice)
	m.Bytes = int(p.WidthInBytes * max(p.Height, 1) * max(p.Depth, 1))
	return m, nil
}

// MemAllocInfo is a memory-alloc node's parameters.
type MemAllocInfo struct {
	Ptr   driver.DevicePtr
	Bytes int
}

// MemAllocParams reads a memory-alloc node's parameters
// (cuGraphMemAllocNodeGetParams).
func (n Node) MemAllocParams() (MemAllocInfo, error) {
	p := new(cu.CUDA_MEM_ALLOC_NODE_PARAMS)
	err := n.use("Node.MemAllocParams", func() error { return cu.GraphMemAllocNodeGetParams(n.h, p) })
	if err != nil {
		return MemAllocInfo{}, err
	}
	return MemAllocInfo{Ptr: driver.DevicePtr(p.Dptr), Bytes: int(p.Bytesize)}, nil
}

// MemFreeParams reads the address a memory-free node frees
// (cuGraphMemFreeNodeGetParams).
func (n Node) MemFreeParams() (driver.DevicePtr, error) {
	p := new(cu.CUdeviceptr)
	err := n.use("Node.MemFreeParams", func() error { return cu.GraphMemFreeNodeGetParams(n.h, p) })
	return driver.DevicePtr(*p), err
}

// hostCallbackID reads the id a host node passes its callback (the
// handle-map id; cuGraphHostNodeGetParams). Tests use it; it is no user's
// business.
func (n Node) hostCallbackID() (uintptr, error) {
	p := new(cu.CUDA_HOST_NODE_PARAMS_v1)
	err := n.use("Node.hostCallbackID", func() error { return cu.GraphHostNodeGetParams(n.h, p) })
	return p.UserData, err
}
