//go:build linux

package fakedriver_test

// What graphs of several contexts refuse, clearly and before CUDA, leaving
// nothing half-built (graph_multi_test.go has what they do).

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/lifetime"
)

// TestMultiGraphRefusals: a kernel of another context than the one On
// names, buffers a node's context cannot use, a memset of another
// context's memory, a closed or zero context given to On: each is refused
// with an error matching ErrInvalidArgument or ErrClosed, and the graph
// and the owners held are as before.
func TestMultiGraphRefusals(t *testing.T) {
	f := ltSetup(t)
	a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
	g, err := graph.New(a.ctx)
	require.NoError(t, err)
	defer g.Close()
	argsB, err := b.fill.NewArgs(b.buf, int32(1), int32(multiN))
	require.NoError(t, err)
	defer argsB.Close()
	argsA, err := a.fill.NewArgs(a.buf, int32(1), int32(multiN))
	require.NoError(t, err)
	defer argsA.Close()
	gone, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	require.NoError(t, gone.Close())
	one, n := driver.Grid(1), driver.Block(1)
	lifetime.Flush()
	live := lifetime.ReadStats().Live

	for name, c := range map[string]struct {
		err error
		add func() error
	}{
		"a kernel of A run On(B)": {driver.ErrInvalidArgument, func() error {
			_, err := g.On(b.ctx).Kernel(a.fill, one, n, a.buf, int32(1), int32(multiN))
			return err
		}},
		"Args of A run On(B)": {driver.ErrInvalidArgument, func() error {
			_, err := g.On(b.ctx).KernelArgs(argsA, one, n)
			return err
		}},
		"a kernel of B on A's memory": {driver.ErrInvalidArgument, func() error {
			_, err := g.Kernel(b.fill, one, n, a.buf, int32(1), int32(multiN))
			return err
		}},
		"a memset of B's memory in A": {driver.ErrInvalidArgument, func() error {
			_, err := g.Memset(graph.Device(b.buf), 1, 4)
			return err
		}},
		"a memset of A's memory On(B)": {driver.ErrInvalidArgument, func() error {
			_, err := g.On(b.ctx).Memset(graph.Device(a.buf), 1, 4)
			return err
		}},
		"On a closed context": {driver.ErrClosed, func() error {
			_, err := g.On(gone).Memcpy(graph.Device(a.buf2), graph.Device(a.buf))
			return err
		}},
		"On a zero context": {driver.ErrClosed, func() error {
			_, err := g.On(new(driver.Context)).Memset(graph.Device(a.buf), 1, 4)
			return err
		}},
	} {
		assert.ErrorIs(t, c.add(), c.err, name)
	}
	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Empty(t, nodes, "nothing was added")
	lifetime.Flush()
	assert.Equal(t, live, lifetime.ReadStats().Live, "no owner was kept")

	// The same, done right: KernelArgs of B run in B.
	_, err = g.KernelArgs(argsB, one, n)
	require.NoError(t, err, "Args of B's kernel run in B")
	_, err = g.On(b.ctx).KernelArgs(argsB, one, n)
	require.NoError(t, err)
}

// TestMultiGraphUpdatesRefused: an executable of a graph with nodes in
// two contexts refuses per-node updates of kernels, memsets and memcpys
// (CUDA keeps a node in its context; the update would name the graph's)
// and device launch; host-node updates and whole-graph updates work. A
// clone and a graph taking it as a child span both contexts too.
func TestMultiGraphUpdatesRefused(t *testing.T) {
	f := ltSetup(t)
	a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
	out, err := driver.Alloc[int32](a.ctx, multiN)
	require.NoError(t, err)
	defer out.Close()
	g := buildMulti(t, a, b, out, 1)
	defer g.Close()
	one, n := driver.Grid(1), driver.Block(1)
	k, err := g.Kernel(a.fill, one, n, a.buf2, int32(1), int32(multiN))
	require.NoError(t, err)
	m, err := g.Memset(graph.Device(a.buf2), 0, 4)
	require.NoError(t, err)
	c, err := g.Memcpy(graph.Device(a.buf2), graph.Device(a.buf))
	require.NoError(t, err)
	h, err := g.HostFunc(func() {})
	require.NoError(t, err)
	args, err := a.fill.NewArgs(a.buf2, int32(2), int32(multiN))
	require.NoError(t, err)
	defer args.Close()
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	for name, err := range map[string]error{
		"SetKernel":     e.SetKernel(k, a.fill, one, n, a.buf2, int32(2), int32(multiN)),
		"SetKernelWith": e.SetKernelWith(k, a.fill, driver.LaunchConfig{Grid: one, Block: n}, a.buf2, int32(2), int32(multiN)),
		"SetKernelArg":  e.SetKernelArg(k, 1, int32(3)),
		"SetKernelArgs": e.SetKernelArgs(k, args),
		"SetMemset":     e.SetMemset(m, graph.Device(a.buf2), 1, 4),
		"SetMemcpy":     e.SetMemcpy(c, graph.Device(a.buf2), graph.Device(a.buf)),
	} {
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		assert.ErrorContains(t, err, "several contexts", name)
	}
	assert.NoError(t, e.SetHostFunc(h, func() {}), "a host node has no context")
	require.NoError(t, e.Launch(a.s))
	require.NoError(t, a.s.Synchronize())

	for name, mk := range map[string]func() (*graph.Graph, error){
		"clone": g.Clone,
		"parent": func() (*graph.Graph, error) {
			p, err := graph.New(a.ctx)
			if err != nil {
				return nil, err
			}
			_, err = p.Child(g)
			return p, err
		},
	} {
		o, err := mk()
		require.NoError(t, err, name)
		_, err = o.InstantiateWith(graph.InstantiateOptions{Flags: graph.DeviceLaunch})
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		oe, err := o.Instantiate()
		require.NoError(t, err, name)
		if name == "clone" {
			require.NoError(t, e.Update(o), "a whole-graph update with a graph of the same topology")
			assert.ErrorIs(t, e.SetMemset(m, graph.Device(a.buf2), 1, 4), driver.ErrInvalidArgument, "still several contexts")
		}
		require.NoError(t, oe.Launch(a.s), name)
		require.NoError(t, oe.Close())
		require.NoError(t, o.Close())
	}
	require.NoError(t, a.s.Synchronize())

	// A single-context graph's executable takes per-node updates.
	single, err := graph.New(a.ctx)
	require.NoError(t, err)
	defer single.Close()
	sk, err := single.Kernel(a.fill, one, n, a.buf2, int32(1), int32(multiN))
	require.NoError(t, err)
	se, err := single.Instantiate()
	require.NoError(t, err)
	defer se.Close()
	require.NoError(t, se.SetKernelArg(sk, 1, int32(5)))
}

// TestMultiCaptureRefusedForkLeavesNoMark: a Fork of a stream of another
// context that is refused (the stream is closed, or captured elsewhere)
// leaves the capture as it was: the graph made spans one context (device
// launch and per-node updates work) and does not hold the other context,
// which goes once its handles are closed.
func TestMultiCaptureRefusedForkLeavesNoMark(t *testing.T) {
	f := ltSetup(t)
	for _, how := range []string{"closed stream", "stream captured elsewhere"} {
		t.Run(how, func(t *testing.T) {
			a := newMultiSide(t, f.ctx.Device())
			b := newMultiSide(t, f.ctx.Device())
			one, n := driver.Grid(1), driver.Block(1)
			var other *graph.StreamCapture
			if how == "closed stream" {
				require.NoError(t, b.s.Close())
			} else {
				var err error
				other, err = graph.BeginCapture(b.s, graph.CaptureRelaxed)
				require.NoError(t, err)
			}
			sc, err := graph.BeginCapture(a.s, graph.CaptureRelaxed)
			require.NoError(t, err)
			require.NoError(t, a.s.Launch(a.fill, one, n, a.buf, int32(5), int32(multiN)))
			assert.Error(t, sc.Fork(b.s), "the fork is refused")
			g, err := sc.End()
			require.NoError(t, err)
			defer g.Close()
			if other != nil {
				require.NoError(t, other.Abort())
			}
			b.close()
			// B's context itself, not a count: an earlier case's contexts
			// may still be going meanwhile (their executables retire once
			// their streams have passed their launches).
			assert.True(t, ltSettle(func() bool {
				lifetime.Flush()
				return fcall(t, "fake_context_alive", b.h) == 0
			}), "the graph does not hold the other context")

			nodes, err := g.Nodes()
			require.NoError(t, err)
			require.Len(t, nodes, 1)
			e, err := g.Instantiate()
			require.NoError(t, err)
			defer e.Close()
			assert.NoError(t, e.SetKernelArg(nodes[0], 1, int32(9)), "per-node updates of a graph of one context")
			dl, err := g.InstantiateWith(graph.InstantiateOptions{Flags: graph.DeviceLaunch})
			if assert.NoError(t, err, "device launch of a graph of one context") {
				require.NoError(t, dl.Close())
			}
		})
	}
}

// TestMultiExecUpdateTakesTheGraphsMark: an executable of a graph of one
// context, updated as a whole (Exec.Update) with a graph of the same shape
// whose kernel runs in B, refuses per-node updates from then on and keeps
// B for its node after B's handles are closed; updated back with a graph
// of one context, it takes per-node updates again. (fakecuda lets a
// whole-graph update move a node to another context; CUDA may refuse it:
// this checks purecuda's marks and holds.)
func TestMultiExecUpdateTakesTheGraphsMark(t *testing.T) {
	f := ltSetup(t)
	a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	defer lib.Close()
	fill, err := lib.Function("fill")
	require.NoError(t, err)
	one, n := driver.Grid(1), driver.Block(1)
	mk := func(on *driver.Context, buf *driver.Buffer[int32]) (*graph.Graph, graph.Node) {
		g, err := graph.New(a.ctx)
		require.NoError(t, err)
		k, err := g.On(on).Kernel(fill, one, n, buf, int32(1), int32(multiN))
		require.NoError(t, err)
		return g, k
	}
	single, k := mk(nil, a.buf)
	defer single.Close()
	e, err := single.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, e.SetKernelArg(k, 1, int32(2)), "one context")

	multi, _ := mk(b.ctx, b.buf)
	require.NoError(t, e.Update(multi))
	require.NoError(t, multi.Close())
	assert.ErrorIs(t, e.SetKernel(k, fill, one, n, a.buf2, int32(3), int32(multiN)), driver.ErrInvalidArgument, "updated with a graph of two contexts")
	b.close()
	lifetime.Flush()
	fcall(t, "fake_graph_node_runs_reset")
	require.NoError(t, e.Launch(a.s))
	require.NoError(t, a.s.Synchronize())
	assert.EqualValues(t, 1, nodeRuns(t, b), "the node runs in B, which the executable keeps")
	assert.Zero(t, fcall(t, "fake_bad_handle_uses")+fcall(t, "fake_bad_ptr_uses"), "no bad use: %s", lastBad(t))

	back, _ := mk(nil, a.buf2)
	defer back.Close()
	require.NoError(t, e.Update(back))
	assert.NoError(t, e.SetKernel(k, fill, one, n, a.buf2, int32(4), int32(multiN)), "updated back with a graph of one context")
	require.NoError(t, e.Launch(a.s))
	got, err := a.buf2.ToHost(a.s)
	require.NoError(t, err)
	assert.Equal(t, seqFrom(4), got)
}
