package graph

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// addFill adds fill(buf, v, n) followed by a copy of buf into out, with the
// buffer passed inline and dropped at once: the graph is its only holder.
func addFill(t *testing.T, e *testEnv, g *Graph, n int, v int32, out []int32) Node {
	t.Helper()
	buf, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	k, err := g.KernelWith(e.fn["fill"], cfg(n), buf, v, int32(n))
	require.NoError(t, err)
	down, err := g.After(k).Memcpy(Slice(out), Device(buf))
	require.NoError(t, err)
	return down
}

// Must show 1: a buffer passed inline as the only reference to a kernel
// node's argument survives GC; teardown frees it (counters and MemGetInfo).
func TestInlineBufferSurvivesGC(t *testing.T) {
	e, s := setup(t)
	const n = 16 << 20 // 64 MiB of int32
	collect()
	free0 := memFree(t, e.ctx)
	st0 := lifetime.ReadStats()

	g, err := New(e.ctx)
	require.NoError(t, err)
	out := make([]int32, n)
	addFill(t, e, g, n, 5, out) // the Buffer value is unreachable from here on
	collect()
	assert.Less(t, memFree(t, e.ctx), free0-60<<20, "the graph still holds the 64 MiB")

	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close(), "the executable outlives its graph")
	collect()
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	for _, i := range []int{0, 1, n / 2, n - 1} {
		require.Equal(t, int32(5+i), out[i])
	}
	require.NoError(t, exe.Close())
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Pinned <= st0.Pinned && st.Objects <= st0.Objects
	}, "graph owners released")
	assert.GreaterOrEqual(t, memFree(t, e.ctx), free0-(2<<20), "the memory is back")
}

// Must show 2: memset and memcpy nodes on buffers their caller closes
// before the first launch, and a Go slice operand.
func TestClosedOperandsStayAlive(t *testing.T) {
	e, s := setup(t)
	st0 := lifetime.ReadStats()
	const n = 1000
	a, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	b, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	in := make([]int32, n)
	for i := range in {
		in[i] = int32(3 * i)
	}
	out := make([]int32, n)
	g, err := New(e.ctx)
	require.NoError(t, err)
	set, err := g.Memset(Device(b), 7, 4)
	require.NoError(t, err)
	up, err := g.Memcpy(Device(a), Slice(in))
	require.NoError(t, err)
	add, err := g.After(set, up).KernelWith(e.fn["addTo"], cfg(n), a, b, int32(n))
	require.NoError(t, err)
	_, err = g.After(add).Memcpy(Slice(out), Device(b))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	in = nil // the graph pinned the array
	collect()
	exe, err := g.Instantiate()
	require.NoError(t, err)
	for round := 0; round < 3; round++ {
		clear(out)
		require.NoError(t, exe.Launch(s))
		require.NoError(t, s.Synchronize())
		for i := range out {
			require.Equal(t, int32(7+3*i), out[i], "element %d, round %d", i, round)
		}
	}
	require.NoError(t, exe.Close())
	require.NoError(t, g.Close())
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Pinned <= st0.Pinned && st.Objects <= st0.Objects
	}, "buffers and pins released")
}

// Must show 5: a node whose owner cannot be recorded is removed again.
func TestRollbackWhenOwnerNotRecorded(t *testing.T) {
	e, _ := setup(t)
	st0 := lifetime.ReadStats()
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	buf, err := driver.Alloc[int32](e.ctx, 16)
	require.NoError(t, err)
	defer buf.Close()
	injected := errors.New("injected: owner not recorded")
	testRecordHook = func() error { return injected }
	_, err = g.KernelWith(e.fn["fill"], cfg(16), buf, int32(1), int32(16))
	_, herr := g.HostFunc(func() {})
	testRecordHook = nil
	assert.ErrorIs(t, err, injected)
	assert.ErrorIs(t, herr, injected)
	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Empty(t, nodes, "the driver's node was removed")
	lifetime.Flush()
	st := lifetime.ReadStats()
	assert.LessOrEqual(t, st.Live, st0.Live, "before %+v after %+v", st0, st)
	assert.LessOrEqual(t, st.Callbacks, st0.Callbacks+1, "only the graph's table destructor: before %+v after %+v", st0, st)
	// The graph still works afterwards.
	_, err = g.KernelWith(e.fn["fill"], cfg(16), buf, int32(1), int32(16))
	require.NoError(t, err)
}

// Destroying a node after an executable was made keeps its owners for the
// executable.
func TestDestroyNodeAfterInstantiateKeepsOwners(t *testing.T) {
	e, s := setup(t)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	out := make([]int32, 32)
	down := addFill(t, e, g, 32, 40, out)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	require.NoError(t, down.Destroy())
	collect()
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, int32(40+31), out[31])
}

// Must show 6: no leak over 10,000 cycles of create → 10 nodes with
// buffers and a callback → instantiate → launch → destroy.
func TestNoLeakManyCycles(t *testing.T) {
	e, s := setup(t)
	cycles := 10000
	if testing.Short() {
		cycles = 500
	}
	bufs := make([]*driver.Buffer[int32], 4)
	for i := range bufs {
		b, err := driver.Alloc[int32](e.ctx, 256)
		require.NoError(t, err)
		bufs[i] = b
	}
	collect()
	require.NoError(t, s.Synchronize())
	free0 := memFree(t, e.ctx)
	st0 := lifetime.ReadStats()
	var calls atomic.Int64
	for c := 0; c < cycles; c++ {
		g, err := New(e.ctx)
		require.NoError(t, err)
		var prev Node
		for i := 0; i < 9; i++ {
			b := g.After()
			if i > 0 {
				b = g.After(prev)
			}
			prev, err = b.KernelWith(e.fn["fill"], cfg(256), bufs[i%4], int32(i), int32(256))
			require.NoError(t, err)
		}
		_, err = g.After(prev).HostFunc(func() { calls.Add(1) })
		require.NoError(t, err)
		exe, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, exe.Launch(s))
		require.NoError(t, exe.Close())
		require.NoError(t, g.Close())
	}
	require.NoError(t, s.Synchronize())
	assert.EqualValues(t, cycles, calls.Load())
	for _, b := range bufs {
		require.NoError(t, b.Close())
	}
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Callbacks <= st0.Callbacks && st.Tables <= st0.Tables
	}, "everything released")
	st := lifetime.ReadStats()
	assert.Equal(t, st.Attached-st0.Attached, st.Released-st0.Released, "released == attached")
	assert.GreaterOrEqual(t, memFree(t, e.ctx), free0-(2<<20), "device memory back to its start")
}

// Must show 9: 10,000 graphs destroyed at once from 16 goroutines: the
// destructors never block a CUDA thread and release everything.
func TestMassDestroy(t *testing.T) {
	e, s := setup(t)
	n := 10000
	if testing.Short() {
		n = 1000
	}
	buf, err := driver.Alloc[int32](e.ctx, 64)
	require.NoError(t, err)
	st0 := lifetime.ReadStats()
	graphs := make([]*Graph, n)
	execs := make([]*Exec, n)
	for i := range graphs {
		g, err := New(e.ctx)
		require.NoError(t, err)
		_, err = g.KernelWith(e.fn["fill"], cfg(64), buf, int32(i), int32(64))
		require.NoError(t, err)
		_, err = g.HostFunc(func() {})
		require.NoError(t, err)
		graphs[i] = g
		if i%10 == 0 {
			x, err := g.Instantiate()
			require.NoError(t, err)
			require.NoError(t, x.Launch(s))
			execs[i] = x
		}
	}
	require.NoError(t, buf.Close())
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				assert.NoError(t, graphs[i].Close())
				if execs[i] != nil {
					assert.NoError(t, execs[i].Close())
				}
			}
		}(w)
	}
	wg.Wait()
	require.NoError(t, s.Synchronize())
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Callbacks <= st0.Callbacks && st.Tables <= st0.Tables && st.Objects <= st0.Objects
	}, "all destructors ran and released")
	assert.Zero(t, lifetime.ReadStats().ReleaseErrors-st0.ReleaseErrors)
}
