//go:build linux

package graph

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// fakeBody makes a stand-in for a conditional node's body of g (fakecuda
// has no conditional nodes): a Graph whose root is g, over g's CUDA graph.
// What a body refuses is refused before CUDA.
func fakeBody(g *Graph) *Graph {
	b := newCore(g.ctx, g.ctxRef, g.sink, g.fam)
	b.h, b.root = g.h, g.graphCore
	b.obj.Init(func() error { return nil })
	return &Graph{graphCore: b, up: g}
}

// TestFakeBodiesStayInTheirContext: a conditional node's body runs in its
// graph's context only (CUDA requires every body node in the conditional
// node's context): a kernel of another context, a node On another
// context, a copy of another context's memory, a child graph with nodes
// in several contexts and a capture's fork into a stream of another
// context are refused there with ErrInvalidArgument, before CUDA, and
// nothing is added.
func TestFakeBodiesStayInTheirContext(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	other, err := env.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer other.Close()
	mod, err := other.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	defer mod.Close()
	fill, err := mod.Function("fill")
	require.NoError(t, err)
	theirs, err := driver.Alloc[int32](other, 16)
	require.NoError(t, err)
	defer theirs.Close()
	mine, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	defer mine.Close()
	s2, err := other.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()

	g, err := New(env.ctx)
	require.NoError(t, err)
	defer g.Close()
	body := fakeBody(g)
	multi, err := New(env.ctx)
	require.NoError(t, err)
	defer multi.Close()
	_, err = multi.Memcpy(Device(mine), Device(theirs))
	require.NoError(t, err)

	one, n := driver.Grid(1), driver.Block(1)
	for name, add := range map[string]func() error{
		"a kernel of another context": func() error {
			_, err := body.Kernel(fill, one, n, theirs, int32(1), int32(16))
			return err
		},
		"On another context": func() error {
			_, err := body.On(other).Memset(Device(theirs), 1, 4)
			return err
		},
		"a copy of another context's memory": func() error {
			_, err := body.Memcpy(Device(mine), Device(theirs))
			return err
		},
		"a child with nodes in several contexts": func() error {
			_, err := body.Child(multi)
			return err
		},
	} {
		err := add()
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		assert.ErrorContains(t, err, "body", name)
	}
	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Empty(t, nodes, "nothing was added")
	assert.False(t, g.multi, "the graph is still of one context")

	st := &captureState{ctx: env.ctx, target: body.graphCore}
	assert.ErrorIs(t, contextHoldErr(st, s2), driver.ErrInvalidArgument, "a capture into a body forks into no other context")
	assert.Empty(t, st.kept)
	assert.NoError(t, contextHoldErr(st, env.s), "a stream of the body's context needs nothing")

	_, err = body.Kernel(env.fill, one, n, mine, int32(1), int32(16))
	require.NoError(t, err, "the body's own context works")
}

// contextHoldErr is st.contextHold's error, its reference (the zero Ref
// for a stream of the capture's context) released.
func contextHoldErr(st *captureState, s *driver.Stream) error {
	ref, err := st.contextHold("StreamCapture.Fork", s)
	_ = ref.Release()
	return err
}
