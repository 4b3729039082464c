package graph

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/lifetime"
)

// Must show 3: a host-callback closure with no other reference runs at
// every launch and is released after teardown.
func TestHostCallbackRunsEveryLaunch(t *testing.T) {
	e, s := setup(t)
	st0 := lifetime.ReadStats()
	var count atomic.Int64
	g, err := New(e.ctx)
	require.NoError(t, err)
	k, err := g.KernelWith(e.fn["empty"], cfg(1))
	require.NoError(t, err)
	func() {
		f := func() { count.Add(1) }
		_, err = g.After(k).HostFunc(f)
		require.NoError(t, err)
	}()
	collect()
	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	collect()
	for i := 0; i < 1000; i++ {
		require.NoError(t, exe.Launch(s))
	}
	require.NoError(t, s.Synchronize())
	assert.EqualValues(t, 1000, count.Load())
	assert.NoError(t, exe.Err())
	require.NoError(t, exe.Close())
	eventually(t, func() bool { return lifetime.ReadStats().Callbacks <= st0.Callbacks }, "callback released")
}

// A panic in a host node is contained and reported by Exec.Err.
func TestHostCallbackPanic(t *testing.T) {
	e, s := setup(t)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	_, err = g.HostFunc(func() { panic("graph boom") })
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	err = exe.Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "graph boom")
	assert.NoError(t, exe.Err(), "reported once")
}

// Must show 4: a clone runs after its original is closed; an executable
// after its graph is closed; events, modules and child graphs stay alive.
func TestCloneExecEventsModulesChildren(t *testing.T) {
	e, s := setup(t)
	st0 := lifetime.ReadStats()
	// A module of our own, closed before any launch.
	mod, err := e.ctx.LoadModule(e.ptx)
	require.NoError(t, err)
	fill, err := mod.Function("fill")
	require.NoError(t, err)
	ev, err := e.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)

	const n = 256
	outChild := make([]int32, n)
	child, err := New(e.ctx)
	require.NoError(t, err)
	buf, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	ck, err := child.KernelWith(fill, cfg(n), buf, int32(100), int32(n))
	require.NoError(t, err)
	_, err = child.After(ck).Memcpy(Slice(outChild), Device(buf))
	require.NoError(t, err)
	require.NoError(t, buf.Close())

	g, err := New(e.ctx)
	require.NoError(t, err)
	c, err := g.Child(child)
	require.NoError(t, err)
	rec, err := g.After(c).EventRecord(ev)
	require.NoError(t, err)
	_, err = g.After(rec).EventWait(ev)
	require.NoError(t, err)
	require.NoError(t, child.Close())
	require.NoError(t, mod.Close())
	require.NoError(t, ev.Close())

	clone, err := g.Clone()
	require.NoError(t, err)
	found, err := clone.Find(c)
	require.NoError(t, err)
	kind, err := found.Kind()
	require.NoError(t, err)
	assert.Equal(t, KindChild, kind)
	require.NoError(t, g.Close())
	collect()

	exe, err := clone.Instantiate()
	require.NoError(t, err)
	require.NoError(t, clone.Close())
	collect()
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	for i := range outChild {
		require.Equal(t, int32(100+i), outChild[i])
	}
	require.NoError(t, exe.Close())
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Objects <= st0.Objects && st.Pinned <= st0.Pinned
	}, "module, event, buffer and pins released")
}

// Introspection: nodes, roots, edges, kinds, dependencies, parameters,
// DOT, edge changes, cycles, node destruction.
func TestIntrospection(t *testing.T) {
	e, _ := setup(t)
	st0 := lifetime.ReadStats()
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	buf, err := driver.Alloc[int32](e.ctx, 64)
	require.NoError(t, err)
	set, err := g.Memset(Device(buf), 9, 4)
	require.NoError(t, err)
	k, err := g.After(set).KernelWith(e.fn["fill"], driver.LaunchConfig{Grid: driver.Grid(2), Block: driver.Block(32)}, buf, int32(1), int32(64))
	require.NoError(t, err)
	host := make([]int32, 64)
	cp, err := g.After(k).Memcpy(Slice(host), Device(buf))
	require.NoError(t, err)
	h, err := g.After(cp).HostFunc(func() {})
	require.NoError(t, err)
	emp, err := g.Empty()
	require.NoError(t, err)
	// Memory nodes live in a graph of their own: CUDA refuses edge removal
	// and node destruction in graphs that have them.
	gm, err := New(e.ctx)
	require.NoError(t, err)
	defer gm.Close()
	an, ptr, err := gm.MemAlloc(1<<20, MemAllocOptions{})
	require.NoError(t, err)
	fr, err := gm.After(an).MemFree(ptr)
	require.NoError(t, err)

	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Len(t, nodes, 5)
	roots, err := g.Roots()
	require.NoError(t, err)
	assert.ElementsMatch(t, []Node{set, emp}, roots)
	edges, err := g.Edges()
	require.NoError(t, err)
	assert.ElementsMatch(t, []Edge{{set, k}, {k, cp}, {cp, h}}, edges)
	medges, err := gm.Edges()
	require.NoError(t, err)
	assert.Equal(t, []Edge{{an, fr}}, medges)
	for n, want := range map[Node]Kind{set: KindMemset, k: KindKernel, cp: KindMemcpy, h: KindHost, emp: KindEmpty, an: KindMemAlloc, fr: KindMemFree} {
		got, err := n.Kind()
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	deps, err := k.Dependencies()
	require.NoError(t, err)
	assert.Equal(t, []Node{set}, deps)
	dents, err := k.Dependents()
	require.NoError(t, err)
	assert.Equal(t, []Node{cp}, dents)

	kp, err := k.KernelParams()
	require.NoError(t, err)
	assert.Equal(t, driver.Grid(2), kp.Grid)
	assert.Equal(t, driver.Block(32), kp.Block)
	mp, err := set.MemsetParams()
	require.NoError(t, err)
	assert.Equal(t, MemsetInfo{Dst: buf.Ptr(), Value: 9, ElemSize: 4, Count: 64, Rows: 1}, mp)
	cpp, err := cp.MemcpyParams()
	require.NoError(t, err)
	assert.Equal(t, 256, cpp.Bytes)
	assert.True(t, cpp.DstHost)
	assert.False(t, cpp.SrcHost)
	assert.Equal(t, uintptr(buf.Ptr()), cpp.Src)
	ap, err := an.MemAllocParams()
	require.NoError(t, err)
	assert.Equal(t, MemAllocInfo{Ptr: ptr, Bytes: 1 << 20}, ap)
	fp, err := fr.MemFreeParams()
	require.NoError(t, err)
	assert.Equal(t, ptr, fp)
	id, err := h.hostCallbackID()
	require.NoError(t, err)
	assert.True(t, hostfn.Pending(id), "the host node's callback is registered")

	var dot bytes.Buffer
	require.NoError(t, g.WriteDOT(&dot, DOTVerbose))
	assert.True(t, strings.HasPrefix(dot.String(), "digraph"), dot.String())

	// Edges: add, refuse a cycle and a self-edge, remove.
	require.NoError(t, g.AddEdge(h, emp))
	assert.ErrorIs(t, g.AddEdge(emp, set), ErrCycle)
	assert.ErrorIs(t, g.AddEdge(emp, emp), ErrCycle)
	require.NoError(t, g.RemoveEdge(h, emp))
	require.NoError(t, g.AddEdge(emp, set), "no cycle once the edge is gone")
	require.NoError(t, g.RemoveEdge(emp, set))

	// Destroying a node releases what it held (nothing shared it yet).
	require.NoError(t, buf.Close())
	before := lifetime.ReadStats().Live
	require.NoError(t, cp.Destroy())
	assert.Equal(t, before-2, lifetime.ReadStats().Live, "the copy's buffer and pinned slice")
	_, err = cp.Kind()
	assert.ErrorIs(t, err, ErrDestroyedNode)
	_, err = g.After(cp).Empty()
	assert.ErrorIs(t, err, ErrDestroyedNode)
	require.NoError(t, g.Close())
	eventually(t, func() bool { return lifetime.ReadStats().Live <= st0.Live }, "owners released")
}

// Graph memory nodes: memory allocated and freed inside the graph, used by
// a kernel and a copy in between.
func TestMemAllocNodes(t *testing.T) {
	e, s := setup(t)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	const n = 512
	an, ptr, err := g.MemAlloc(n*4, MemAllocOptions{Device: e.dev})
	require.NoError(t, err)
	k, err := g.After(an).KernelWith(e.fn["fill"], cfg(n), ptr, int32(-3), int32(n))
	require.NoError(t, err)
	out := make([]int32, n)
	cp, err := g.After(k).Memcpy(Slice(out), RawDevice(ptr, n*4, nil))
	require.NoError(t, err)
	_, err = g.After(cp).MemFree(ptr)
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	for i := 0; i < 3; i++ {
		require.NoError(t, exe.Launch(s))
	}
	require.NoError(t, s.Synchronize())
	assert.Equal(t, int32(-3+n-1), out[n-1])
}

// Batch binds once for many adds; adds from inside work as outside.
func TestBatch(t *testing.T) {
	e, s := setup(t)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	ctr, err := driver.Alloc[uint64](e.ctx, 1)
	require.NoError(t, err)
	defer ctr.Close()
	require.NoError(t, ctr.Memset32(e.ctx.LegacyStream(), 0))
	require.NoError(t, g.Batch(func() error {
		prev, err := g.KernelWith(e.fn["incr"], one, ctr)
		if err != nil {
			return err
		}
		for i := 1; i < 50; i++ {
			if prev, err = g.After(prev).KernelWith(e.fn["incr"], one, ctr); err != nil {
				return err
			}
		}
		return nil
	}))
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	got := make([]uint64, 1)
	require.NoError(t, ctr.CopyToHost(e.ctx.LegacyStream(), got))
	assert.EqualValues(t, 50, got[0])
}

// Must show 8: bad inputs are clear errors.
func TestBadInputsGPU(t *testing.T) {
	e, s := setup(t)
	g, err := New(e.ctx)
	require.NoError(t, err)
	other, err := New(e.ctx)
	require.NoError(t, err)
	defer other.Close()
	buf, err := driver.Alloc[int32](e.ctx, 16)
	require.NoError(t, err)
	k, err := g.KernelWith(e.fn["fill"], cfg(16), buf, int32(0), int32(16))
	require.NoError(t, err)
	ok, err := other.Empty()
	require.NoError(t, err)

	exe, err := g.Instantiate()
	require.NoError(t, err)
	assert.ErrorIs(t, exe.Launch(nil), driver.ErrNilStream)
	_, err = g.After(ok).Empty()
	assert.ErrorIs(t, err, ErrForeignNode, "node of another graph")
	assert.ErrorIs(t, g.AddEdge(k, ok), ErrForeignNode)
	_, err = g.After(Node{}).Empty()
	assert.ErrorIs(t, err, ErrForeignNode, "zero node")
	_, err = g.KernelWith(nil, cfg(1))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "nil function")
	_, err = g.KernelWith(e.fn["fill"], cfg(16), buf, int32(0))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "wrong argument count")
	_, err = g.KernelWith(e.fn["fill"], cfg(16), buf, int64(0), int32(16))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "wrong argument size")
	_, err = g.KernelWith(e.fn["fill"], driver.LaunchConfig{Grid: driver.Grid(0), Block: driver.Block(1)}, buf, int32(0), int32(16))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "zero grid")
	require.NoError(t, buf.Close())
	_, err = g.KernelWith(e.fn["fill"], cfg(16), buf, int32(0), int32(16))
	assert.ErrorIs(t, err, driver.ErrClosed, "closed buffer as a new argument")
	_, err = g.Memset(Device(buf), 0, 4)
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = g.Memcpy(Slice([]int32{}), Slice([]int32{1}))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "zero-size memcpy")
	b2, err := driver.Alloc[int32](e.ctx, 4)
	require.NoError(t, err)
	defer b2.Close()
	_, err = g.Memset(Device(b2), 0, 3)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "bad element size")
	_, err = g.Memset(Device(b2), 0x1ff, 1)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "value too wide")
	_, err = g.Memset(Slice([]int32{1}), 0, 4)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "memset of host memory")
	_, err = g.Memcpy(Device(b2), Slice(make([]int32, 5)))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "copy larger than the destination")
	_, err = g.Memcpy(Slice([]*int{nil}), Device(b2))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "slice of pointers")
	_, err = g.HostFunc(nil)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = g.Child(g)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, _, err = g.MemAlloc(0, MemAllocOptions{})
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = g.EventRecord(nil)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)

	// Destroyed graph and executable used again.
	require.NoError(t, g.Close())
	_, err = g.Empty()
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = k.Kind()
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = g.Instantiate()
	assert.ErrorIs(t, err, driver.ErrClosed)
	require.NoError(t, exe.Close())
	assert.ErrorIs(t, exe.Launch(s), driver.ErrClosed)
	assert.NoError(t, exe.Close(), "Close is idempotent")
	assert.NoError(t, g.Close())
}

// Launching one executable from several goroutines on different streams.
func TestConcurrentLaunches(t *testing.T) {
	e, _ := setup(t)
	ctr, err := driver.Alloc[uint64](e.ctx, 1)
	require.NoError(t, err)
	defer ctr.Close()
	require.NoError(t, ctr.Memset32(e.ctx.LegacyStream(), 0))
	g, err := New(e.ctx)
	require.NoError(t, err)
	_, err = g.KernelWith(e.fn["incr"], one, ctr)
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := e.ctx.NewStream(driver.StreamNonBlocking)
			if !assert.NoError(t, err) {
				return
			}
			defer s.Close()
			for i := 0; i < 100; i++ {
				assert.NoError(t, exe.Launch(s))
				runtime.Gosched()
			}
			assert.NoError(t, s.Synchronize())
		}()
	}
	wg.Wait()
	require.NoError(t, exe.Close())
	got := make([]uint64, 1)
	require.NoError(t, ctr.CopyToHost(e.ctx.LegacyStream(), got))
	assert.EqualValues(t, 800, got[0])
}
