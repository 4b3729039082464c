package graph

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest/gpuenv"
	"github.com/purecuda/cuda/lifetime"
)

const kernelSrc = `
extern "C" {
__global__ void empty() {}
__global__ void fill(int* out, int v, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = v + i;
}
__global__ void scale(float* x, float a, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= a;
}
__global__ void addTo(const int* a, int* b, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) b[i] += a[i];
}
__global__ void incr(unsigned long long* x) { atomicAdd(x, 1ULL); }
__global__ void spin(long long cycles) { long long t = clock64(); while (clock64() - t < cycles) {} }
}
`

// kernels is this package's GPU fixture: kernelSrc, compiled and loaded
// once per test binary.
var kernels = gpuenv.Shared(kernelSrc, "empty", "fill", "scale", "addTo", "incr", "spin")

// testEnv is the shared gpuenv.Env under the names this package's tests use.
type testEnv struct {
	dev *driver.Device
	ctx *driver.Context
	mod *driver.Module
	ptx []byte
	fn  map[string]*driver.Function
}

// setup returns the shared environment and a fresh non-blocking stream.
func setup(tb testing.TB) (*testEnv, *driver.Stream) {
	tb.Helper()
	e, s := gpuenv.Setup(tb, kernels)
	return &testEnv{dev: e.Dev, ctx: e.Ctx, mod: e.Mod, ptx: e.PTX, fn: e.Fn}, s
}

// cfg is a 1-D launch over n threads in blocks of 256.
func cfg(n int) driver.LaunchConfig {
	return driver.LaunchConfig{Grid: driver.Grid((n + 255) / 256), Block: driver.Block(256)}
}

// collect runs the garbage collector and the cleanups it queues, and
// drains the release queue.
func collect() {
	for i := 0; i < 4; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	lifetime.Flush()
}

// flushWait bounds the waits a GPU test could otherwise hang in for good.
const flushWait = 2 * time.Minute

// stackWithin runs f and fails the test if f has not returned after d, having
// written every goroutine's stack to stderr first (the test's own log is
// lost if its deferred calls hang as well): a wait that never ends then
// shows where everything waits, instead of hanging the run. f runs on
// another goroutine, so it must not fail the test itself (no require).
func stackWithin(tb testing.TB, d time.Duration, what string, f func()) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		fmt.Fprintf(os.Stderr, "%s: %s: still waiting after %v; every goroutine:\n", tb.Name(), what, d)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		tb.Fatalf("%s: still waiting after %v (every goroutine's stack is on stderr)", what, d)
	}
}

// flush is lifetime.Flush, bounded by flushWait (stackWithin).
func flush(tb testing.TB) {
	tb.Helper()
	stackWithin(tb, flushWait, "lifetime.Flush", lifetime.Flush)
}

// eventually waits up to 30 s for cond, flushing the release queue between
// tries: user-object destructors run on CUDA's own threads after the work
// that used them, so what a graph held is released a little after Close.
func eventually(tb testing.TB, cond func() bool, msg string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		flush(tb)
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting: %s (stats %+v)", msg, lifetime.ReadStats())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func must[T any](tb testing.TB) func(T, error) T {
	return func(v T, err error) T {
		tb.Helper()
		require.NoError(tb, err)
		return v
	}
}

// one is a launch of a single thread.
var one = driver.LaunchConfig{Grid: driver.Grid(1), Block: driver.Block(1)}

// memFree is the device memory free in ctx once its work is done.
func memFree(t *testing.T, ctx *driver.Context) int {
	t.Helper()
	require.NoError(t, ctx.Synchronize())
	f, _, err := ctx.MemGetInfo()
	require.NoError(t, err)
	return f
}
