//go:build linux

package fakedriver_test

// The safety of package graph against fakecuda, which counts every use of
// freed memory or a destroyed handle and every pair of concurrent calls on
// one graph (or an executable and its graph).

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/lifetime"
)

// Instantiations, clones, node adds and executable closes racing the
// graph's Close never reach CUDA with one graph at once (libcuda crashed
// inside cuGraphInstantiateWithParams), and every call works or says the
// graph is closed.
func TestGraphFamilyCallsNeverOverlap(t *testing.T) {
	f := setupGraph(t)
	graphCallDelay(t, 20)
	for round := 0; round < 15; round++ {
		g, err := graph.New(f.ctx)
		require.NoError(t, err)
		buf, err := driver.Alloc[int32](f.ctx, 8)
		require.NoError(t, err)
		k, err := g.KernelWith(f.fill, graphCfg, buf, int32(1), int32(8))
		require.NoError(t, err)
		require.NoError(t, buf.Close())
		var wg sync.WaitGroup
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 8; i++ {
					if w%2 == 0 {
						e, err := g.Instantiate()
						if err != nil {
							assertClosedOr(t, err)
							continue
						}
						assert.NoError(t, e.Launch(f.s))
						assert.NoError(t, e.Close())
						continue
					}
					c, err := g.Clone()
					if err != nil {
						assertClosedOr(t, err)
						continue
					}
					if e, err := c.Instantiate(); assert.NoError(t, err) {
						assert.NoError(t, e.Close())
					}
					assert.NoError(t, c.Close())
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				_, err := g.After(k).Empty()
				assertClosedOr(t, err)
			}
		}()
		time.Sleep(time.Millisecond)
		assert.NoError(t, g.Close())
		wg.Wait()
	}
	require.NoError(t, f.s.Synchronize())
	noConcurrentGraphCalls(t)
	noBadUses(t)
}

// Graphs and executables dropped without Close (the GC stress), while
// launches run on another stream, are released by their cleanups: owner
// tables, callbacks, user objects, device memory.
func TestGraphDroppedWithoutCloseIsReleased(t *testing.T) {
	f := setupGraph(t)
	s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()
	busy, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer busy.Close()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() { // launches meanwhile
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			assert.NoError(t, s2.Launch(f.fill, g1, b1, busy, int32(1), int32(8)))
			runtime.Gosched()
		}
	}()
	gcAll()
	require.EqualValues(t, 1, fcall(t, "fake_quiesce", 30000))
	before := lifetime.ReadStats()
	live := func() [4]int64 {
		return [4]int64{fcall(t, "fake_live_graphs"), fcall(t, "fake_live_execs"),
			fcall(t, "fake_live_user_objects"), fcall(t, "fake_live_allocations")}
	}
	live0 := live()
	n := 10000
	if testing.Short() {
		n = 2000
	}
	for i := 0; i < n; i++ {
		if i%1000 == 0 {
			runtime.GC() // cleanups run while graphs are still being made
		}
		func() {
			buf, err := driver.Alloc[int32](f.ctx, 8)
			require.NoError(t, err)
			defer buf.Close()
			g, err := graph.New(f.ctx)
			require.NoError(t, err)
			k, err := g.KernelWith(f.fill, graphCfg, buf, int32(i), int32(8))
			require.NoError(t, err)
			_, err = g.After(k).HostFunc(func() {})
			require.NoError(t, err)
			e, err := g.Instantiate()
			require.NoError(t, err)
			require.NoError(t, e.Launch(f.s))
		}() // g and e dropped
	}
	close(stop)
	<-stopped
	require.NoError(t, s2.Synchronize())
	require.NoError(t, f.s.Synchronize())
	ok := ltSettle(func() bool {
		s := lifetime.ReadStats()
		return live() == live0 && s.Tables == before.Tables && s.Callbacks == before.Callbacks &&
			s.Live == before.Live && s.Objects == before.Objects
	})
	assert.True(t, ok, "everything released: fake %v (was %v), lifetime %+v (was %+v)", live(), live0, lifetime.ReadStats(), before)
	noBadUses(t)
}

// Closing many graphs and executables from many goroutines leaves no
// goroutine behind beyond purecuda's fixed pool.
func TestGraphCloseLeavesNoGoroutines(t *testing.T) {
	f := setupGraph(t)
	work := func(n int) {
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := f.ctx.NewStream(driver.StreamNonBlocking)
				if !assert.NoError(t, err) {
					return
				}
				defer s.Close()
				for i := 0; i < n; i++ {
					buf, err := driver.Alloc[int32](f.ctx, 8)
					if !assert.NoError(t, err) {
						return
					}
					g, _ := graph.New(f.ctx)
					k, err := g.KernelWith(f.fill, graphCfg, buf, int32(i), int32(8))
					assert.NoError(t, err)
					_, err = g.After(k).HostFunc(func() {})
					assert.NoError(t, err)
					e, err := g.Instantiate()
					if assert.NoError(t, err) {
						assert.NoError(t, e.Launch(s))
						if i%2 == 0 { // an update retires owners behind the launch
							assert.NoError(t, e.SetKernelWith(k, f.fill, graphCfg, buf, int32(-i), int32(8)))
							assert.NoError(t, e.SetKernelWith(k, f.fill, graphCfg, buf, int32(i), int32(8)))
						}
						assert.NoError(t, e.Close())
					}
					assert.NoError(t, g.Close())
					assert.NoError(t, buf.Close())
				}
				assert.NoError(t, s.Synchronize())
			}()
		}
		wg.Wait()
	}
	work(2) // the fixed pool (host-function server and workers) starts
	ltSettle(func() bool { return lifetime.ReadStats().Queued == 0 })
	time.Sleep(50 * time.Millisecond)
	g0 := runtime.NumGoroutine()
	work(40)
	ok := ltSettle(func() bool { return runtime.NumGoroutine() <= g0 })
	if !ok {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines %d, were %d:\n%s", runtime.NumGoroutine(), g0, buf[:runtime.Stack(buf, true)])
	}
	noBadUses(t)
}

// An aborted capture into a graph with memory nodes, whose captured nodes
// CUDA refuses to destroy, keeps what they name: the graph's next launch
// finds its buffer alive.
func TestCaptureAbortKeepsNodesCUDAKeeps(t *testing.T) {
	f := setupGraph(t)
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	_, _, err = g.MemAlloc(256, graph.MemAllocOptions{})
	require.NoError(t, err)
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	_, err = g.Capture(f.s, graph.CaptureRelaxed, func(s *driver.Stream) error {
		if err := s.Launch(f.fill, g1, b1, buf, int32(3), int32(8)); err != nil {
			return err
		}
		return errors.New("changed my mind")
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "changed my mind")
	require.NoError(t, buf.Close()) // the graph's kernel node still names it
	gcAll()
	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Len(t, nodes, 2, "CUDA kept the captured kernel node")
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, e.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	noBadUses(t)
}

// While a capture into a graph runs, the graph refuses clones,
// instantiations, use as a child and explicit adds (they would copy nodes
// whose owners the capture still holds, or add nodes the capture's abort
// destroys): ErrCapturing. Nothing reaches CUDA with a destroyed node, and
// the graph holds what the capture named.
func TestGraphRefusesCallsDuringCapture(t *testing.T) {
	f := setupGraph(t)
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	parent, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer parent.Close()
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	sc, err := g.BeginCapture(f.s, graph.CaptureRelaxed)
	require.NoError(t, err)
	defer sc.Abort()
	require.NoError(t, f.s.Launch(f.fill, g1, b1, buf, int32(3), int32(8)))
	require.NoError(t, buf.Close())

	var copies []func() error
	c, err := g.Clone()
	assert.ErrorIs(t, err, graph.ErrCapturing, "Clone")
	if err == nil {
		copies = append(copies, func() error { return launchOnce(f, c) })
	}
	e, err := g.Instantiate()
	assert.ErrorIs(t, err, graph.ErrCapturing, "Instantiate")
	if err == nil {
		copies = append(copies, func() error { defer e.Close(); return e.Launch(f.s) })
	}
	_, err = parent.Child(g)
	assert.ErrorIs(t, err, graph.ErrCapturing, "Child")
	if err == nil {
		copies = append(copies, func() error { return launchOnce(f, parent) })
	}
	n, err := g.Empty()
	assert.ErrorIs(t, err, graph.ErrCapturing, "an explicit add")
	_, err = g.Nodes()
	assert.ErrorIs(t, err, graph.ErrCapturing, "a query")

	require.NoError(t, sc.Abort())
	if !n.IsZero() {
		_, err := n.Kind()
		assert.ErrorIs(t, err, graph.ErrDestroyedNode, "the abort destroyed the explicit node")
	}
	require.NoError(t, g.Close())
	gcAll()
	for _, run := range copies {
		assert.NoError(t, run())
	}
	require.NoError(t, f.s.Synchronize())
	noBadUses(t)
}

// launchOnce instantiates g, launches it on f.s and closes the executable.
func launchOnce(f *fixture, g *graph.Graph) error {
	e, err := g.Instantiate()
	if err != nil {
		return err
	}
	defer e.Close()
	return e.Launch(f.s)
}

// A host node of a child graph, or of the graph an executable was updated
// with, reports its panic to the executable that ran it.
func TestHostNodePanicsReachTheExecutableThatRanThem(t *testing.T) {
	f := setupGraph(t)
	child, err := graph.New(f.ctx)
	require.NoError(t, err)
	_, err = child.HostFunc(func() { panic("child boom") })
	require.NoError(t, err)
	parent, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer parent.Close()
	_, err = parent.Child(child)
	require.NoError(t, err)
	require.NoError(t, child.Close())
	e, err := parent.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, e.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	err = e.Err()
	require.Error(t, err, "the parent's executable ran the child's host node")
	assert.Contains(t, err.Error(), "child boom")

	quiet, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer quiet.Close()
	_, err = quiet.HostFunc(func() {})
	require.NoError(t, err)
	loud, err := graph.New(f.ctx)
	require.NoError(t, err)
	_, err = loud.HostFunc(func() { panic("update boom") })
	require.NoError(t, err)
	x, err := quiet.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, x.Update(loud))
	require.NoError(t, loud.Close())
	require.NoError(t, x.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	err = x.Err()
	require.Error(t, err, "the updated executable ran loud's host node")
	assert.Contains(t, err.Error(), "update boom")
	noBadUses(t)
}

// Launches on a captured stream racing the capture's End are either
// captured, and then held by the graph for as long as it may run, or run on
// the stream: the graph's launch never uses freed memory.
func TestCaptureEndRacingLaunches(t *testing.T) {
	for _, procs := range []int{1, 4} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			f := setupGraph(t)
			s, err := f.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err)
			defer s.Close()
			for i := 0; i < 60; i++ {
				sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
				require.NoError(t, err)
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					for j := 0; ; j++ {
						buf, err := driver.Alloc[int32](f.ctx, 8)
						if !assert.NoError(t, err) {
							return
						}
						err = s.Launch(f.fill, g1, b1, buf, int32(j), int32(8))
						_ = buf.Close()
						if err != nil && !errors.Is(err, driver.ErrInvalidValue) { // an invalidated capture may refuse
							t.Errorf("launch: %v", err)
						}
						select {
						case <-stop:
							return
						default:
						}
						if j%4 == 3 {
							runtime.Gosched()
						}
					}
				}()
				time.Sleep(time.Duration(i%5) * 50 * time.Microsecond)
				g, err := sc.End()
				close(stop)
				<-done
				if err != nil {
					continue
				}
				gcAll()
				if assert.NoError(t, launchOnce(f, g)) {
					require.NoError(t, f.s.Synchronize())
				}
				require.NoError(t, g.Close())
			}
			require.NoError(t, s.Synchronize())
			noBadUses(t)
		})
	}
}

// After a sticky error, what an update retired is released (the context
// runs nothing any more), and no goroutine is left waiting.
func TestRetireAfterStickyErrorEnds(t *testing.T) {
	f := setupGraph(t)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	bufs := make([]*driver.Buffer[int32], 3)
	for i := range bufs {
		bufs[i], err = driver.Alloc[int32](f.ctx, 8)
		require.NoError(t, err)
	}
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	k, err := g.KernelWith(f.fill, graphCfg, bufs[0], int32(1), int32(8))
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, e.Launch(s))
	require.NoError(t, e.SetKernelWith(k, f.fill, graphCfg, bufs[1], int32(2), int32(8)))
	require.NoError(t, s.Synchronize())
	time.Sleep(20 * time.Millisecond)
	lifetime.Flush()
	g0 := runtime.NumGoroutine()
	allocs0 := fcall(t, "fake_live_allocations")

	fcall(t, "fake_set_sticky_error", 700)
	defer fcall(t, "fake_clear_sticky_error")
	assert.Error(t, e.Launch(s), "the context is dead")
	require.NoError(t, e.SetKernelWith(k, f.fill, graphCfg, bufs[2], int32(3), int32(8))) // retires bufs[1]'s set
	require.NoError(t, e.Close())
	require.NoError(t, g.Close())
	require.NoError(t, s.Close())
	for _, b := range bufs {
		require.NoError(t, b.Close())
	}
	ok := ltSettle(func() bool {
		return fcall(t, "fake_live_allocations") <= allocs0-3 && runtime.NumGoroutine() <= g0
	})
	assert.True(t, ok, "retired owners released and no goroutine waiting: %d allocations (were %d), %d goroutines (were %d)",
		fcall(t, "fake_live_allocations"), allocs0, runtime.NumGoroutine(), g0)
	// The frees failed with the fault, as they should: their errors are
	// this test's, not the next one's (go test -shuffle put a test that
	// expects lifetime.Errors empty right after this one).
	lifetime.Flush()
	_ = lifetime.Errors()
	fcall(t, "fake_clear_sticky_error")
	fcall(t, "fake_reset_counters")
}

// countingRelease counts its releases.
type countingRelease struct{ n atomic.Int32 }

func (c *countingRelease) Release() error { c.n.Add(1); return nil }

// An add refused before its owners entered a table releases them without
// counting them as released from one: lifetime's Live never drops.
func TestRefusedAddKeepsLiveCount(t *testing.T) {
	f := setupGraph(t)
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	other, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer other.Close()
	foreign, err := other.Empty()
	require.NoError(t, err)
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer buf.Close()
	lifetime.Flush()
	before := lifetime.ReadStats()
	o := new(countingRelease)
	_, err = g.After(foreign).Memset(graph.RawDevice(buf.Ptr(), 32, o), 1, 4)
	assert.ErrorIs(t, err, graph.ErrForeignNode)
	assert.EqualValues(t, 1, o.n.Load(), "the owner was released")
	_, err = g.After(foreign).KernelWith(f.fill, graphCfg, buf, int32(1), int32(8))
	assert.ErrorIs(t, err, graph.ErrForeignNode)
	after := lifetime.ReadStats()
	assert.Equal(t, before.Released, after.Released, "no owner was counted released from a table it never entered")
	assert.Equal(t, before.Live, after.Live)
}

// An executable outlives its graph: its per-node methods work after the
// graph's Close, on the nodes the graph had.
func TestExecNodeMethodsAfterGraphClose(t *testing.T) {
	f := setupGraph(t)
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer buf.Close()
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	k, err := g.KernelWith(f.fill, graphCfg, buf, int32(1), int32(8))
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, g.Close())
	gcAll()
	require.NoError(t, e.SetKernelWith(k, f.fill, graphCfg, buf, int32(5), int32(8)))
	require.NoError(t, e.SetEnabled(k, false))
	on, err := e.Enabled(k)
	require.NoError(t, err)
	assert.False(t, on)
	require.NoError(t, e.SetEnabled(k, true))
	require.NoError(t, e.Launch(f.s))
	out := make([]int32, 8)
	require.NoError(t, f.s.Synchronize())
	require.NoError(t, buf.CopyToHost(f.ctx.LegacyStream(), out))
	assert.Equal(t, int32(5), out[0])
	_, err = k.Kind()
	assert.ErrorIs(t, err, driver.ErrClosed, "the graph's own methods are closed")
	noBadUses(t)
}

// Memset nodes, and executable updates of memset and memcpy nodes, refuse
// device memory of another context than the node's; memcpy nodes copy
// between the memory of any two contexts, which makes the graph span both
// (graph_multi_test.go): then the per-node updates of its executables
// are refused, and so is device launch.
func TestCopyNodesAndAnotherContextsMemory(t *testing.T) {
	f := setupGraph(t)
	ctx2, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer ctx2.Close()
	mine, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer mine.Close()
	theirs, err := driver.Alloc[int32](ctx2, 8)
	require.NoError(t, err)
	defer theirs.Close()
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	_, err = g.Memset(graph.Device(theirs), 1, 4)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	set, err := g.Memset(graph.Device(mine), 1, 4)
	require.NoError(t, err)
	cp, err := g.After(set).Memcpy(graph.Slice(make([]int32, 8)), graph.Device(mine))
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	assert.ErrorIs(t, e.SetMemset(set, graph.Device(theirs), 2, 4), driver.ErrInvalidArgument)
	assert.ErrorIs(t, e.SetMemcpy(cp, graph.Slice(make([]int32, 8)), graph.Device(theirs)), driver.ErrInvalidArgument)
	require.NoError(t, e.SetMemset(set, graph.Device(mine), 2, 4), "a single-context executable is updated as ever")
	require.NoError(t, e.Launch(f.s))
	require.NoError(t, f.s.Synchronize())

	_, err = g.After(cp).Memcpy(graph.Device(theirs), graph.Device(mine))
	require.NoError(t, err, "a copy between two contexts")
	_, err = g.After(cp).Memcpy(graph.Device(mine), graph.Device(theirs))
	require.NoError(t, err, "and back")
	_, err = g.InstantiateWith(graph.InstantiateOptions{Flags: graph.DeviceLaunch})
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "device launch needs one context")
	e2, err := g.Instantiate()
	require.NoError(t, err)
	defer e2.Close()
	assert.ErrorIs(t, e2.SetMemset(set, graph.Device(mine), 3, 4), driver.ErrInvalidArgument)
	assert.ErrorIs(t, e2.SetMemcpy(cp, graph.Slice(make([]int32, 8)), graph.Device(mine)), driver.ErrInvalidArgument)
	require.NoError(t, e2.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	require.NoError(t, e.SetMemset(set, graph.Device(mine), 4, 4), "the first executable has one context still")
	noBadUses(t)
}

// An empty asynchronous copy with a nil stream is refused like every other
// stream-ordered call.
func TestEmptyAsyncCopyNeedsAStream(t *testing.T) {
	f := setupGraph(t)
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer buf.Close()
	assert.ErrorIs(t, buf.CopyToHostAsync(nil, nil), driver.ErrNilStream)
	assert.ErrorIs(t, buf.CopyFromHostAsync(nil, nil), driver.ErrNilStream)
	assert.NoError(t, buf.CopyToHostAsync(f.s, nil), "an empty copy on a stream does nothing")
}
