package graph

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// ErrForeignNode is matched by errors for a node of another graph (or a
// zero Node) given where a node of this graph is needed.
var ErrForeignNode = errors.New("graph: node of another graph")

// ErrDestroyedNode is matched by errors for a node that was destroyed.
var ErrDestroyedNode = errors.New("graph: node was destroyed")

// ErrCycle is matched by the error for an edge that would close a cycle.
var ErrCycle = errors.New("graph: edge would close a cycle")

func invalid(op, format string, args ...any) error {
	return fmt.Errorf("graph: %s: %s: %w", op, fmt.Sprintf(format, args...), driver.ErrInvalidArgument)
}

func closed(op, what string) error {
	return fmt.Errorf("graph: %s: %s is closed (or a zero value): %w", op, what, driver.ErrClosed)
}

// Graph is an explicit CUDA graph definition (CUgraph) in one context.
//
// # Lifetime
//
// Everything a node names — device buffers, pinned or Go host memory,
// kernels' modules and libraries, events, host callbacks, child graphs — is
// held in an owner table that CUDA keeps as a user object of the graph: the
// graph, each clone and each executable made from them hold a reference,
// and the table is released only after the last of them is destroyed and
// their launched work has finished. Callers may close or drop their own
// handles as soon as a node is added. Destroying a node releases what it
// held at once when no clone, executable or parent graph made since the
// node was added can still use it, and otherwise with the table.
//
// # Concurrency
//
// Building one graph from several goroutines is the caller's to
// synchronise, as in CUDA (purecuda keeps its own bookkeeping consistent
// regardless, so racing adds cannot crash the process). Launching one Exec
// from several goroutines on different streams is safe.
type Graph struct {
	h      cu.CUgraph
	ctx    *driver.Context
	ctxRef lifetime.Ref
	obj    lifetime.Object // owner + calls in flight
	sink   *sink           // host-callback panics, shared with clones and executables

	// root is the top-level graph when g is a body graph owned by one of its
	// nodes (a conditional node's branch): bodies record their owners in,
	// and are held alive by, the root's tables.
	root *Graph

	mu     *sync.Mutex                 // one per tree: a body shares its root's
	table  *lifetime.Table             // owners of the nodes added since the graph was last shared
	bodies map[cu.CUgraphNode][]*Graph // body graphs owned by a node (of g or its bodies), in the root
	uos    []cu.CUuserObject           // user objects this graph holds: its tables' and its children's
	dead   map[cu.CUgraphNode]bool
	batch  atomic.Int32 // Batch calls in progress: binds check the current context first
	scr    *scratch
}

// scratch is per-graph heap memory for out-parameters and parameter
// blocks, so that node adds allocate nothing (used under Graph.mu).
type scratch struct {
	node   cu.CUgraphNode
	cur    cu.CUcontext
	uo     cu.CUuserObject
	deps   []cu.CUgraphNode
	kernel cu.CUDA_KERNEL_NODE_PARAMS_v2
	copy   cu.CUDA_MEMCPY3D_v2
	set    cu.CUDA_MEMSET_NODE_PARAMS_v1
	host   cu.CUDA_HOST_NODE_PARAMS_v1
	alloc  cu.CUDA_MEM_ALLOC_NODE_PARAMS
	access [maxPeers]cu.CUmemAccessDesc
	owners []lifetime.Owner
}

const maxPeers = 16

// New creates an empty graph in ctx (cuGraphCreate). The graph holds ctx
// until it is closed.
func New(ctx *driver.Context) (*Graph, error) {
	ref, err := ctx.Hold()
	if err != nil {
		return nil, err
	}
	g := newGraph(ctx, ref, &sink{})
	g.mu.Lock()
	defer g.mu.Unlock()
	h := new(cu.CUgraph)
	if err := g.bind(func() error { return cu.GraphCreate(h, 0) }); err != nil {
		_ = ref.Release()
		return nil, err
	}
	g.h = *h
	g.obj.Init(g.destroy)
	return g, nil
}

func newGraph(ctx *driver.Context, ref lifetime.Ref, s *sink) *Graph {
	return &Graph{ctx: ctx, ctxRef: ref, sink: s, scr: &scratch{}, mu: new(sync.Mutex)}
}

// destroy is the graph's destroy: cuGraphDestroy drops the graph's
// references on its user objects, so its owner tables are released once
// its clones and executables are gone too.
func (g *Graph) destroy() error {
	err := g.bind(func() error { return cu.GraphDestroy(g.h) })
	// The body graphs (of conditional nodes, at any depth) went with it:
	// close them, dropping their references on the context. No call holds
	// g now, and body calls hold g too, so nothing else uses g.bodies.
	for _, bodies := range g.bodies {
		for _, b := range bodies {
			_ = b.obj.Close()
		}
	}
	g.bodies = nil
	_ = g.ctxRef.Release()
	return err
}

// Close destroys the graph (cuGraphDestroy) once no call is using it.
// Executables and clones made from it keep working, and keep what its
// nodes hold alive. Idempotent; the first result is kept. Close on a body
// graph (a conditional node's branch) does nothing: it belongs to its node.
func (g *Graph) Close() error {
	if g == nil {
		return invalid("Graph.Close", "nil graph")
	}
	if g.ctx == nil || g.root != nil {
		return nil // a zero Graph owns nothing; a body belongs to its node
	}
	return g.obj.Close()
}

// Context is the graph's context (nil for a nil Graph).
func (g *Graph) Context() *driver.Context {
	if g == nil {
		return nil
	}
	return g.ctx
}

// acquire holds g for a call.
func (g *Graph) acquire(op string) error {
	if g == nil {
		return invalid(op, "nil graph")
	}
	if g.root != nil && !g.root.obj.Acquire() {
		return closed(op, "graph the body belongs to")
	}
	if !g.obj.Acquire() {
		if g.root != nil {
			_ = g.root.obj.Release()
		}
		return closed(op, "graph")
	}
	return nil
}

func (g *Graph) release() {
	_ = g.obj.Release()
	if g.root != nil {
		_ = g.root.obj.Release()
	}
}

// lock takes the tree's mutex for a call on g, and fails when g is a body
// graph whose node was destroyed meanwhile (its CUDA graph is gone).
func (g *Graph) lock(op string) error {
	g.mu.Lock()
	if g.root != nil && g.obj.Closed() {
		g.mu.Unlock()
		return closed(op, "body graph (its conditional node was destroyed)")
	}
	return nil
}

// top is the graph whose tables and user objects hold g's owners: g, or
// its root when g is a body graph.
func (g *Graph) top() *Graph {
	if g.root != nil {
		return g.root
	}
	return g
}

// newBody wraps body, a graph owned by node owner of g (a conditional
// node's branch), as a Graph whose node adds record their owners in g's
// root. It is invalidated when owner is destroyed or the root is closed.
// g.mu is held.
func (g *Graph) newBody(body cu.CUgraph, owner cu.CUgraphNode) (*Graph, error) {
	t := g.top()
	ref, ok := t.ctxRef.Clone()
	if !ok {
		return nil, closed("body graph", "graph's context")
	}
	b := newGraph(g.ctx, ref, t.sink)
	b.h, b.root, b.mu = body, t, t.mu                                        // one mutex for the whole tree
	b.obj.Init(func() error { return lifetime.Counted(b.ctxRef.Release()) }) // the node owns the CUDA graph
	if t.bodies == nil {
		t.bodies = map[cu.CUgraphNode][]*Graph{}
	}
	t.bodies[owner] = append(t.bodies[owner], b)
	return b, nil
}

// dropBodies closes the body graphs owned by node h, which is being
// destroyed. g.mu is held.
func (g *Graph) dropBodies(h cu.CUgraphNode) {
	t := g.top()
	for _, b := range t.bodies[h] {
		_ = b.obj.Close()
	}
	delete(t.bodies, h)
}

// bind runs f with the graph's context current on a locked OS thread (a
// node add without one crashes libcuda, DESIGN fact 1), leaving the thread
// as it found it. Inside Batch the context is usually current already,
// which one query confirms. The graph holds its context, so it is never
// destroyed under f. Callers hold g.mu or own g alone.
func (g *Graph) bind(f func() error) (err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := cu.CUcontext(g.ctx.Handle())
	if g.batch.Load() > 0 && cu.CtxGetCurrent(&g.scr.cur) == nil && g.scr.cur == h {
		return f()
	}
	if err := cu.CtxPushCurrent(h); err != nil {
		return err
	}
	defer func() {
		if perr := cu.CtxSetCurrent(0); err == nil {
			err = perr
		}
	}()
	return f()
}

// Batch runs f with the graph's context bound to the calling goroutine's OS
// thread, so that the node adds f makes on g skip binding their own (about
// a third of a node add's cost). Adds from other goroutines meanwhile still
// bind for themselves.
func (g *Graph) Batch(f func() error) (err error) {
	const op = "Graph.Batch"
	if f == nil {
		return invalid(op, "nil function")
	}
	if err := g.acquire(op); err != nil {
		return err
	}
	defer g.release()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.CtxPushCurrent(cu.CUcontext(g.ctx.Handle())); err != nil {
		return err
	}
	defer func() {
		if perr := cu.CtxSetCurrent(0); err == nil {
			err = perr
		}
	}()
	g.batch.Add(1)
	defer g.batch.Add(-1)
	return f()
}

// ownerTable returns the table for a new node's owners, making and
// attaching a new one when the graph has none it has not shared. g.mu is
// held and the context bound.
func (g *Graph) ownerTable() (*lifetime.Table, error) {
	if g.root != nil {
		return g.root.ownerTable() // the same mutex, held
	}
	if g.table != nil {
		return g.table, nil
	}
	t := lifetime.NewTable()
	uo, err := attach(g.h, t, g.scr)
	if err != nil {
		return nil, err
	}
	g.uos = append(g.uos, uo)
	g.table = t
	return t, nil
}

// attach makes t a CUDA user object owned by graph h: its destructor
// (lifetime's trampoline, with t's destructor callback as userData) runs
// after h, its clones and executables are gone and their work finished,
// and only queues t's release. On failure t is released.
func attach(h cu.CUgraph, t *lifetime.Table, scr *scratch) (cu.CUuserObject, error) {
	fn, err := lifetime.HostFn()
	if err != nil {
		_ = t.Release()
		return 0, err
	}
	id, err := t.DestructorID()
	if err != nil {
		_ = t.Release()
		return 0, err
	}
	if err := cu.UserObjectCreate(&scr.uo, id, cu.CUhostFn(fn), 1, uint32(cu.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)); err != nil {
		t.CancelDestructor()
		_ = t.Release()
		return 0, err
	}
	uo := scr.uo
	if err := cu.GraphRetainUserObject(h, uo, 1, uint32(cu.CU_GRAPH_USER_OBJECT_MOVE)); err != nil {
		// Ours is the only reference: dropping it runs the destructor,
		// which releases t.
		_ = cu.UserObjectRelease(uo, 1)
		return 0, err
	}
	return uo, nil
}

// shared marks the current owner table as shared with a clone, an
// executable or a parent graph: nodes added from now on go to a new table,
// and destroying an older node no longer releases its owners early.
func (g *Graph) shared() { g.top().table = nil }

// takeOwners removes node h's owners from the current table, if it holds
// them (nothing shared it since the node was added), for the caller to
// release with lifetime.ReleaseAll once it has let go of g.mu: an owner's
// Release (a Raw operand's, written by the user) may call back into the
// graph. g.mu is held.
func (g *Graph) takeOwners(h cu.CUgraphNode) []lifetime.Owner {
	t := g.top()
	if t.table == nil {
		return nil
	}
	return t.table.Take(uintptr(h))
}

// node checks that n is a live node of g; g.mu is held.
func (g *Graph) node(op string, n Node) error {
	if n.g != g || n.h == 0 {
		if n.g == nil || n.h == 0 {
			return fmt.Errorf("graph: %s: zero Node: %w", op, ErrForeignNode)
		}
		return fmt.Errorf("graph: %s: %w", op, ErrForeignNode)
	}
	if len(g.dead) > 0 && g.dead[n.h] {
		return fmt.Errorf("graph: %s: %w", op, ErrDestroyedNode)
	}
	return nil
}

// testRecordHook, when set by a test, runs after the driver added a node
// and before its owners are recorded: an error simulates a failure to
// record them.
var testRecordHook func() error

// add adds one node: it converts deps, calls addFn bound with them, and
// records owners against the new node. It owns owners from the start: on
// any failure each is released, and a node the driver added is removed
// again, so nothing is left half-built.
func (g *Graph) add(op string, deps []Node, owners []lifetime.Owner, addFn func(deps *cu.CUgraphNode, n uintptr) error) (Node, error) {
	return g.addWith(op, deps, owners, nil, addFn)
}

// addWith is add with a second graph tree's mutex, other, held too (taken
// in a fixed order, so two adds that lock each other's trees cannot
// deadlock): Child reads the child graph while the driver copies it.
func (g *Graph) addWith(op string, deps []Node, owners []lifetime.Owner, other *sync.Mutex, addFn func(deps *cu.CUgraphNode, n uintptr) error) (Node, error) {
	n, left, err := g.addHeld(op, deps, owners, other, addFn)
	// What the add did not keep is released with every lock let go: an
	// owner's Release (a Raw operand's) may call back into the graph.
	if rerr := lifetime.ReleaseAll(left); rerr != nil && err != nil {
		err = errors.Join(err, rerr)
	}
	return n, err
}

// addHeld is addWith's body, under the locks; it returns the owners that
// are still the caller's to release (none on success).
func (g *Graph) addHeld(op string, deps []Node, owners []lifetime.Owner, other *sync.Mutex, addFn func(deps *cu.CUgraphNode, n uintptr) error) (Node, []lifetime.Owner, error) {
	var left []lifetime.Owner // taken back from the table after a failed record
	fail := func(err error) (Node, []lifetime.Owner, error) {
		return Node{}, append(left, owners...), err
	}
	if err := g.acquire(op); err != nil {
		return fail(err)
	}
	defer g.release()
	if other == g.mu {
		other = nil
	}
	if other != nil && uintptr(unsafe.Pointer(other)) < uintptr(unsafe.Pointer(g.mu)) {
		other.Lock()
		defer other.Unlock()
	}
	if err := g.lock(op); err != nil {
		return fail(err)
	}
	defer g.mu.Unlock()
	if other != nil && uintptr(unsafe.Pointer(other)) > uintptr(unsafe.Pointer(g.mu)) {
		other.Lock()
		defer other.Unlock()
	}
	d := g.scr.deps[:0]
	for _, n := range deps {
		if err := g.node(op, n); err != nil {
			return fail(err)
		}
		d = append(d, n.h)
	}
	g.scr.deps = d
	var dp *cu.CUgraphNode
	if len(d) > 0 {
		dp = &d[0]
	}
	var h cu.CUgraphNode
	err := g.bind(func() error {
		t, err := g.ownerTable()
		if err != nil {
			return err
		}
		if err := addFn(dp, uintptr(len(d))); err != nil {
			return err
		}
		h = g.scr.node
		if testRecordHook != nil {
			if err := testRecordHook(); err != nil {
				removed, recorded, err := g.unadd(h, err)
				left = recorded
				if !removed {
					keepForGood(owners)
					owners = nil
				}
				return err
			}
		}
		for i, o := range owners {
			if err := t.Add(uintptr(h), o); err != nil {
				owners = owners[i:] // the rest are still ours; those recorded come back from unadd
				removed, recorded, err := g.unadd(h, err)
				left = recorded
				if !removed {
					keepForGood(owners)
					owners = nil
				}
				return err
			}
		}
		owners = nil
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if len(g.dead) > 0 {
		delete(g.dead, h)
	}
	return Node{g: g, h: h}, nil, nil
}

// unadd removes node h after its owners could not be recorded, releasing
// those that were; it returns err. The context is bound and g.mu held.
//
// The node goes first: if CUDA refuses (it does in graphs with memory
// nodes), the owners recorded so far stay with it, and the caller keeps the
// rest for good (keepForGood) — never a node naming released memory — and
// the error says the node is still there.
func (g *Graph) unadd(h cu.CUgraphNode, err error) (bool, []lifetime.Owner, error) {
	if derr := cu.GraphDestroyNode(h); derr != nil {
		return false, nil, errors.Join(err, fmt.Errorf("graph: the node could not be removed again and keeps what it names: %w", derr))
	}
	return true, g.takeOwners(h), err
}

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
	if err := g.acquire(op); err != nil {
		return nil, err
	}
	defer g.release()
	if err := g.lock(op); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	var hs []cu.CUgraphNode
	err := g.bind(func() error {
		var err error
		hs, err = fetchNodes(q)
		return err
	})
	if err != nil {
		return nil, err
	}
	return g.wrap(hs), nil
}

func (g *Graph) wrap(hs []cu.CUgraphNode) []Node {
	out := make([]Node, len(hs))
	for i, h := range hs {
		out[i] = Node{g: g, h: h}
	}
	return out
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
	if err := g.acquire(op); err != nil {
		return nil, err
	}
	defer g.release()
	if err := g.lock(op); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
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
		out[i] = Edge{Node{g, from[i]}, Node{g, to[i]}}
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
	if err := g.acquire(op); err != nil {
		return err
	}
	defer g.release()
	if err := g.lock(op); err != nil {
		return err
	}
	defer g.mu.Unlock()
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
	DOTVerbose          DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE)
	DOTKernelParams     DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_PARAMS)
	DOTMemcpyParams     DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_MEMCPY_NODE_PARAMS)
	DOTMemsetParams     DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_MEMSET_NODE_PARAMS)
	DOTHostParams       DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_HOST_NODE_PARAMS)
	DOTEventParams      DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_EVENT_NODE_PARAMS)
	DOTKernelAttributes DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_ATTRIBUTES)
	DOTHandles          DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_HANDLES)
	DOTMemAllocParams   DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_MEM_ALLOC_NODE_PARAMS)
	DOTMemFreeParams    DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_MEM_FREE_NODE_PARAMS)
	DOTConditional      DOTFlags = DOTFlags(cu.CU_GRAPH_DEBUG_DOT_FLAGS_CONDITIONAL_NODE_PARAMS)
)

// WriteDOT writes the graph in Graphviz DOT form to w
// (cuGraphDebugDotPrint, through a temporary file).
func (g *Graph) WriteDOT(w io.Writer, flags DOTFlags) error {
	const op = "Graph.WriteDOT"
	if w == nil {
		return invalid(op, "nil writer")
	}
	if err := g.acquire(op); err != nil {
		return err
	}
	defer g.release()
	dir, err := os.MkdirTemp("", "purecuda-dot")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "graph.dot")
	cpath := append([]byte(path), 0)
	if err := g.lock(op); err != nil {
		return err
	}
	err = g.bind(func() error { return cu.GraphDebugDotPrint(g.h, &cpath[0], uint32(flags)) })
	g.mu.Unlock()
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
// maps a node of the original to its counterpart.
func (g *Graph) Clone() (*Graph, error) {
	const op = "Graph.Clone"
	if err := g.acquire(op); err != nil {
		return nil, err
	}
	defer g.release()
	if g.root != nil {
		return nil, invalid(op, "a body graph belongs to its node: clone the graph it belongs to")
	}
	ref, ok := g.ctxRef.Clone() // works after the user closed the context
	if !ok {
		return nil, closed(op, "graph's context")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c := newGraph(g.ctx, ref, g.sink)
	h := new(cu.CUgraph)
	if err := g.bind(func() error { return cu.GraphClone(h, g.h) }); err != nil {
		_ = ref.Release()
		return nil, err
	}
	c.h = *h
	c.uos = append([]cu.CUuserObject(nil), g.uos...)
	c.obj.Init(c.destroy)
	g.shared()
	return c, nil
}

// Find returns the node of clone g that corresponds to orig, a node of the
// graph g was cloned from (cuGraphNodeFindInClone). The original must still
// be open.
func (g *Graph) Find(orig Node) (Node, error) {
	const op = "Graph.Find"
	if err := g.acquire(op); err != nil {
		return Node{}, err
	}
	defer g.release()
	og := orig.g
	if og == nil || orig.h == 0 {
		return Node{}, fmt.Errorf("graph: %s: zero Node: %w", op, ErrForeignNode)
	}
	if og == g {
		return orig, nil
	}
	if err := og.acquire(op); err != nil {
		return Node{}, err
	}
	defer og.release()
	og.mu.Lock()
	err := og.node(op, orig)
	og.mu.Unlock()
	if err != nil {
		return Node{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := new(cu.CUgraphNode)
	if err := g.bind(func() error { return cu.GraphNodeFindInClone(out, orig.h, g.h) }); err != nil {
		return Node{}, err
	}
	return Node{g: g, h: *out}, nil
}

// sink collects the panics (and Goexits) of a graph's host callbacks; it is
// shared by the graph, its clones and its executables.
type sink struct {
	mu   sync.Mutex
	errs []error
	// hosts is set once a graph reporting here has a host node: launching
	// its executables then tells the host-function server (lifetime.Expect).
	hosts atomic.Bool
}

// CallbackPanicked implements lifetime.PanicSink.
func (s *sink) CallbackPanicked(p any, stack []byte) {
	var err error
	if e, ok := p.(*lifetime.Goexited); ok {
		err = fmt.Errorf("graph: host node: %w", e)
	} else {
		err = fmt.Errorf("graph: host node panicked: %v\n%s", p, stack)
	}
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *sink) take() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := errors.Join(s.errs...)
	s.errs = nil
	return err
}
