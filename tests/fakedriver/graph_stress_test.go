//go:build linux

package fakedriver_test

import (
	"runtime"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/internal/stress"
	"github.com/purecuda/cuda/lifetime"
)

// The graph Close stress (internal/stress/graph.go) against
// fakecuda: 64 goroutines race Close of graphs, clones, executables,
// streams, buffers, events and Args against every exported method of
// package graph. Nothing may panic, every error must be one the call may
// give, fakecuda must see no bad use and no two calls on one graph at once,
// and once everything is closed, every live counter is back where it
// started. PURECUDA_STRESS_DURATION sets how long (default 10 s, 2 s with
// -short).
func TestGraphStressCloseRaces(t *testing.T) {
	f := ltSetup(t) // checks bad uses, pins, callbacks and release errors at the end
	total := stressDuration(t)
	graphCallDelay(t, 2) // widens the windows in which two graph calls could overlap
	lifetime.Flush()
	counters := append([]string{"fake_live_graphs", "fake_live_execs", "fake_live_user_objects", "fake_live_nodes"}, fakeLive...)
	live := map[string]int64{}
	for _, c := range counters {
		live[c] = fcall(t, c)
	}
	// The host-function server starts with the first host function: start
	// it now, so that the goroutines can be compared.
	require.NoError(t, f.s.LaunchHostFunc(func() {}))
	require.NoError(t, f.s.Synchronize())
	lifetime.Flush()
	before := lifetime.ReadStats()
	goroutines0 := runtime.NumGoroutine()

	res, err := stress.RunGraph(f.ctx, f.fill, false, total, 64)
	require.NoError(t, err)
	for what, err := range res.Unexpected {
		t.Errorf("%s: unexpected error: %v", what, err)
	}
	t.Logf("%d rounds, %d calls (%d refused as closed)", res.Rounds, res.Calls, res.Closed)
	noConcurrentGraphCalls(t)
	assert.Zero(t, fcall(t, "fake_no_ctx_graph_calls"), "graph calls without a current context: %s", lastBad(t))

	require.NoError(t, f.ctx.Synchronize())
	assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	require.NoError(t, seam.TrimStaging(f.ctx)) // the blocks it keeps for copies of Go slices
	ok := ltSettle(func() bool {
		for _, c := range counters {
			if fcall(t, c) != live[c] {
				return false
			}
		}
		s := lifetime.ReadStats()
		return s.Objects == before.Objects && s.Tables == before.Tables && s.Live == before.Live &&
			s.Callbacks == before.Callbacks && runtime.NumGoroutine() <= goroutines0
	})
	if !ok {
		keys := append([]string(nil), counters...)
		sort.Strings(keys)
		for _, k := range keys {
			assert.Equal(t, live[k], fcall(t, k), "%s back to its start", k)
		}
		assert.Equal(t, before.Objects, lifetime.ReadStats().Objects, "lifetime back to its start: %+v, was %+v", lifetime.ReadStats(), before)
		assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines0, "goroutines back to where they were")
	}
	assert.Zero(t, lifetime.ReadStats().Kept-before.Kept, "nothing kept for good")
}

// TestGraphStressCoversEveryMethod: the graph stress calls every exported
// method of package graph (or says why not).
func TestGraphStressCoversEveryMethod(t *testing.T) {
	covered := map[string]bool{}
	for _, op := range stress.GraphOps() {
		for _, c := range op.Covers {
			covered[c] = true
		}
	}
	for _, m := range stress.GraphMethods() {
		if stress.GraphExempt[m] != "" {
			continue
		}
		assert.True(t, covered[m], "the graph Close stress does not call %s: add it to stress.GraphOps", m)
	}
	for _, fn := range []string{"New", "Capture", "BeginCapture", "IsCapturing", "Device", "Host", "Slice", "Raw"} {
		assert.True(t, covered[fn], "the graph Close stress does not call graph.%s", fn)
	}
}
