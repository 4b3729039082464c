//go:build linux

package fakedriver_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

func TestFakeGraphInlineBufferSurvivesGC(t *testing.T) {
	f := setupGraph(t)
	allocs0 := fcall(t, "fake_live_allocations")
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	out := make([]int32, 64)
	func() {
		buf, err := driver.Alloc[int32](f.ctx, 64)
		require.NoError(t, err)
		k, err := g.KernelWith(f.fill, graphCfg, buf, int32(9), int32(64))
		require.NoError(t, err)
		_, err = g.After(k).Memcpy(graph.Slice(out), graph.Device(buf))
		require.NoError(t, err)
	}()
	gcAll()
	assert.Equal(t, allocs0+1, fcall(t, "fake_live_allocations"), "the graph holds the buffer")
	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	gcAll()
	require.NoError(t, exe.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	assert.Equal(t, int32(9+63), out[63])
	require.NoError(t, exe.Close())
	settle(t, func() bool { return fcall(t, "fake_live_allocations") == allocs0 }, "buffer freed after teardown")
	noBadUses(t)
}

func TestFakeGraphHostCallbackAndClone(t *testing.T) {
	f := setupGraph(t)
	cb0 := lifetime.ReadStats().Callbacks
	var runs atomic.Int64
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	ctr, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	k, err := g.KernelWith(f.add4, graphCfg, ctr, uint32(1), uint32(2), uint32(3))
	require.NoError(t, err)
	_, err = g.After(k).HostFunc(func() { runs.Add(1) })
	require.NoError(t, err)
	require.NoError(t, ctr.Close())
	clone, err := g.Clone()
	require.NoError(t, err)
	ck, err := clone.Find(k)
	require.NoError(t, err)
	kind, err := ck.Kind()
	require.NoError(t, err)
	assert.Equal(t, graph.KindKernel, kind)
	require.NoError(t, g.Close())
	gcAll()
	exe, err := clone.Instantiate()
	require.NoError(t, err)
	require.NoError(t, clone.Close())
	for i := 0; i < 100; i++ {
		require.NoError(t, exe.Launch(f.s))
	}
	require.NoError(t, f.s.Synchronize())
	assert.EqualValues(t, 100, runs.Load())
	require.NoError(t, exe.Close())
	settle(t, func() bool { return lifetime.ReadStats().Callbacks <= cb0 }, "callback released")
	noBadUses(t)
}

func TestFakeGraphRollback(t *testing.T) {
	f := setupGraph(t)
	st0 := lifetime.ReadStats()
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer buf.Close()
	faketest.FailNext(t, "cuGraphAddKernelNode", 2) // the driver refuses: nothing is held afterwards
	_, err = g.KernelWith(f.fill, graphCfg, buf, int32(0), int32(8))
	require.Error(t, err)
	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Empty(t, nodes)
	lifetime.Flush()
	st := lifetime.ReadStats()
	assert.LessOrEqual(t, st.Live, st0.Live, "before %+v after %+v", st0, st)
	assert.LessOrEqual(t, st.Callbacks, st0.Callbacks+1, "only the graph's table destructor: before %+v after %+v", st0, st)
	noBadUses(t)
}

func TestFakeGraphNoLeakCycles(t *testing.T) {
	f := setupGraph(t)
	bufs := make([]*driver.Buffer[int32], 3)
	for i := range bufs {
		b, err := driver.Alloc[int32](f.ctx, 16)
		require.NoError(t, err)
		bufs[i] = b
	}
	st0 := lifetime.ReadStats()
	graphs0, execs0 := fcall(t, "fake_live_graphs"), fcall(t, "fake_live_execs")
	var calls atomic.Int64
	const cycles = 300
	for c := 0; c < cycles; c++ {
		g, err := graph.New(f.ctx)
		require.NoError(t, err)
		prev, err := g.KernelWith(f.fill, graphCfg, bufs[0], int32(c), int32(16))
		require.NoError(t, err)
		for i := 1; i < 9; i++ {
			prev, err = g.After(prev).KernelWith(f.fill, graphCfg, bufs[i%3], int32(i), int32(16))
			require.NoError(t, err)
		}
		_, err = g.After(prev).HostFunc(func() { calls.Add(1) })
		require.NoError(t, err)
		exe, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, exe.Launch(f.s))
		require.NoError(t, exe.Close())
		require.NoError(t, g.Close())
	}
	require.NoError(t, f.s.Synchronize())
	assert.EqualValues(t, cycles, calls.Load())
	for _, b := range bufs {
		require.NoError(t, b.Close())
	}
	settle(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Callbacks <= st0.Callbacks && st.Tables <= st0.Tables
	}, "everything released")
	assert.Equal(t, graphs0, fcall(t, "fake_live_graphs"))
	assert.Equal(t, execs0, fcall(t, "fake_live_execs"))
	noBadUses(t)
}

func TestFakeGraphMassDestroy(t *testing.T) {
	f := setupGraph(t)
	st0 := lifetime.ReadStats()
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	const n = 2000
	graphs := make([]*graph.Graph, n)
	for i := range graphs {
		g, err := graph.New(f.ctx)
		require.NoError(t, err)
		_, err = g.KernelWith(f.fill, graphCfg, buf, int32(i), int32(8))
		require.NoError(t, err)
		_, err = g.HostFunc(func() {})
		require.NoError(t, err)
		graphs[i] = g
	}
	require.NoError(t, buf.Close())
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				assert.NoError(t, graphs[i].Close())
			}
		}(w)
	}
	wg.Wait()
	settle(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Callbacks <= st0.Callbacks && st.Tables <= st0.Tables
	}, "all destructors released their tables")
	noBadUses(t)
}

// Close racing node adds, launches and introspection: no call reaches the
// fake with a destroyed graph or executable, and nothing panics.
func TestFakeGraphCloseRaces(t *testing.T) {
	f := setupGraph(t)
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer buf.Close()
	for round := 0; round < 50; round++ {
		g, err := graph.New(f.ctx)
		require.NoError(t, err)
		k, err := g.KernelWith(f.fill, graphCfg, buf, int32(1), int32(8))
		require.NoError(t, err)
		exe, err := g.Instantiate()
		require.NoError(t, err)
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					switch (w + i) % 5 {
					case 0:
						_, err := g.After(k).KernelWith(f.fill, graphCfg, buf, int32(i), int32(8))
						assertClosedOr(t, err)
					case 1:
						assertClosedOr(t, exe.Launch(f.s))
					case 2:
						_, err := g.Nodes()
						assertClosedOr(t, err)
					case 3:
						_, err := k.Kind()
						assertClosedOr(t, err)
					case 4:
						if i == 10 {
							assert.NoError(t, g.Close())
							assert.NoError(t, exe.Close())
						}
					}
				}
			}(w)
		}
		wg.Wait()
		assert.NoError(t, g.Close())
		assert.NoError(t, exe.Close())
	}
	require.NoError(t, f.s.Synchronize())
	noBadUses(t)
}

// An executable launched on many short-lived streams lets them go: it
// holds at most a few at a time, not every stream it ever ran on.
func TestFakeExecDoesNotHoldEveryStream(t *testing.T) {
	f := setupGraph(t)
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer buf.Close()
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	_, err = g.KernelWith(f.fill, graphCfg, buf, int32(1), int32(8))
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	streams0 := fcall(t, "fake_live_streams")
	for i := 0; i < 64; i++ {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		require.NoError(t, exe.Launch(s))
		require.NoError(t, s.Close())
	}
	require.NoError(t, f.ctx.Synchronize())
	settle(t, func() bool { return fcall(t, "fake_live_streams") <= streams0+17 }, "closed streams destroyed while the executable lives")
	noBadUses(t)
}

// A Raw operand's owner is the user's code: its Release may call back into
// the graph. Releases that a node's destruction or a failed add makes run
// with the graph's lock let go, so such an owner neither deadlocks nor
// finds the graph locked; it is released exactly once each time.
func TestFakeGraphOwnerReleaseCallsBack(t *testing.T) {
	f := setupGraph(t)
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer buf.Close()
	addr := buf.Ptr()
	var released atomic.Int32
	var seen []int
	owner := lifetime.OwnerFunc(func() error {
		released.Add(1)
		nodes, err := g.Nodes() // needs the graph's lock
		if err != nil {
			return err
		}
		seen = append(seen, len(nodes))
		return nil
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, err := g.Memset(graph.RawDevice(addr, 32, owner), 7, 4)
		if !assert.NoError(t, err) {
			return
		}
		assert.NoError(t, n.Destroy())
		assert.EqualValues(t, 1, released.Load(), "released when its node was destroyed")

		// A failed add (a dependency of another graph) releases the owner
		// it was given, also with the lock let go.
		other, err := graph.New(f.ctx)
		if !assert.NoError(t, err) {
			return
		}
		defer other.Close()
		foreign, err := other.Empty()
		if !assert.NoError(t, err) {
			return
		}
		_, err = g.After(foreign).Memset(graph.RawDevice(addr, 32, owner), 7, 4)
		assert.ErrorIs(t, err, graph.ErrForeignNode)
		assert.EqualValues(t, 2, released.Load(), "released when the add failed")

		// A node the driver refuses releases its owner the same way.
		faketest.FailNext(t, "cuGraphAddMemsetNode", 1)
		_, err = g.Memset(graph.RawDevice(addr, 32, owner), 7, 4)
		assert.Error(t, err)
		assert.EqualValues(t, 3, released.Load(), "released when the driver refused the node")
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("deadlock: an owner's Release called back into the graph while it was locked")
	}
	assert.Equal(t, []int{0, 0, 0}, seen, "each release saw the graph without the node")
	noBadUses(t)
}

// RawHost and RawDevice name their memory's kind by their name: a memcpy
// node made from them copies from host memory into device memory, at the
// addresses given.
func TestFakeRawHostAndRawDevice(t *testing.T) {
	f := setupGraph(t)
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer buf.Close()
	hb, err := driver.AllocHost[int32](f.ctx, 8, driver.HostAllocDefault)
	require.NoError(t, err)
	defer hb.Close()
	n, err := g.Memcpy(graph.RawDevice(buf.Ptr(), 32, nil), graph.RawHost(uintptr(hb.Pointer()), 32, nil))
	require.NoError(t, err)
	p, err := n.MemcpyParams()
	require.NoError(t, err)
	assert.Equal(t, graph.MemcpyInfo{Dst: uintptr(buf.Ptr()), Src: uintptr(hb.Pointer()), DstHost: false, SrcHost: true, Bytes: 32}, p)
	_, err = g.Memcpy(graph.RawDevice(0, 32, nil), graph.RawHost(uintptr(hb.Pointer()), 32, nil))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a zero device address")
	noBadUses(t)
}
