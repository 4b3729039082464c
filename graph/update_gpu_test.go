package graph

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// Change a kernel argument and a memset value on an executable without
// instantiating again; the replaced buffer is released only after the
// launches already enqueued have run, the new one when the executable is
// gone.
func TestExecSetKernelAndMemset(t *testing.T) {
	e, s := setup(t)
	st0 := lifetime.ReadStats()
	const n = 256
	a, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	g, err := New(e.ctx)
	require.NoError(t, err)
	spin, err := g.KernelWith(e.fn["spin"], one, int64(0))
	require.NoError(t, err)
	set, err := g.After(spin).Memset(Device(a), 1, 4)
	require.NoError(t, err)
	k, err := g.After(set).KernelWith(e.fn["fill"], cfg(n), a, int32(10), int32(n/2))
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	got, err := a.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, int32(10), got[0])
	assert.Equal(t, int32(1), got[n-1], "the memset's value past the kernel's half")

	// b replaces a; then, while a slow launch that writes b is in flight,
	// c replaces b: b is retired, and must stay allocated until that
	// launch has run, although its owner closed it.
	b, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	c, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	require.NoError(t, exe.SetKernelWith(k, e.fn["fill"], cfg(n), b, int32(20), int32(n)))
	require.NoError(t, exe.SetMemset(set, Device(b), 7, 4))
	require.NoError(t, exe.SetKernelWith(spin, e.fn["spin"], one, int64(2_000_000_000))) // about a second: the checks below run while it does
	require.NoError(t, exe.Launch(s))
	require.NoError(t, exe.SetKernelWith(k, e.fn["fill"], cfg(n), c, int32(30), int32(n)))
	require.NoError(t, exe.SetMemset(set, Device(c), 7, 4))
	objs := lifetime.ReadStats().Objects
	require.NoError(t, b.Close())
	require.NoError(t, c.Close()) // the executable holds c now
	lifetime.Flush()
	assert.Equal(t, objs, lifetime.ReadStats().Objects, "b (retired while in flight) and c are still allocated")
	done, err := s.Query()
	require.NoError(t, err)
	assert.False(t, done, "the slow launch is still running (else this test proves less)")
	require.NoError(t, exe.SetKernelWith(spin, e.fn["spin"], one, int64(0)))
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	eventually(t, func() bool { return lifetime.ReadStats().Objects == objs-1 }, "b released once the launch ran")
	got, err = a.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, int32(10), got[0], "a is no longer written")
	require.NoError(t, a.Close())
	require.NoError(t, g.Close())
	require.NoError(t, exe.Close())
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Objects <= st0.Objects
	}, "every buffer released after teardown")
}

// Whole-graph update: same topology succeeds, a changed topology reports
// the driver's reason, and nothing changes then.
func TestExecUpdateWholeGraph(t *testing.T) {
	e, s := setup(t)
	st0 := lifetime.ReadStats()
	const n = 64
	build := func(v int32, extra bool) (*Graph, *driver.Buffer[int32]) {
		buf, err := driver.Alloc[int32](e.ctx, n)
		require.NoError(t, err)
		g, err := New(e.ctx)
		require.NoError(t, err)
		k, err := g.KernelWith(e.fn["fill"], cfg(n), buf, v, int32(n))
		require.NoError(t, err)
		if extra {
			_, err = g.After(k).Empty()
			require.NoError(t, err)
		}
		return g, buf
	}
	g1, b1 := build(1, false)
	exe, err := g1.Instantiate()
	require.NoError(t, err)
	g2, b2 := build(2, false)
	require.NoError(t, exe.Update(g2))
	require.NoError(t, g2.Close()) // the executable holds what g2's nodes hold
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	got, err := b2.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, int32(2+n-1), got[n-1])
	require.NoError(t, b2.Close())

	g3, b3 := build(3, true)
	err = exe.Update(g3)
	var ue *UpdateError
	require.True(t, errors.As(err, &ue), "%v", err)
	assert.Equal(t, UpdateTopologyChanged, ue.Result)
	require.NoError(t, g3.Close())
	require.NoError(t, b3.Close())

	// A node of another graph is refused by per-node changes.
	g4, b4 := build(4, false)
	nodes, err := g4.Nodes()
	require.NoError(t, err)
	err = exe.SetKernelWith(nodes[0], e.fn["fill"], cfg(n), b4, int32(4), int32(n))
	assert.ErrorIs(t, err, ErrForeignNode)
	require.NoError(t, g4.Close())
	require.NoError(t, b4.Close())

	require.NoError(t, exe.Launch(s), "the executable still runs g2's work")
	require.NoError(t, s.Synchronize())
	require.NoError(t, exe.Close())
	require.NoError(t, g1.Close())
	require.NoError(t, b1.Close())
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Objects <= st0.Objects
	}, "everything released")
}

// Host callback, event and enable/disable changes on an executable.
func TestExecSetHostEventEnabled(t *testing.T) {
	e, s := setup(t)
	st0 := lifetime.ReadStats()
	var first, second int
	g, err := New(e.ctx)
	require.NoError(t, err)
	h, err := g.HostFunc(func() { first++ })
	require.NoError(t, err)
	ctr, err := driver.Alloc[uint64](e.ctx, 1)
	require.NoError(t, err)
	require.NoError(t, ctr.Memset32(e.ctx.LegacyStream(), 0))
	k, err := g.After(h).KernelWith(e.fn["incr"], one, ctr)
	require.NoError(t, err)
	ev1, err := e.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	ev2, err := e.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	rec, err := g.After(k).EventRecord(ev1)
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, exe.Launch(s))
	require.NoError(t, exe.SetHostFunc(h, func() { second++ }))
	require.NoError(t, exe.SetEventRecord(rec, ev2))
	require.NoError(t, ev2.Close())
	require.NoError(t, exe.SetEnabled(k, false))
	on, err := exe.Enabled(k)
	require.NoError(t, err)
	assert.False(t, on)
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, 1, first)
	assert.Equal(t, 1, second)
	got, err := ctr.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.EqualValues(t, 1, got[0], "the disabled kernel did not run the second time")
	require.NoError(t, exe.SetEnabled(k, true))
	require.NoError(t, exe.Close())
	require.NoError(t, g.Close())
	require.NoError(t, ev1.Close())
	require.NoError(t, ctr.Close())
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Callbacks <= st0.Callbacks && st.Objects <= st0.Objects
	}, "callbacks and events released")
}

// BenchmarkExecUpdateVsInstantiate: changing one kernel node of an
// executable versus instantiating the changed graph again.
func BenchmarkExecUpdateVsInstantiate(b *testing.B) {
	e, _ := setup(b)
	buf, _ := driver.Alloc[int32](e.ctx, 256)
	defer buf.Close()
	g, _ := New(e.ctx)
	defer g.Close()
	var k Node
	var err error
	for i := 0; i < 10; i++ {
		if k, err = g.KernelWith(e.fn["fill"], cfg(256), buf, int32(i), int32(256)); err != nil {
			b.Fatal(err)
		}
	}
	exe, err := g.Instantiate()
	if err != nil {
		b.Fatal(err)
	}
	defer exe.Close()
	b.Run("SetKernel", func(b *testing.B) {
		b.ReportAllocs()
		i := int32(0)
		for b.Loop() {
			i++
			if err := exe.SetKernelWith(k, e.fn["fill"], cfg(256), buf, i, int32(256)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Instantiate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x, err := g.Instantiate()
			if err != nil {
				b.Fatal(err)
			}
			x.Close()
		}
	})
}

// toHost copies b to the host in s's order and waits for it.
func toHost(t *testing.T, s *driver.Stream, b *driver.Buffer[int32]) []int32 {
	t.Helper()
	got := make([]int32, b.Len())
	require.NoError(t, b.CopyToHostAsync(s, got))
	require.NoError(t, s.Synchronize())
	return got
}

// SetKernelArg changes one argument of an executable's kernel node (a
// value, then a buffer) and the relaunched kernel computes with it;
// SetKernelArgs sets them all from prepared Args. A buffer replaced while a
// slow launch that writes it is in flight stays allocated until that
// launch has run.
func TestExecSetKernelArg(t *testing.T) {
	e, s := setup(t)
	const n = 1000
	a, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	defer a.Close()
	b, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	c, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	spin, err := g.KernelWith(e.fn["spin"], one, int64(0))
	require.NoError(t, err)
	k, err := g.After(spin).KernelWith(e.fn["fill"], cfg(n), a, int32(10), int32(n))
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	require.NoError(t, exe.Launch(s))
	got := toHost(t, s, a)
	require.Equal(t, []int32{10, 10 + n - 1}, []int32{got[0], got[n-1]})

	require.NoError(t, exe.SetKernelArg(k, 1, int32(100)))
	require.NoError(t, exe.Launch(s))
	got = toHost(t, s, a)
	assert.Equal(t, []int32{100, 100 + n - 1}, []int32{got[0], got[n-1]}, "the new value, the same buffer and count")

	require.NoError(t, exe.SetKernelArg(k, 0, b))
	require.NoError(t, exe.SetKernelArg(spin, 0, int64(400_000_000)))
	require.NoError(t, exe.Launch(s)) // slow, then writes b
	require.NoError(t, exe.SetKernelArg(k, 0, c))
	objs := lifetime.ReadStats().Objects
	require.NoError(t, b.Close())
	require.NoError(t, c.Close()) // the executable holds c now
	lifetime.Flush()
	assert.Equal(t, objs, lifetime.ReadStats().Objects, "b (replaced while in flight) and c are still allocated")
	done, err := s.Query()
	require.NoError(t, err)
	assert.False(t, done, "the slow launch is still running (else this test proves less)")
	require.NoError(t, exe.SetKernelArg(spin, 0, int64(0)))
	require.NoError(t, exe.Launch(s)) // writes c
	require.NoError(t, s.Synchronize())
	eventually(t, func() bool { return lifetime.ReadStats().Objects == objs-1 }, "b released once its launch ran")
	got = toHost(t, s, a)
	assert.Equal(t, int32(100), got[0], "a is no longer written")

	assert.ErrorIs(t, exe.SetKernelArg(k, 1, int64(1)), driver.ErrInvalidArgument, "8 bytes for an int")
	assert.ErrorIs(t, exe.SetKernelArg(k, 3, int32(1)), driver.ErrInvalidArgument, "fill takes 3 arguments")

	args, err := e.fn["fill"].NewArgs(a, int32(7), int32(n))
	require.NoError(t, err)
	require.NoError(t, exe.SetKernelArgs(k, args))
	require.NoError(t, args.Close()) // the executable holds them
	require.NoError(t, exe.Launch(s))
	got = toHost(t, s, a)
	assert.Equal(t, []int32{7, 7 + n - 1}, []int32{got[0], got[n-1]}, "the prepared arguments")
}
