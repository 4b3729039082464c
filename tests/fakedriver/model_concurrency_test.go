//go:build linux

package fakedriver_test

// Tests of fakecuda's detection of concurrent calls on one graph or one
// executable graph (MODEL.md, "Concurrent graph calls"): CUDA does not
// synchronise graph objects internally, and the real driver crashes when,
// for example, cuGraphInstantiate(g) races cuGraphExecDestroy of an
// executable of g. The fake counts such races in
// fake_concurrent_graph_calls; fake_set_graph_call_delay_us widens the
// window in which they are seen.

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
)

// mcDelay sets the graph call delay for the rest of the test.
func mcDelay(t *testing.T, us uintptr) {
	t.Helper()
	fcall(t, "fake_set_graph_call_delay_us", us)
	t.Cleanup(func() { fcall(t, "fake_set_graph_call_delay_us", 0) })
}

// mcThread runs f on a goroutine locked to an OS thread on which ctx is
// current; the channel yields f's error (or the push's).
func mcThread(ctx cu.CUcontext, f func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cu.CtxPushCurrent(ctx); err != nil {
			done <- err
			return
		}
		defer cu.CtxPopCurrent(nil)
		done <- f()
	}()
	return done
}

// mcUntilSeen sets stop once fakecuda has counted a concurrent graph call,
// or after limit.
func mcUntilSeen(t *testing.T, stop *atomic.Bool, limit time.Duration) {
	t.Helper()
	end := time.Now().Add(limit)
	for fcall(t, "fake_concurrent_graph_calls") == 0 && time.Now().Before(end) {
		time.Sleep(100 * time.Microsecond)
	}
	stop.Store(true)
}

// mcInstantiateAndDestroy has one thread instantiate g and another destroy
// the executables it makes, until stop (or n executables each). lock, if
// set, serialises every graph call as the project must.
func mcInstantiateAndDestroy(ctx cu.CUcontext, g cu.CUgraph, n int, stop *atomic.Bool, lock *sync.Mutex) (<-chan error, <-chan error) {
	execs := make(chan cu.CUgraphExec, n)
	call := func(f func() error) error {
		if lock != nil {
			lock.Lock()
			defer lock.Unlock()
		}
		return f()
	}
	maker := mcThread(ctx, func() error {
		defer close(execs)
		for i := 0; i < n && !stop.Load(); i++ {
			var x cu.CUgraphExec
			if err := call(func() error { return cu.GraphInstantiateWithFlags(&x, g, 0) }); err != nil {
				return err
			}
			execs <- x
		}
		return nil
	})
	destroyer := mcThread(ctx, func() error {
		var first error
		for x := range execs { // every executable made is destroyed, stop or not
			if err := call(func() error { return cu.GraphExecDestroy(x) }); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
	return maker, destroyer
}

// (a) cuGraphInstantiate(g) racing cuGraphExecDestroy of g's executables,
// which crashes the real driver, is counted; the calls still work.
func TestModelConcurrentGraphInstantiateRacesExecDestroy(t *testing.T) {
	ctx := modelCtx(t)
	g := mGraph(t)
	mEmptyNode(t, g)
	execs := fcall(t, "fake_live_execs")
	mcDelay(t, 300)
	var stop atomic.Bool
	maker, destroyer := mcInstantiateAndDestroy(ctx, g, 1000, &stop, nil)
	mcUntilSeen(t, &stop, 30*time.Second)
	require.NoError(t, <-maker)
	require.NoError(t, <-destroyer)
	assert.Positive(t, fcall(t, "fake_concurrent_graph_calls"))
	assert.Regexp(t, `^cuGraph(InstantiateWithFlags|ExecDestroy): concurrent graph call: graph 0x[0-9a-f]+ in use by cuGraph(InstantiateWithFlags|ExecDestroy) on another thread$`, faketest.LastBadUse(t))
	assert.Equal(t, execs, fcall(t, "fake_live_execs"), "every executable made was destroyed")
	assert.Zero(t, fcall(t, "fake_bad_handle_uses"))
	require.NoError(t, cu.GraphDestroy(g))
}

// (b) The same calls serialised by the caller are not counted.
func TestModelConcurrentGraphSerialisedCallsAreNotCounted(t *testing.T) {
	ctx := modelCtx(t)
	g := mGraph(t)
	mEmptyNode(t, g)
	mcDelay(t, 200)
	var stop atomic.Bool
	var mu sync.Mutex
	maker, destroyer := mcInstantiateAndDestroy(ctx, g, 40, &stop, &mu)
	require.NoError(t, <-maker)
	require.NoError(t, <-destroyer)
	assert.Zero(t, fcall(t, "fake_concurrent_graph_calls"), faketest.LastBadUse(t))
	require.NoError(t, cu.GraphDestroy(g))
}

// (c) Calls on two unrelated graphs at once are fine (each graph's own
// calls are serialised).
func TestModelConcurrentGraphUnrelatedGraphsAreNotCounted(t *testing.T) {
	ctx := modelCtx(t)
	g1, g2 := mGraph(t), mGraph(t)
	mEmptyNode(t, g1)
	mEmptyNode(t, g2)
	mcDelay(t, 200)
	var stop atomic.Bool
	var mu1, mu2 sync.Mutex // each graph's calls serialised, the two graphs' not
	m1, d1 := mcInstantiateAndDestroy(ctx, g1, 30, &stop, &mu1)
	m2, d2 := mcInstantiateAndDestroy(ctx, g2, 30, &stop, &mu2)
	for _, done := range []<-chan error{m1, d1, m2, d2} {
		require.NoError(t, <-done)
	}
	assert.Zero(t, fcall(t, "fake_concurrent_graph_calls"), faketest.LastBadUse(t))
	require.NoError(t, cu.GraphDestroy(g1))
	require.NoError(t, cu.GraphDestroy(g2))
}

// (d) Launching an executable of g while another thread instantiates g
// (and destroys what it made) is not a violation: the real driver survives
// it, and a launch touches the executable only.
func TestModelConcurrentGraphLaunchAndInstantiateAreNotCounted(t *testing.T) {
	ctx := modelCtx(t)
	s := mStream(t)
	g := mGraph(t)
	mEmptyNode(t, g)
	a := mInstantiate(t, g, 0)
	mcDelay(t, 200)
	launcher := mcThread(ctx, func() error {
		for i := 0; i < 30; i++ {
			if err := cu.GraphLaunch(a, s); err != nil {
				return err
			}
		}
		return nil
	})
	var stop atomic.Bool
	maker := mcThread(ctx, func() error {
		for i := 0; i < 30 && !stop.Load(); i++ {
			var x cu.CUgraphExec
			if err := cu.GraphInstantiateWithFlags(&x, g, 0); err != nil {
				return err
			}
			if err := cu.GraphExecDestroy(x); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, <-launcher)
	require.NoError(t, <-maker)
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Zero(t, fcall(t, "fake_concurrent_graph_calls"), faketest.LastBadUse(t))
	require.NoError(t, cu.GraphExecDestroy(a))
	require.NoError(t, cu.GraphDestroy(g))
	require.NoError(t, cu.StreamDestroy(s))
}

// (e) Work captured into g (each captured call adds a node to g) while
// another thread adds nodes to g explicitly is counted.
func TestModelConcurrentGraphCaptureRacesExplicitAdds(t *testing.T) {
	ctx := modelCtx(t)
	s := mStream(t)
	g := mGraph(t)
	count := mHostFn(t, "fake_count_fn")
	mcDelay(t, 300)
	var stop atomic.Bool
	var captured atomic.Int64
	begun := make(chan struct{}) // the adder starts once the capture has: only captured work races it
	capturer := mcThread(ctx, func() error {
		err := cu.StreamBeginCaptureToGraph(s, g, nil, nil, 0, cu.CU_STREAM_CAPTURE_MODE_RELAXED)
		close(begun)
		if err != nil {
			return err
		}
		for i := 0; i < 1000 && !stop.Load() && err == nil; i++ {
			if err = cu.LaunchHostFunc(s, count, 1); err == nil {
				captured.Add(1)
			}
		}
		var out cu.CUgraph
		if e := cu.StreamEndCapture(s, &out); err == nil {
			err = e
		}
		if err == nil && out != g {
			err = cu.CUDA_ERROR_INVALID_VALUE
		}
		return err
	})
	var added atomic.Int64
	adder := mcThread(ctx, func() error {
		<-begun
		for i := 0; i < 1000 && !stop.Load(); i++ {
			var n cu.CUgraphNode
			if err := cu.GraphAddEmptyNode(&n, g, nil, 0); err != nil {
				return err
			}
			added.Add(1)
		}
		return nil
	})
	mcUntilSeen(t, &stop, 30*time.Second)
	require.NoError(t, <-capturer)
	require.NoError(t, <-adder)
	assert.Positive(t, fcall(t, "fake_concurrent_graph_calls"))
	assert.Regexp(t, `^(cuLaunchHostFunc|cuGraphAddEmptyNode): concurrent graph call: graph 0x[0-9a-f]+ (\(capturing\) )?in use by`, faketest.LastBadUse(t))
	var n uintptr
	require.NoError(t, cu.GraphGetNodes(g, nil, &n))
	assert.EqualValues(t, captured.Load()+added.Load(), n, "every call still added its node")
	assert.Zero(t, fcall(t, "fake_count", 1), "captured host functions do not run")
	require.NoError(t, cu.GraphDestroy(g))
	require.NoError(t, cu.StreamDestroy(s))
}

// Two launches of one executable from two threads are counted too (the
// project serialises them), and a thread's own nested or successive calls
// never are.
func TestModelConcurrentGraphLaunchesOfOneExec(t *testing.T) {
	ctx := modelCtx(t)
	s1, s2 := mStream(t), mStream(t)
	g := mGraph(t)
	mEmptyNode(t, g)
	x := mInstantiate(t, g, 0)
	mcDelay(t, 300)
	for i := 0; i < 3; i++ { // one thread, one call after another
		require.NoError(t, cu.GraphLaunch(x, s1))
	}
	assert.Zero(t, fcall(t, "fake_concurrent_graph_calls"))
	var stop atomic.Bool
	launch := func(s cu.CUstream) <-chan error {
		return mcThread(ctx, func() error {
			for i := 0; i < 1000 && !stop.Load(); i++ {
				if err := cu.GraphLaunch(x, s); err != nil {
					return err
				}
			}
			return nil
		})
	}
	l1, l2 := launch(s1), launch(s2)
	mcUntilSeen(t, &stop, 30*time.Second)
	require.NoError(t, <-l1)
	require.NoError(t, <-l2)
	assert.Positive(t, fcall(t, "fake_concurrent_graph_calls"))
	assert.Regexp(t, `^cuGraphLaunch: concurrent graph call: graph exec 0x[0-9a-f]+ in use by cuGraphLaunch on another thread$`, faketest.LastBadUse(t))
	require.NoError(t, cu.StreamSynchronize(s1))
	require.NoError(t, cu.StreamSynchronize(s2))
	fcall(t, "fake_reset_counters")
	assert.Zero(t, fcall(t, "fake_concurrent_graph_calls"), "reset")
	require.NoError(t, cu.GraphExecDestroy(x))
	require.NoError(t, cu.GraphDestroy(g))
	require.NoError(t, cu.StreamDestroy(s1))
	require.NoError(t, cu.StreamDestroy(s2))
}
