package driver_test

import (
	"testing"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest/gpuenv"
)

const kernelSrc = `
struct Params { int a; float b; long long c; double d; };
extern "C" {
__global__ void empty() {}
__global__ void add4(unsigned* out, unsigned a, unsigned b, unsigned c) { *out = a + b + c; }
__global__ void vadd(const float* a, const float* b, float* c, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) c[i] = a[i] + b[i];
}
__global__ void structArg(Params p, double* out) { out[0] = p.a; out[1] = p.b; out[2] = (double)p.c; out[3] = p.d; }
__global__ void fill(int* out, int v, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = v + i;
}
__global__ void incr(unsigned long long* x) { atomicAdd(x, 1ULL); }
__global__ void spin(long long cycles) { long long t = clock64(); while (clock64() - t < cycles) {} }
__global__ void many(long long* out, int a, char b, short c, long long d, float e, double f, Params p,
                     unsigned g, unsigned char h, long long i) {
	out[0] = a + b + c + d + (long long)e + (long long)f + p.a + (long long)p.b + p.c + (long long)p.d + g + h + i;
}
__device__ int answer = 42;
}
`

// params matches struct Params in kernelSrc.
type params struct {
	A int32
	B float32
	C int64
	D float64
}

// kernels is this package's GPU fixture: kernelSrc, compiled and loaded
// once per test binary.
var kernels = gpuenv.Shared(kernelSrc, "empty", "add4", "vadd", "structArg", "fill", "incr", "spin", "many")

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
