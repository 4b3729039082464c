package graph

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/internal/tables"
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

// Graph is an explicit CUDA graph definition (CUgraph) in one context,
// which its calls bind; its kernel, memcpy and memset nodes may run in
// other contexts, on other devices (see "Several GPUs" in the package
// documentation).
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
// A Graph that becomes unreachable without Close is closed by a cleanup, on
// purecuda's release goroutine.
//
// # Concurrency
//
// A Graph is safe for concurrent use. CUDA's graphs are not: purecuda
// serialises every call on a graph, its bodies, its clones and the
// executables made from them (one lock per family), so two goroutines never
// reach CUDA with one graph at once, and Close waits for no call but
// destroys the graph only once the last call in flight is done. While a
// stream capture into a graph of the family is running, calls on the family
// fail with ErrCapturing (the capture changes the graph behind them);
// launching executables is not affected.
type Graph struct {
	*graphCore
	// up is a body graph's top-level graph: a body's handle keeps it
	// reachable, so that the top-level graph's cleanup waits for both.
	up *Graph
}

// graphCore is what a Graph's cleanup closes: it never points back at the
// Graph handle.
type graphCore struct {
	h      cu.CUgraph
	ctx    *driver.Context
	ctxRef lifetime.Ref
	obj    lifetime.Object // owner + calls in flight + executables made from it
	sink   *sink           // host-callback panics, shared with clones and executables
	fam    *family         // the lock and capture state the graph shares with its family

	// root is the top-level graph when g is a body graph owned by one of its
	// nodes (a conditional node's branch): bodies record their owners in,
	// and are held alive by, the root's tables.
	root  *graphCore
	batch atomic.Int32 // Batch calls in progress: binds check the current context first
	scr   *scratch

	// Under fam.mu. A top-level graph's owner tables and user objects:
	table  *tables.Table                   // owners of the nodes added since the graph was last shared
	bodies map[cu.CUgraphNode][]*graphCore // body graphs owned by a node (of g or its bodies), in the root
	uos    []cu.CUuserObject               // user objects this graph holds: its tables' and its children's
	multi  bool                            // a node runs in, or names, another context (multi.go); sticky
	// Every graph's live nodes, for Node's generation check (nodes.go).
	nodes []cu.CUgraphNode          // by slot; 0 once destroyed
	slots map[cu.CUgraphNode]uint32 // slot of each live node, built when first needed
}

// family is what a top-level graph shares with its bodies, its clones and
// the executables made from any of them: CUDA's calls on one of them may
// touch another's state (an executable's destroy touches the graph it was
// instantiated from, seen crashing libcuda when it raced an instantiation
// of that graph), so one lock serialises them all.
type family struct {
	mu sync.Mutex
	// capture is the stream capture into a graph of the family that is
	// running, if any: it changes its graph from the captured streams,
	// without the lock, so calls on the family wait for its end.
	capture *captureState
	// later are destroys that came while a capture was running; they run
	// once it has ended.
	later []func() error
}

// scratch is per-graph heap memory for out-parameters and parameter
// blocks, so that node adds allocate nothing (used under the family lock).
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
}

const maxPeers = 16

// New creates an empty graph in ctx (cuGraphCreate). The graph holds ctx
// until it is closed.
func New(ctx *driver.Context) (*Graph, error) {
	ref, err := seam.Hold(ctx)
	if err != nil {
		return nil, err
	}
	c := newCore(ctx, ref, &sink{}, &family{})
	h := new(cu.CUgraph)
	if err := c.bind(func() error { return cu.GraphCreate(h, 0) }); err != nil {
		_ = ref.Release()
		return nil, err
	}
	c.h = *h
	return c.open(), nil
}

func newCore(ctx *driver.Context, ref lifetime.Ref, s *sink, f *family) *graphCore {
	return &graphCore{ctx: ctx, ctxRef: ref, sink: s, fam: f, scr: &scratch{}}
}

// open starts the lifetime of c, a top-level graph whose CUDA graph exists,
// and returns its handle, which closes it when it becomes unreachable.
func (c *graphCore) open() *Graph {
	c.obj.Init(c.destroy)
	g := &Graph{graphCore: c}
	runtime.AddCleanup(g, func(c *graphCore) { release.Defer(graphCloser{c}) }, c)
	return g
}

// graphCloser closes the graph of an unreachable Graph handle, on the
// release queue (a release.Owner).
type graphCloser struct{ c *graphCore }

func (x graphCloser) Release() error { return lifetime.Counted(x.c.obj.Close()) }

// destroy is the graph's destroy: cuGraphDestroy drops the graph's
// references on its user objects, so its owner tables are released once
// its clones and executables are gone too. While a capture runs in the
// family, the destroy waits for its end.
func (c *graphCore) destroy() error {
	f := c.fam
	f.mu.Lock()
	if f.capture != nil {
		f.later = append(f.later, c.destroy)
		f.mu.Unlock()
		return nil
	}
	err := c.bind(func() error { return cu.GraphDestroy(c.h) })
	// The body graphs (of conditional nodes, at any depth) went with it:
	// close them, dropping their references on the context. No call holds
	// c now, and body calls hold c too, so nothing else uses c.bodies.
	var bodies []*graphCore
	for _, bs := range c.bodies {
		bodies = append(bodies, bs...)
	}
	c.bodies = nil
	f.mu.Unlock()
	for _, b := range bodies {
		_ = b.obj.Close()
	}
	_ = c.ctxRef.Release()
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
	if g.graphCore == nil || g.root != nil {
		return nil // a zero Graph owns nothing; a body belongs to its node
	}
	return g.obj.Close()
}

// Context is the graph's context (nil for a nil or zero Graph).
func (g *Graph) Context() *driver.Context {
	if g == nil || g.graphCore == nil {
		return nil
	}
	return g.ctx
}

// acquire holds g, and a body's root, for a call.
func (g *Graph) acquire(op string) error {
	if g == nil {
		return invalid(op, "nil graph")
	}
	if g.graphCore == nil {
		return closed(op, "graph")
	}
	if g.root != nil && !g.root.obj.Acquire() {
		return closed(op, "graph the body belongs to")
	}
	if !g.obj.Acquire() {
		if g.root != nil {
			_ = g.root.obj.Release()
		}
		if g.root != nil {
			return fmt.Errorf("graph: %s: the body's conditional node was destroyed: %w: %w", op, ErrDestroyedNode, driver.ErrClosed)
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

// lock takes the family lock for a call on g. It fails when g is a body
// graph whose node was destroyed meanwhile (its CUDA graph is gone), and
// while a stream capture runs in the family (ErrCapturing).
func (g *Graph) lock(op string) error {
	if err := g.fam.lock(op); err != nil {
		return err
	}
	if err := g.bodyGone(op); err != nil {
		g.fam.mu.Unlock()
		return err
	}
	return nil
}

// bodyGone fails for a body graph whose conditional node was destroyed.
// The family lock is held.
func (g *Graph) bodyGone(op string) error {
	if g.root != nil && g.obj.Closed() {
		return fmt.Errorf("graph: %s: the body's conditional node was destroyed: %w: %w", op, ErrDestroyedNode, driver.ErrClosed)
	}
	return nil
}

// lock takes the family lock, refusing while a capture runs.
func (f *family) lock(op string) error {
	f.mu.Lock()
	if f.capture != nil {
		f.mu.Unlock()
		return fmt.Errorf("graph: %s: a stream capture into the graph (or one of its family: its bodies, clones, the graph it was cloned from) is running: %w", op, ErrCapturing)
	}
	return nil
}

// lockTwo takes two families' locks (b may be a or nil) in one order, so
// that two calls locking each other's cannot deadlock.
func lockTwo(op string, a, b *family) error {
	if b == nil || b == a {
		return a.lock(op)
	}
	if uintptr(unsafe.Pointer(b)) < uintptr(unsafe.Pointer(a)) {
		a, b = b, a
	}
	if err := a.lock(op); err != nil {
		return err
	}
	if err := b.lock(op); err != nil {
		a.mu.Unlock()
		return err
	}
	return nil
}

func unlockTwo(a, b *family) {
	if b != nil && b != a {
		b.mu.Unlock()
	}
	a.mu.Unlock()
}

// enter holds g and takes its family lock for a call; leave undoes it,
// letting the lock go before the reference (whose release may destroy g,
// which takes the lock).
func (g *Graph) enter(op string) error {
	if err := g.acquire(op); err != nil {
		return err
	}
	if err := g.lock(op); err != nil {
		g.release()
		return err
	}
	return nil
}

func (g *Graph) leave() {
	g.fam.mu.Unlock()
	g.release()
}

// top is the graph whose tables and user objects hold g's owners: g, or
// its root when g is a body graph.
func (c *graphCore) top() *graphCore {
	if c.root != nil {
		return c.root
	}
	return c
}

// newBody wraps body, a graph owned by node owner of g (a conditional
// node's branch), as a Graph whose node adds record their owners in g's
// root. It is invalidated when owner is destroyed or the root is closed.
// The family lock is held.
func (g *Graph) newBody(body cu.CUgraph, owner cu.CUgraphNode) (*Graph, error) {
	t := g.top()
	ref, ok := t.ctxRef.Clone()
	if !ok {
		return nil, closed("body graph", "graph's context")
	}
	b := newCore(g.ctx, ref, t.sink, t.fam)
	b.h, b.root = body, t
	b.obj.Init(func() error { return lifetime.Counted(b.ctxRef.Release()) }) // the node owns the CUDA graph
	if t.bodies == nil {
		t.bodies = map[cu.CUgraphNode][]*graphCore{}
	}
	t.bodies[owner] = append(t.bodies[owner], b)
	up := g.up
	if up == nil {
		up = g
	}
	return &Graph{graphCore: b, up: up}, nil
}

// dropBodies closes the body graphs owned by node h, which is being
// destroyed. The family lock is held: closing a body runs no CUDA call.
func (c *graphCore) dropBodies(h cu.CUgraphNode) {
	t := c.top()
	for _, b := range t.bodies[h] {
		_ = b.obj.Close()
	}
	delete(t.bodies, h)
}

// bind runs f with the graph's context current on a locked OS thread (a
// node add without one crashes libcuda, DESIGN fact 1), leaving the thread
// as it found it. Inside Batch the context is usually current already,
// which one query confirms. The graph holds its context, so it is never
// destroyed under f. Callers hold the family lock or own c alone.
func (c *graphCore) bind(f func() error) (err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := cu.CUcontext(seam.Context(c.ctx))
	if c.batch.Load() > 0 && cu.CtxGetCurrent(&c.scr.cur) == nil && c.scr.cur == h {
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
	if err := cu.CtxPushCurrent(cu.CUcontext(seam.Context(g.ctx))); err != nil {
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

// lockFamilies takes the family locks of a and b (b may be nil or of the
// same family), refusing while a capture runs in either or a is a body
// whose node is gone.
func lockFamilies(op string, a, b *Graph) error {
	var bf *family
	if b != nil {
		bf = b.fam
	}
	if err := lockTwo(op, a.fam, bf); err != nil {
		return err
	}
	if err := a.bodyGone(op); err != nil {
		unlockTwo(a.fam, bf)
		return err
	}
	return nil
}

func unlockFamilies(a, b *Graph) {
	var bf *family
	if b != nil {
		bf = b.fam
	}
	unlockTwo(a.fam, bf)
}
