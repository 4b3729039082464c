package graph_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/stress"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nvrtc"
)

// TestGPUGraphStressCloseRaces runs the graph Close stress
// (internal/stress/graph.go; tests/fakedriver runs it against fakecuda) on
// the GPU, conditional nodes included: 64 goroutines race Close against
// every exported method of package graph. Nothing may crash or panic, every
// error must be one the call may give, and once everything is closed the
// lifetime counters are back where they started. PURECUDA_STRESS_DURATION
// sets how long (default 10 s, 2 s with -short).
func TestGPUGraphStressCloseRaces(t *testing.T) {
	gputest.Require(t)
	total := 10 * time.Second
	if testing.Short() {
		total = 2 * time.Second
	}
	if s := os.Getenv("PURECUDA_STRESS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err)
		total = d
	}
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	defer ctx.Close()
	res, err := nvrtc.Compile(`extern "C" __global__ void fill(int *out, int v, int n) {
		int i = blockIdx.x * blockDim.x + threadIdx.x;
		if (i < n) out[i] = v + i;
	}`, nvrtc.Options{Arch: dev.Arch()})
	require.NoError(t, err)
	mod, err := ctx.LoadModule(res.CUBIN)
	require.NoError(t, err)
	defer mod.Close()
	fill, err := mod.Function("fill")
	require.NoError(t, err)
	// Handles an earlier run dropped are released by cleanups at some
	// collection: let that happen before the baseline, not during the run.
	for range 3 {
		runtime.GC()
		lifetime.Flush()
	}
	before := lifetime.ReadStats()

	r, err := stress.RunGraph(ctx, fill, true, total, 64)
	require.NoError(t, err)
	for what, err := range r.Unexpected {
		t.Errorf("%s: unexpected error: %v", what, err)
	}
	t.Logf("%d rounds, %d calls (%d refused as closed)", r.Rounds, r.Calls, r.Closed)
	require.NoError(t, ctx.Synchronize())
	ok := false
	for deadline := time.Now().Add(20 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		runtime.GC()
		lifetime.Flush()
		s := lifetime.ReadStats()
		ok = s.Objects == before.Objects && s.Tables == before.Tables && s.Live == before.Live && s.Callbacks == before.Callbacks
	}
	assert.True(t, ok, "lifetime back to %+v: %+v", before, lifetime.ReadStats())
	assert.Equal(t, before.Kept, lifetime.ReadStats().Kept, "nothing kept for good")
}
