package stress

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

// The graph Close stress (issue 18): many goroutines race the Close of
// graphs, clones, executables, streams, buffers, events, a module and Args
// against every exported method of package graph, round after round. Tests
// run it against fakecuda (tests/fakedriver, which counts bad uses and
// concurrent graph calls) and on a GPU (package graph), and check that no
// call panics, every error is one the call may give, and nothing is left
// once everything is closed.

// GraphN is the element count of the stress's buffers.
const GraphN = 64

// GraphWorld is one round's objects. Every closer is called at some point
// of the round, by some goroutine, while the others use the objects.
type GraphWorld struct {
	Ctx                *driver.Context
	Fill               *driver.Function // fill(int *out, int v, int n)
	Cond               bool             // the driver has conditional nodes
	S, S2, S3          *driver.Stream   // S is never captured; S2 is; S3 is forked into captures
	Ev, Ev2            *driver.Event
	Buf, Buf2          *driver.Buffer[int32]
	HB                 *driver.HostBuffer[int32]
	Args               *driver.Args
	G, Twin, Child     *graph.Graph // Twin and Child have G's first nodes' topology
	Child2, Mem        *graph.Graph // Child2 has Child's topology; Mem has memory nodes
	Exec               *graph.Exec  // of G, made with G's first nodes
	K, M, C, H, ER, EW graph.Node   // G's first nodes, one of each kind SetX changes
	CH                 graph.Node   // G's child-graph node
	Host               []int32
	HostCalls          *atomic.Int64
	// Other is a second context of Ctx's device with a buffer of its own;
	// Multi, a graph of Ctx, gets nodes that run in Other or copy between
	// the two (Builder.On).
	Other    *driver.Context
	OtherBuf *driver.Buffer[int32]
	Multi    *graph.Graph

	mu    sync.Mutex
	nodes []graph.Node // recent nodes of every graph, for node operations
	sc    atomic.Pointer[graph.StreamCapture]

	Closers     []func() error
	CloserNames []string
}

// NewGraphWorld makes a round's objects in ctx; fill is ctx's fill kernel.
func NewGraphWorld(ctx *driver.Context, fill *driver.Function, cond bool, hostCalls *atomic.Int64) (w *GraphWorld, err error) {
	w = &GraphWorld{Ctx: ctx, Fill: fill, Cond: cond, HostCalls: hostCalls, Host: make([]int32, GraphN)}
	add := func(name string, c func() error) {
		w.Closers = append(w.Closers, c)
		w.CloserNames = append(w.CloserNames, name)
	}
	defer func() {
		if err != nil {
			_ = w.CloseAll()
		}
	}()
	streams := []**driver.Stream{&w.S, &w.S2, &w.S3}
	for i, s := range streams {
		if *s, err = ctx.NewStream(driver.StreamNonBlocking); err != nil {
			return w, err
		}
		add(fmt.Sprintf("Stream.Close (S%d)", i+1), (*s).Close)
	}
	if w.Ev, err = ctx.NewEvent(driver.EventDisableTiming); err != nil {
		return w, err
	}
	add("Event.Close", w.Ev.Close)
	if w.Ev2, err = ctx.NewEvent(driver.EventDisableTiming); err != nil {
		return w, err
	}
	add("Event.Close (2)", w.Ev2.Close)
	if w.Buf, err = driver.Alloc[int32](ctx, GraphN); err != nil {
		return w, err
	}
	add("Buffer.Close", w.Buf.Close)
	if w.Buf2, err = driver.Alloc[int32](ctx, GraphN); err != nil {
		return w, err
	}
	add("Buffer.Close (2)", w.Buf2.Close)
	if w.HB, err = driver.AllocHost[int32](ctx, GraphN, driver.HostAllocDefault); err != nil {
		return w, err
	}
	add("HostBuffer.Close", w.HB.Close)
	if w.Args, err = fill.NewArgs(w.Buf2, int32(3), int32(GraphN)); err != nil {
		return w, err
	}
	add("Args.Close", w.Args.Close)

	// G and Twin start with the same topology, so that Exec (of G) can be
	// updated with Twin; Child and Child2 too, for SetChild.
	for _, p := range []**graph.Graph{&w.Child, &w.Child2} {
		if *p, err = graph.New(ctx); err != nil {
			return w, err
		}
		if _, err = (*p).Kernel(fill, driver.Grid(1), driver.Block(GraphN), w.Buf, int32(7), int32(GraphN)); err != nil {
			return w, err
		}
	}
	for _, p := range []**graph.Graph{&w.G, &w.Twin} {
		if *p, err = graph.New(ctx); err != nil {
			return w, err
		}
		g := *p
		k, err := g.KernelWith(fill, w.cfg(), w.Buf, int32(1), int32(GraphN))
		if err != nil {
			return w, err
		}
		m, err := g.After(k).Memset(graph.Device(w.Buf2), 0, 4)
		if err != nil {
			return w, err
		}
		c, err := g.After(m).Memcpy(graph.Slice(w.Host), graph.Device(w.Buf))
		if err != nil {
			return w, err
		}
		calls := w.HostCalls
		h, err := g.After(c).HostFunc(func() { calls.Add(1) })
		if err != nil {
			return w, err
		}
		er, err := g.After(h).EventRecord(w.Ev)
		if err != nil {
			return w, err
		}
		ew, err := g.After(er).EventWait(w.Ev)
		if err != nil {
			return w, err
		}
		ch, err := g.After(ew).Child(w.Child)
		if err != nil {
			return w, err
		}
		if g == w.G {
			w.K, w.M, w.C, w.H, w.ER, w.EW, w.CH = k, m, c, h, er, ew, ch
		}
	}
	if w.Exec, err = w.G.Instantiate(); err != nil {
		return w, err
	}
	if w.Mem, err = graph.New(ctx); err != nil {
		return w, err
	}
	otherDev := ctx.Device()
	// PURECUDA_STRESS_OTHER_DEVICE=N puts Other on device N instead of
	// Ctx's, to narrow down a failure.
	if s := os.Getenv("PURECUDA_STRESS_OTHER_DEVICE"); s != "" {
		n, perr := strconv.Atoi(s)
		if perr != nil {
			return w, perr
		}
		if otherDev, err = driver.DeviceByOrdinal(n); err != nil {
			return w, err
		}
	}
	if w.Other, err = otherDev.NewContext(driver.ContextSchedAuto); err != nil {
		return w, err
	}
	add("Context.Close (Other)", w.Other.Close)
	if w.OtherBuf, err = driver.Alloc[int32](w.Other, GraphN); err != nil {
		return w, err
	}
	add("Buffer.Close (Other)", w.OtherBuf.Close)
	if w.Multi, err = graph.New(ctx); err != nil {
		return w, err
	}
	add("Graph.Close (Multi)", w.Multi.Close)
	add("Graph.Close (G)", w.G.Close)
	add("Graph.Close (Twin)", w.Twin.Close)
	add("Graph.Close (Child)", w.Child.Close)
	add("Graph.Close (Child2)", w.Child2.Close)
	add("Graph.Close (Mem)", w.Mem.Close)
	add("Exec.Close", w.Exec.Close)
	add("StreamCapture.Abort (shared)", func() error {
		if sc := w.sc.Swap(nil); sc != nil {
			return sc.Abort()
		}
		return nil
	})
	w.remember(w.K, w.M, w.C, w.H, w.ER, w.EW, w.CH)
	return w, nil
}

func (w *GraphWorld) cfg() driver.LaunchConfig {
	return driver.LaunchConfig{Grid: driver.Grid(1), Block: driver.Block(GraphN)}
}

// CloseAll closes everything (Close is idempotent) and reports errors.
func (w *GraphWorld) CloseAll() error {
	var errs []error
	for i := len(w.Closers) - 1; i >= 0; i-- {
		if err := w.Closers[i](); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", w.CloserNames[i], err))
		}
	}
	return errors.Join(errs...)
}

func (w *GraphWorld) remember(ns ...graph.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range ns {
		if n.IsZero() {
			continue
		}
		if len(w.nodes) >= 64 {
			copy(w.nodes, w.nodes[1:])
			w.nodes = w.nodes[:63]
		}
		w.nodes = append(w.nodes, n)
	}
}

func (w *GraphWorld) node(r *rand.Rand) graph.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.nodes) == 0 {
		return graph.Node{}
	}
	return w.nodes[r.IntN(len(w.nodes))]
}

// gnode is a recent node of G (or the zero Node).
func (w *GraphWorld) gnode(r *rand.Rand) graph.Node {
	for range 4 {
		if n := w.node(r); n.Graph() == w.G {
			return n
		}
	}
	return w.K
}
