//go:build linux

package fakedriver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/lifetime"
)

// argsWorld is a graph with one fill kernel node (fill(out, v, n): out[i]
// = v + i) instantiated, and two buffers for it.
type argsWorld struct {
	f          *fixture
	g          *graph.Graph
	k          graph.Node
	e          *graph.Exec
	buf, other *driver.Buffer[int32]
}

func newArgsWorld(t *testing.T) *argsWorld {
	f := setupGraph(t)
	w := &argsWorld{f: f}
	var err error
	w.buf, err = driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	w.other, err = driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	w.g, err = graph.New(f.ctx)
	require.NoError(t, err)
	w.k, err = w.g.KernelWith(f.fill, graphCfg, w.buf, int32(5), int32(8))
	require.NoError(t, err)
	w.e, err = w.g.Instantiate()
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, w.e.Close())
		assert.NoError(t, w.g.Close())
		assert.NoError(t, w.buf.Close())
		assert.NoError(t, w.other.Close())
	})
	return w
}

// run launches the executable with both buffers cleared and returns their
// first elements afterwards.
func (w *argsWorld) run(t *testing.T) (buf, other int32) {
	t.Helper()
	s := w.f.s
	require.NoError(t, w.buf.Memset32Async(s, 0))
	require.NoError(t, w.other.Memset32Async(s, 0))
	require.NoError(t, w.e.Launch(s))
	a, b := make([]int32, 8), make([]int32, 8)
	require.NoError(t, w.buf.CopyToHostAsync(s, a))
	require.NoError(t, w.other.CopyToHostAsync(s, b))
	require.NoError(t, s.Synchronize())
	return a[0], b[0]
}

// SetKernelArg changes one argument of the executable's kernel node, a
// value or a buffer, and keeps the others; the source graph is unchanged.
func TestFakeExecSetKernelArg(t *testing.T) {
	w := newArgsWorld(t)
	b, o := w.run(t)
	require.Equal(t, [2]int32{5, 0}, [2]int32{b, o})

	require.NoError(t, w.e.SetKernelArg(w.k, 1, int32(7)))
	b, o = w.run(t)
	assert.Equal(t, [2]int32{7, 0}, [2]int32{b, o}, "argument 1 changed, the buffer kept")

	require.NoError(t, w.e.SetKernelArg(w.k, 0, w.other))
	b, o = w.run(t)
	assert.Equal(t, [2]int32{0, 7}, [2]int32{b, o}, "argument 0 changed, argument 1 kept")

	view, err := w.buf.Slice(4, 8)
	require.NoError(t, err)
	require.NoError(t, w.e.SetKernelArg(w.k, 2, int32(4)))
	require.NoError(t, w.e.SetKernelArg(w.k, 0, view))
	require.NoError(t, view.Close())
	_, _ = w.run(t)
	got := make([]int32, 8)
	require.NoError(t, w.buf.CopyToHostAsync(w.f.s, got))
	require.NoError(t, w.f.s.Synchronize())
	assert.Equal(t, []int32{0, 0, 0, 0, 7, 8, 9, 10}, got, "a view names its part; the count changed too")

	kp, err := w.k.KernelParams()
	require.NoError(t, err)
	assert.Equal(t, driver.Grid(1), kp.Grid, "the source graph's node is unchanged")
	noBadUses(t)
}

// Wrong index, size or type, a node of another kind and a buffer of
// another context are refused with ErrInvalidArgument, and nothing
// changed: the next launch runs the arguments before.
func TestFakeExecSetKernelArgRefusals(t *testing.T) {
	w := newArgsWorld(t)
	require.NoError(t, w.e.SetKernelArg(w.k, 1, int32(6)))
	ctx2, err := w.f.ctx.Device().NewContext(0)
	require.NoError(t, err)
	defer ctx2.Close()
	foreign, err := driver.Alloc[int32](ctx2, 8)
	require.NoError(t, err)
	defer foreign.Close()
	closed, err := driver.Alloc[int32](w.f.ctx, 8)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	empty, err := w.g.Empty()
	require.NoError(t, err)

	for name, c := range map[string]struct {
		n    graph.Node
		i    int
		v    any
		want error
	}{
		"index -1":               {w.k, -1, int32(1), driver.ErrInvalidArgument},
		"index 3 of 3":           {w.k, 3, int32(1), driver.ErrInvalidArgument},
		"8 bytes for 4":          {w.k, 1, int64(1), driver.ErrInvalidArgument},
		"a buffer for a value":   {w.k, 1, w.other, driver.ErrInvalidArgument},
		"int, no C size":         {w.k, 1, 1, driver.ErrInvalidArgument},
		"nil":                    {w.k, 1, nil, driver.ErrInvalidArgument},
		"a Go pointer":           {w.k, 1, new(int32), driver.ErrInvalidArgument},
		"a buffer of another":    {w.k, 0, foreign, driver.ErrInvalidArgument},
		"a closed buffer":        {w.k, 0, closed, driver.ErrClosed},
		"an empty node":          {empty, 0, int32(1), driver.ErrInvalidArgument},
		"the zero Node":          {graph.Node{}, 0, int32(1), graph.ErrForeignNode},
		"a 4-byte struct, valid": {w.k, 2, struct{ N int32 }{8}, nil},
	} {
		assert.ErrorIs(t, w.e.SetKernelArg(c.n, c.i, c.v), c.want, name)
	}
	b, o := w.run(t)
	assert.Equal(t, [2]int32{6, 0}, [2]int32{b, o}, "every refused update left the node as it was")
	noBadUses(t)
}

// The buffer SetKernelArg gives the node is held while the executable may
// use it, even after its Close; the one it replaces is let go once the
// launches before are done; the executable's Close lets go of the rest.
func TestFakeExecSetKernelArgHoldsBuffers(t *testing.T) {
	w := newArgsWorld(t)
	// Frees that earlier tests' Closes and cleanups queued run first: the
	// count below is of the whole process.
	gcAll()
	fcall(t, "fake_quiesce", 30000)
	lifetime.Flush()
	allocs0 := fcall(t, "fake_live_allocations")
	a, err := driver.Alloc[int32](w.f.ctx, 8)
	require.NoError(t, err)
	b, err := driver.Alloc[int32](w.f.ctx, 8)
	require.NoError(t, err)
	require.NoError(t, w.e.SetKernelArg(w.k, 0, a))
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	settle(t, func() bool { return fcall(t, "fake_live_allocations") == allocs0+1 }, "b freed, a held by the executable")
	require.NoError(t, w.e.Launch(w.f.s))
	require.NoError(t, w.e.SetKernelArg(w.k, 0, w.other)) // retires a behind the launch
	require.NoError(t, w.f.s.Synchronize())
	lifetime.Flush()
	settle(t, func() bool { return fcall(t, "fake_live_allocations") == allocs0 }, "a freed once replaced and its launch done")

	c, err := driver.Alloc[int32](w.f.ctx, 8)
	require.NoError(t, err)
	require.NoError(t, w.e.SetKernelArg(w.k, 0, c))
	require.NoError(t, c.Close())
	require.NoError(t, w.e.Close())
	settle(t, func() bool { return fcall(t, "fake_live_allocations") == allocs0 }, "c freed with the executable")
	noBadUses(t)
}

// SetKernelArgs updates a node from prepared Args, which it holds after
// their Close; after a whole-graph Update the node's parameters are not
// known until set as a whole again.
func TestFakeExecSetKernelArgs(t *testing.T) {
	w := newArgsWorld(t)
	a, err := w.f.fill.NewArgs(w.other, int32(9), int32(8))
	require.NoError(t, err)
	require.NoError(t, w.e.SetKernelArgs(w.k, a))
	require.NoError(t, a.Close())
	b, o := w.run(t)
	assert.Equal(t, [2]int32{0, 9}, [2]int32{b, o})
	require.NoError(t, w.e.SetKernelArg(w.k, 1, int32(3)), "one argument of what the Args set")
	b, o = w.run(t)
	assert.Equal(t, [2]int32{0, 3}, [2]int32{b, o})

	assert.ErrorIs(t, w.e.SetKernelArgs(w.k, nil), driver.ErrInvalidArgument)
	assert.ErrorIs(t, w.e.SetKernelArgs(w.k, a), driver.ErrClosed, "closed Args")

	twin, err := graph.New(w.f.ctx)
	require.NoError(t, err)
	defer twin.Close()
	_, err = twin.KernelWith(w.f.fill, graphCfg, w.buf, int32(2), int32(8))
	require.NoError(t, err)
	require.NoError(t, w.e.Update(twin))
	b, o = w.run(t)
	assert.Equal(t, [2]int32{2, 0}, [2]int32{b, o}, "the update's parameters")
	assert.ErrorIs(t, w.e.SetKernelArg(w.k, 1, int32(4)), driver.ErrInvalidArgument, "not known after Update")
	a2, err := w.f.fill.NewArgs(w.buf, int32(1), int32(8))
	require.NoError(t, err)
	defer a2.Close()
	assert.ErrorIs(t, w.e.SetKernelArgs(w.k, a2), driver.ErrInvalidArgument, "not known after Update")
	require.NoError(t, w.e.SetKernelWith(w.k, w.f.fill, graphCfg, w.buf, int32(1), int32(8)))
	require.NoError(t, w.e.SetKernelArg(w.k, 1, int32(4)), "known again once set as a whole")
	b, o = w.run(t)
	assert.Equal(t, [2]int32{4, 0}, [2]int32{b, o})
	noBadUses(t)
}
