//go:build linux

package fakedriver_test

// Graphs whose nodes run in several contexts (package graph's "Several
// GPUs"): fakecuda has one device, so two contexts of it stand for two
// devices. fakecuda records the context each kernel, memcpy and memset
// node runs in (a CUfunction's own, a CUkernel's params ctx, a memcpy's or
// memset's ctx argument), counts the runs per context
// (fake_graph_node_runs) and counts a bad use when a node runs in a
// destroyed context: the graph must hold every context its nodes name.

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// multiSide is one "device" of a multi-context test: a created context
// (so that closing its last holder destroys it), a stream, fakecuda's
// module loaded in it and two buffers of n elements.
type multiSide struct {
	ctx         *driver.Context
	h           uintptr // the CUcontext, for fake_graph_node_runs
	s           *driver.Stream
	mod         *driver.Module
	fill, copyi *driver.Function
	buf, buf2   *driver.Buffer[int32]
}

const multiN = 64

func newMultiSide(t *testing.T, dev *driver.Device) *multiSide {
	t.Helper()
	c, err := dev.NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	m := &multiSide{ctx: c}
	require.NoError(t, c.Raw(func(h uintptr) error { m.h = h; return nil }))
	m.s, err = c.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	m.mod, err = c.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	m.fill, err = m.mod.Function("fill")
	require.NoError(t, err)
	m.copyi, err = m.mod.Function("copyi")
	require.NoError(t, err)
	m.buf, err = driver.Alloc[int32](c, multiN)
	require.NoError(t, err)
	m.buf2, err = driver.Alloc[int32](c, multiN)
	require.NoError(t, err)
	t.Cleanup(func() { m.close() })
	return m
}

// close closes everything of the side (idempotent): the graph must keep
// what its nodes name.
func (m *multiSide) close() {
	_ = m.buf.Close()
	_ = m.buf2.Close()
	_ = m.mod.Close()
	_ = m.s.Close()
	_ = m.ctx.Close()
}

func nodeRuns(t *testing.T, m *multiSide) int64 {
	t.Helper()
	return fcall(t, "fake_graph_node_runs", m.h)
}

// buildMulti builds, in a's context, a graph with a kernel node in each
// context and memcpy nodes between them: a fill kernel in a (a.buf =
// base+i), a copy a.buf → b.buf run in a (the graph's context), a copyi
// kernel in b (b.buf2 = b.buf: a module kernel of b runs in b without On)
// and a copy b.buf2 → out run in b (Builder.On). Each launch runs two
// nodes in each context.
func buildMulti(t *testing.T, a, b *multiSide, out *driver.Buffer[int32], base int32) *graph.Graph {
	t.Helper()
	g, err := graph.New(a.ctx)
	require.NoError(t, err)
	one, n := driver.Grid(1), driver.Block(1)
	ka, err := g.Kernel(a.fill, one, n, a.buf, base, int32(multiN))
	require.NoError(t, err)
	ab, err := g.After(ka).Memcpy(graph.Device(b.buf), graph.Device(a.buf))
	require.NoError(t, err)
	kb, err := g.After(ab).Kernel(b.copyi, one, n, b.buf2, b.buf, int32(multiN))
	require.NoError(t, err)
	_, err = g.After(kb).On(b.ctx).Memcpy(graph.Device(out), graph.Device(b.buf2))
	require.NoError(t, err)
	return g
}

func seqFrom(base int32) []int32 {
	want := make([]int32, multiN)
	for i := range want {
		want[i] = base + int32(i)
	}
	return want
}

// TestMultiGraphRunsEachNodeInItsContext: a graph of context A with a
// kernel node in A and one in B, and memcpy nodes between their memory,
// replays exactly; each node runs in its context (two per launch in each).
func TestMultiGraphRunsEachNodeInItsContext(t *testing.T) {
	f := ltSetup(t)
	a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
	out, err := driver.Alloc[int32](a.ctx, multiN)
	require.NoError(t, err)
	defer out.Close()
	g := buildMulti(t, a, b, out, 100)
	defer g.Close()
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	fcall(t, "fake_graph_node_runs_reset")
	const launches = 50
	for i := range launches {
		require.NoError(t, out.Memset32(a.s, 0))
		require.NoError(t, e.Launch(a.s))
		got, err := out.ToHost(a.s)
		require.NoError(t, err)
		require.Equal(t, seqFrom(100), got, "launch %d", i)
	}
	assert.EqualValues(t, 2*launches, nodeRuns(t, a), "the fill and the first copy run in A")
	assert.EqualValues(t, 2*launches, nodeRuns(t, b), "B's kernel and the copy made with On(B) run in B")
}

// TestMultiGraphClosingInAnyOrder: the graph, its executable and every
// object of either context (buffers, module, stream, the context itself)
// are closed in every order; until the executable is closed it keeps
// replaying exactly what it did, in both contexts, and once all is closed
// and released nothing is left (contexts, memory, graphs, lifetime
// objects), with no bad use.
func TestMultiGraphClosingInAnyOrder(t *testing.T) {
	f := ltSetup(t)
	names := []string{"graph", "exec", "A", "B"}
	for _, order := range permutations(len(names)) {
		var label string
		for _, i := range order {
			label += names[i] + " "
		}
		t.Run(label, func(t *testing.T) {
			lifetime.Flush()
			before := liveCounts(t)
			objs := lifetime.ReadStats().Objects
			a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
			launch, err := a.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err)
			out, err := driver.Alloc[int32](a.ctx, multiN)
			require.NoError(t, err)
			g := buildMulti(t, a, b, out, 7)
			e, err := g.Instantiate()
			require.NoError(t, err)
			closers := []func(){func() { _ = g.Close() }, func() { _ = e.Close() }, a.close, b.close}
			execOpen := true
			for _, i := range order {
				closers[i]()
				if i == 1 {
					execOpen = false
				}
				if execOpen {
					fcall(t, "fake_graph_node_runs_reset")
					require.NoError(t, e.Launch(launch))
					require.NoError(t, launch.Synchronize())
					assert.EqualValues(t, 2, nodeRuns(t, a), "after closing %s", names[i])
					assert.EqualValues(t, 2, nodeRuns(t, b), "after closing %s", names[i])
					got, err := out.ToHost(launch)
					require.NoError(t, err)
					assert.Equal(t, seqFrom(7), got, "after closing %s", names[i])
				}
			}
			assert.Error(t, e.Launch(launch), "a closed executable launches nothing")
			_ = out.Close()
			_ = launch.Close()
			assert.True(t, ltSettle(func() bool {
				lifetime.Flush()
				return liveCounts(t) == before && lifetime.ReadStats().Objects == objs
			}), "everything released: %v, was %v", liveCounts(t), before)
			assert.Zero(t, fcall(t, "fake_bad_handle_uses")+fcall(t, "fake_bad_ptr_uses"), "no bad use: %s", lastBad(t))
		})
	}
}

// TestMultiGraphDroppedReleasesEveryContext: a graph and executable with
// nodes in two contexts, dropped without Close after every other handle
// was closed, release both contexts.
func TestMultiGraphDroppedReleasesEveryContext(t *testing.T) {
	f := ltSetup(t)
	lifetime.Flush()
	before := liveCounts(t)
	func() {
		a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
		out, err := driver.Alloc[int32](a.ctx, multiN)
		require.NoError(t, err)
		g := buildMulti(t, a, b, out, 3)
		e, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, e.Launch(a.s))
		require.NoError(t, a.s.Synchronize())
		_ = out.Close()
		a.close()
		b.close()
		runtime.KeepAlive(e)
	}()
	assert.True(t, ltSettle(func() bool {
		gcAll()
		lifetime.Flush()
		return liveCounts(t) == before
	}), "a dropped multi-context graph releases both contexts: %v, was %v", liveCounts(t), before)
}

// TestMultiGraphOnHoldsItsContext: a library kernel (which has no context
// of its own) and a memset run in B through Builder.On in a graph of A;
// the nodes hold B after every handle of B is closed: they keep running
// in B, and B goes when the graph and executable do.
func TestMultiGraphOnHoldsItsContext(t *testing.T) {
	f := ltSetup(t)
	lifetime.Flush()
	before := liveCounts(t)
	a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	fill, err := lib.Function("fill")
	require.NoError(t, err)
	empty, err := lib.Function("empty")
	require.NoError(t, err)
	g, err := graph.New(a.ctx)
	require.NoError(t, err)
	k, err := g.On(b.ctx).Kernel(fill, driver.Grid(1), driver.Block(1), b.buf, int32(40), int32(multiN))
	require.NoError(t, err)
	_, err = g.After(k).On(b.ctx).Memset(graph.Device(b.buf2), 9, 4)
	require.NoError(t, err)
	c, err := g.After(k).On(nil).Memcpy(graph.Device(a.buf), graph.Device(b.buf)) // nil: the graph's context
	require.NoError(t, err)
	_, err = g.After(c).On(b.ctx).Memcpy(graph.Device(a.buf2), graph.Device(a.buf))
	require.NoError(t, err)
	// A graph whose nodes in C name nothing else of C: only they hold it.
	c3 := newMultiSide(t, f.ctx.Device())
	g2, err := graph.New(a.ctx)
	require.NoError(t, err)
	o2 := out(t, a)
	k2, err := g2.On(c3.ctx).Memcpy(graph.Device(o2), graph.Device(a.buf2))
	require.NoError(t, err)
	_, err = g2.After(k2).On(c3.ctx).Kernel(empty, driver.Grid(1), driver.Block(1))
	require.NoError(t, err)
	e2, err := g2.Instantiate()
	require.NoError(t, err)
	_ = g2.Close()
	c3.close()
	e, err := g.Instantiate()
	require.NoError(t, err)
	_ = lib.Close()
	b.close()
	_ = g.Close()
	fcall(t, "fake_graph_node_runs_reset")
	require.NoError(t, e.Launch(a.s))
	got, err := a.buf2.ToHost(a.s)
	require.NoError(t, err)
	assert.Equal(t, seqFrom(40), got, "B's kernel ran, and its memory was copied to A, and within A by B")
	assert.EqualValues(t, 3, nodeRuns(t, b), "the library kernel, the memset and A's copy made On(B) ran in B")
	assert.EqualValues(t, 1, nodeRuns(t, a), "the copy ran in A")
	require.NoError(t, e2.Launch(a.s))
	require.NoError(t, a.s.Synchronize())
	assert.EqualValues(t, 2, nodeRuns(t, c3), "the copy and kernel made On(C) ran in C, which only they hold")
	_ = e2.Close()
	_ = o2.Close()
	_ = e.Close()
	a.close()
	assert.True(t, ltSettle(func() bool {
		lifetime.Flush()
		return liveCounts(t) == before
	}), "B released with the executable: %v, was %v", liveCounts(t), before)
}

// TestMultiCaptureForkJoinAcrossContexts: a capture on a stream of A forks
// into a stream of B (Fork, and a stream wait on an event recorded in the
// capture), runs a kernel there, joins back (Join, and the join End makes
// itself), and the graph made replays both kernels in their contexts,
// holding B after B's handles are closed.
func TestMultiCaptureForkJoinAcrossContexts(t *testing.T) {
	f := ltSetup(t)
	for _, how := range []string{"Fork and Join", "event wait, joined by End"} {
		t.Run(how, func(t *testing.T) {
			lifetime.Flush()
			before := liveCounts(t)
			a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
			out, err := driver.Alloc[int32](a.ctx, multiN)
			require.NoError(t, err)
			ev, err := a.ctx.NewEvent(driver.EventDisableTiming)
			require.NoError(t, err)
			one, n := driver.Grid(1), driver.Block(1)
			sc, err := graph.BeginCapture(a.s, graph.CaptureRelaxed)
			require.NoError(t, err)
			require.NoError(t, a.s.Launch(a.fill, one, n, a.buf, int32(5), int32(multiN)))
			if how == "Fork and Join" {
				require.NoError(t, sc.Fork(b.s))
			} else {
				require.NoError(t, ev.Record(a.s))
				require.NoError(t, b.s.WaitEvent(ev))
			}
			require.NoError(t, b.s.Launch(b.fill, one, n, b.buf, int32(70), int32(multiN)))
			if how == "Fork and Join" {
				require.NoError(t, sc.Join(b.s))
			}
			g, err := sc.End()
			require.NoError(t, err)
			st, err := graph.IsCapturing(b.s)
			require.NoError(t, err)
			assert.Equal(t, graph.NotCapturing, st, "B's stream is out of the capture")
			// The data crosses in an explicit node after the captured ones.
			nodes, err := g.Nodes()
			require.NoError(t, err)
			_, err = g.After(nodes...).On(b.ctx).Memcpy(graph.Device(out), graph.Device(b.buf))
			require.NoError(t, err)
			_, err = g.InstantiateWith(graph.InstantiateOptions{Flags: graph.DeviceLaunch})
			assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a multi-context capture cannot be launched from the device")
			e, err := g.Instantiate()
			require.NoError(t, err)
			_ = ev.Close()
			b.close()
			_ = g.Close()
			fcall(t, "fake_graph_node_runs_reset")
			for range 10 {
				require.NoError(t, out.Memset32(a.s, 0))
				require.NoError(t, e.Launch(a.s))
				got, err := out.ToHost(a.s)
				require.NoError(t, err)
				require.Equal(t, seqFrom(70), got)
			}
			assert.EqualValues(t, 20, nodeRuns(t, b), "B's captured kernel and the copy ran in B")
			assert.EqualValues(t, 10, nodeRuns(t, a), "A's captured kernel ran in A")
			_ = e.Close()
			_ = out.Close()
			a.close()
			assert.True(t, ltSettle(func() bool {
				lifetime.Flush()
				return liveCounts(t) == before
			}), "both contexts released: %v, was %v", liveCounts(t), before)
		})
	}
}

// TestMultiGraphCopiesHoldTheirContexts: a node run in B through On,
// which nothing else of B names, keeps B for a clone's executable, for a
// parent's that embeds the graph as a child, for an executable updated
// with the graph as a whole (Exec.Update) and for one whose child node was
// set to it (Exec.SetChild), after the graph, the library and every
// handle of B are closed; B goes with the executable.
func TestMultiGraphCopiesHoldTheirContexts(t *testing.T) {
	f := ltSetup(t)
	for _, how := range []string{"clone", "child", "update", "setchild"} {
		t.Run(how, func(t *testing.T) {
			lifetime.Flush()
			before := liveCounts(t)
			a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
			lib, err := driver.LoadLibrary([]byte("FAKE library"))
			require.NoError(t, err)
			empty, err := lib.Function("empty")
			require.NoError(t, err)
			mk := func() *graph.Graph {
				g, err := graph.New(a.ctx)
				require.NoError(t, err)
				_, err = g.On(b.ctx).Kernel(empty, driver.Grid(1), driver.Block(1))
				require.NoError(t, err)
				return g
			}
			g := mk()
			var e *graph.Exec
			var other *graph.Graph
			switch how {
			case "clone":
				other, err = g.Clone()
				require.NoError(t, err)
				e, err = other.Instantiate()
			case "child":
				other, err = graph.New(a.ctx)
				require.NoError(t, err)
				_, err = other.Child(g)
				require.NoError(t, err)
				e, err = other.Instantiate()
			case "update":
				other = mk()
				e, err = other.Instantiate()
				require.NoError(t, err)
				require.NoError(t, e.Update(g))
				_ = other.Close()
			case "setchild":
				other, err = graph.New(a.ctx)
				require.NoError(t, err)
				cn, err := other.Child(mk())
				require.NoError(t, err)
				e, err = other.Instantiate()
				require.NoError(t, err)
				require.NoError(t, e.SetChild(cn, g))
			}
			require.NoError(t, err)
			_ = g.Close()
			_ = other.Close()
			_ = lib.Close()
			b.close()
			lifetime.Flush()
			fcall(t, "fake_graph_node_runs_reset")
			require.NoError(t, e.Launch(a.s))
			require.NoError(t, a.s.Synchronize())
			assert.EqualValues(t, 1, nodeRuns(t, b), "the node ran in B")
			assert.Zero(t, fcall(t, "fake_bad_handle_uses")+fcall(t, "fake_bad_ptr_uses"), "no bad use: %s", lastBad(t))
			_ = e.Close()
			a.close()
			assert.True(t, ltSettle(func() bool { lifetime.Flush(); return liveCounts(t) == before }), "B released with the executable: %v, was %v", liveCounts(t), before)
		})
	}
}

// TestMultiCaptureIntoAGraphAcrossContexts: a capture into an existing
// graph of A brings in a stream of B (Fork, or a wait for an event
// recorded in the capture), where a library kernel (which names no
// context of its own) runs; the graph is marked as spanning contexts
// (device launch refused), holds B after B's handles are closed, and its
// executable runs the kernel in B; B goes with the graph and executable.
func TestMultiCaptureIntoAGraphAcrossContexts(t *testing.T) {
	f := ltSetup(t)
	for _, how := range []string{"Fork", "event wait"} {
		t.Run(how, func(t *testing.T) {
			lifetime.Flush()
			before := liveCounts(t)
			a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
			lib, err := driver.LoadLibrary([]byte("FAKE library"))
			require.NoError(t, err)
			empty, err := lib.Function("empty")
			require.NoError(t, err)
			ev, err := a.ctx.NewEvent(driver.EventDisableTiming)
			require.NoError(t, err)
			g, err := graph.New(a.ctx)
			require.NoError(t, err)
			first, err := g.Empty()
			require.NoError(t, err)
			sc, err := g.After(first).BeginCapture(a.s, graph.CaptureRelaxed)
			require.NoError(t, err)
			if how == "Fork" {
				require.NoError(t, sc.Fork(b.s))
			} else {
				require.NoError(t, ev.Record(a.s))
				require.NoError(t, b.s.WaitEvent(ev))
			}
			require.NoError(t, b.s.Launch(empty, driver.Grid(1), driver.Block(1)))
			got, err := sc.End()
			require.NoError(t, err)
			assert.Same(t, g, got)
			_, err = g.InstantiateWith(graph.InstantiateOptions{Flags: graph.DeviceLaunch})
			assert.ErrorIs(t, err, driver.ErrInvalidArgument, "the graph spans two contexts now")
			e, err := g.Instantiate()
			require.NoError(t, err)
			_ = ev.Close()
			_ = lib.Close()
			b.close()
			_ = g.Close()
			lifetime.Flush()
			fcall(t, "fake_graph_node_runs_reset")
			require.NoError(t, e.Launch(a.s))
			require.NoError(t, a.s.Synchronize())
			assert.EqualValues(t, 1, nodeRuns(t, b), "the captured library kernel ran in B")
			assert.Zero(t, fcall(t, "fake_bad_handle_uses")+fcall(t, "fake_bad_ptr_uses"), "no bad use: %s", lastBad(t))
			_ = e.Close()
			a.close()
			assert.True(t, ltSettle(func() bool {
				lifetime.Flush()
				return liveCounts(t) == before
			}), "B released with the graph and executable: %v, was %v", liveCounts(t), before)
		})
	}
}

// liveCounts are fakecuda's live contexts, allocations, graphs,
// executables, modules and streams.
func liveCounts(t *testing.T) string {
	t.Helper()
	return fmt.Sprint(fcall(t, "fake_live_contexts"), fcall(t, "fake_live_allocations"), fcall(t, "fake_live_graphs"),
		fcall(t, "fake_live_execs"), fcall(t, "fake_live_modules"), fcall(t, "fake_live_streams"))
}

// out is a buffer of m's context, closed when t ends.
func out(t *testing.T, m *multiSide) *driver.Buffer[int32] {
	t.Helper()
	b, err := driver.Alloc[int32](m.ctx, multiN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func lastBad(t *testing.T) string {
	t.Helper()
	return faketest.LastBadUse(t)
}
