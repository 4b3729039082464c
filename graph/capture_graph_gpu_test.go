package graph

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/lifetime"
)

// gridOf names a kernel node by its grid's x (the tests launch "empty" with
// distinct grids).
func gridOf(t *testing.T, n Node) int {
	t.Helper()
	p, err := n.KernelParams()
	require.NoError(t, err)
	return p.Grid.X
}

func edgeSet(t *testing.T, g *Graph) []string {
	t.Helper()
	edges, err := g.Edges()
	require.NoError(t, err)
	var out []string
	for _, e := range edges {
		out = append(out, fmt.Sprintf("%d->%d", gridOf(t, e.From), gridOf(t, e.To)))
	}
	sort.Strings(out)
	return out
}

// Must show: fork/join produces the expected edges; forked streams and
// streams that joined by waiting for an event leave the capture with it.
func TestCaptureForkJoin(t *testing.T) {
	e, s := setup(t)
	s2, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()
	s3, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s3.Close()
	empty := e.fn["empty"]
	k := func(s *driver.Stream, x int) { require.NoError(t, s.Launch(empty, driver.Grid(x), driver.Block(1))) }

	for _, mode := range modes {
		c, err := BeginCapture(s, mode)
		require.NoError(t, err)
		defer c.Abort()
		k(s, 1)
		require.NoError(t, c.Fork(s2))
		assert.ErrorIs(t, c.Fork(s), driver.ErrInvalidArgument, "the capture's own stream")
		k(s, 2)
		k(s2, 3)
		require.NoError(t, c.Join(s2))
		k(s, 4)
		g, err := c.End()
		require.NoError(t, err)
		nodes, err := g.Nodes()
		require.NoError(t, err)
		assert.Len(t, nodes, 4)
		assert.Equal(t, []string{"1->2", "1->3", "2->4", "3->4"}, edgeSet(t, g), mode.String())
		tail := c.Tail()
		require.Len(t, tail, 1)
		assert.Equal(t, 4, gridOf(t, tail[0]))
		requireIdle(t, e, s, "origin after End")
		requireIdle(t, e, s2, "forked stream after End")
		require.NoError(t, g.Close())
	}

	// A fork without work adds nothing, and Tail is the last node alone.
	c0, err := BeginCapture(s, CaptureRelaxed)
	require.NoError(t, err)
	defer c0.Abort()
	k(s, 1)
	require.NoError(t, c0.Fork(s2))
	k(s, 2)
	g0, err := c0.End()
	require.NoError(t, err)
	assert.Equal(t, []string{"1->2"}, edgeSet(t, g0))
	require.Len(t, c0.Tail(), 1)
	assert.Equal(t, 2, gridOf(t, c0.Tail()[0]))
	require.NoError(t, g0.Close())
	requireIdle(t, e, s2, "an idle forked stream after End")

	// A forked stream left unjoined is joined by End; a stream that waits
	// for an event recorded during the capture joins it, and its work is
	// held too.
	st0 := lifetime.ReadStats()
	ev, err := e.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer ev.Close()
	c, err := BeginCapture(s, CaptureRelaxed)
	require.NoError(t, err)
	defer c.Abort()
	k(s, 1)
	require.NoError(t, c.Fork(s2))
	k(s2, 2)
	require.NoError(t, ev.Record(s))
	require.NoError(t, s3.WaitEvent(ev))
	assert.Equal(t, capture.Sink(c.st), capture.Installed(s3), "s3 joined the capture")
	buf, err := driver.Alloc[int32](e.ctx, 4)
	require.NoError(t, err)
	require.NoError(t, s3.Launch(e.fn["fill"], driver.Grid(5), driver.Block(4), buf, int32(9), int32(4)))
	require.NoError(t, buf.Close())
	g, err := c.End()
	require.NoError(t, err)
	assert.Equal(t, []string{"1->2", "1->5"}, edgeSet(t, g))
	var tails []int
	for _, n := range c.Tail() {
		tails = append(tails, gridOf(t, n))
	}
	sort.Ints(tails)
	assert.Equal(t, []int{2, 5}, tails, "the last nodes only")
	for _, x := range []*driver.Stream{s, s2, s3} {
		requireIdle(t, e, x, "every stream of the capture")
	}
	collect()
	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	require.NoError(t, exe.Close())
	settled(t, st0, "the joined stream's buffer released")
}

// Capture into an existing graph after a node, and into a conditional
// node's body; an aborted capture into a graph leaves it as it was.
func TestCaptureIntoGraph(t *testing.T) {
	e, s := setup(t)
	st0 := lifetime.ReadStats()
	const n = 256
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	a, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	b, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	first, err := g.KernelWith(e.fn["fill"], cfg(n), a, int32(10), int32(n))
	require.NoError(t, err)

	// Aborted: nothing of it stays.
	c, err := g.After(first).BeginCapture(s, CaptureGlobal)
	require.NoError(t, err)
	require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(n), b, int32(0), int32(n)))
	require.NoError(t, c.Abort())
	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Len(t, nodes, 1, "the aborted capture's node was removed")
	requireIdle(t, e, s, "after the aborted capture into a graph")

	tail, err := g.After(first).Capture(s, CaptureRelaxed, func(s *driver.Stream) error {
		if err := s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(n), b, int32(0), int32(n)); err != nil {
			return err
		}
		return s.Launch(e.fn["addTo"], driver.Grid(1), driver.Block(n), a, b, int32(n))
	})
	require.NoError(t, err)
	require.Len(t, tail, 1)
	out := make([]int32, n)
	_, err = g.After(tail...).Memcpy(Slice(out), Device(b))
	require.NoError(t, err)
	edges, err := g.Edges()
	require.NoError(t, err)
	assert.Len(t, edges, 3, "first -> fill -> addTo -> copy")
	deps, err := tail[0].Dependencies()
	require.NoError(t, err)
	require.Len(t, deps, 1)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	collect()
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize())
	for i := range out {
		require.Equal(t, int32(10+i+i), out[i], "element %d", i)
	}

	// Into an if node's body, taken at every launch (default 1).
	if err := needDriver("test", "if nodes", versionIfWhile); err != nil {
		t.Skip(err)
	}
	cg, err := New(e.ctx)
	require.NoError(t, err)
	cond, err := cg.NewCondition(1, AssignDefault)
	require.NoError(t, err)
	_, body, err := cg.If(cond)
	require.NoError(t, err)
	x, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	defer x.Close()
	y, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	_, err = body.Capture(s, CaptureRelaxed, func(s *driver.Stream) error {
		if err := s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(n), y, int32(5), int32(n)); err != nil {
			return err
		}
		return s.Launch(e.fn["addTo"], driver.Grid(1), driver.Block(n), y, x, int32(n))
	})
	require.NoError(t, err)
	require.NoError(t, y.Close(), "the body holds it")
	collect()
	require.NoError(t, x.Memset32(e.ctx.LegacyStream(), 0))
	cx, err := cg.Instantiate()
	require.NoError(t, err)
	require.NoError(t, cg.Close())
	for round := 1; round <= 2; round++ {
		require.NoError(t, cx.Launch(s))
		require.NoError(t, s.Synchronize())
		got, err := x.ToHost(e.ctx.LegacyStream())
		require.NoError(t, err)
		for i := range got {
			require.Equal(t, int32(round*(5+i)), got[i], "element %d, round %d", i, round)
		}
	}
	require.NoError(t, cx.Close())
	require.NoError(t, exe.Close())
	require.NoError(t, g.Close())
	settled(t, st0, "what the captures into graphs held is released")
}
