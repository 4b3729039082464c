package nvrtc_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/gputest/gpuenv"
	"github.com/purecuda/cuda/nvrtc"
)

// requireNVRTC skips without libnvrtc (fails under PURECUDA_REQUIRE_GPU).
func requireNVRTC(tb testing.TB) {
	tb.Helper()
	if _, err := nvrtc.LibraryPath(); err != nil {
		if gputest.Required() {
			tb.Fatalf("PURECUDA_REQUIRE_GPU is set but NVRTC does not load: %v", err)
		}
		tb.Skipf("no NVRTC: %v", err)
	}
}

// primary is device 0's primary context, shared by the GPU tests.
var primary = gpuenv.Shared("")

func gpu(tb testing.TB) (*driver.Context, *driver.Stream) {
	tb.Helper()
	requireNVRTC(tb)
	e, s := gpuenv.Setup(tb, primary)
	return e.Ctx, s
}

func TestVersionAndArchs(t *testing.T) {
	requireNVRTC(t)
	major, minor, err := nvrtc.Version()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, major, 12)
	archs, err := nvrtc.SupportedArchs()
	require.NoError(t, err)
	assert.Contains(t, archs, 90)
	path, _ := nvrtc.LibraryPath()
	t.Logf("NVRTC %d.%d at %s, %d architectures: %v", major, minor, path, len(archs), archs)
}

const scaleSrc = `
extern "C" __global__ void scale(float* x, float k, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= k;
}`

func TestCompileLoadLaunch(t *testing.T) {
	ctx, s := gpu(t)
	res, err := nvrtc.Compile(scaleSrc, nvrtc.Options{Arch: ctx.Device().Arch(), Std: "c++17"})
	require.NoError(t, err)
	assert.NotEmpty(t, res.PTX)
	assert.Contains(t, string(res.PTX), ".entry scale")
	assert.NotEmpty(t, res.CUBIN, "a real architecture gives a CUBIN")
	mod, err := ctx.LoadModule(res.Image())
	require.NoError(t, err)
	defer mod.Close()
	fn, err := mod.Function("scale")
	require.NoError(t, err)
	const n = 1000
	buf, err := driver.Alloc[float32](ctx, n)
	require.NoError(t, err)
	defer buf.Close()
	host := make([]float32, n)
	for i := range host {
		host[i] = float32(i)
	}
	require.NoError(t, buf.CopyFromHost(ctx.LegacyStream(), host))
	require.NoError(t, s.Launch(fn, driver.Grid((n+255)/256), driver.Block(256), buf, float32(2.5), int32(n)))
	require.NoError(t, s.Synchronize())
	require.NoError(t, buf.CopyToHost(ctx.LegacyStream(), host))
	for i, v := range host {
		require.Equal(t, float32(i)*2.5, v, "element %d", i)
	}

	// The same through PTX only, JIT-compiled by the driver.
	virt, err := nvrtc.Compile(scaleSrc, nvrtc.Options{Arch: "compute_75"})
	require.NoError(t, err)
	assert.Empty(t, virt.CUBIN)
	mod2, err := ctx.LoadModule(virt.Image())
	require.NoError(t, err)
	require.NoError(t, mod2.Close())
}

func TestTemplateNameExpression(t *testing.T) {
	ctx, s := gpu(t)
	src := `
template <typename T, int N>
__global__ void mul(T* x) { x[threadIdx.x] *= N; }
`
	exprs := []string{"mul<float, 4>", "mul<int, 3>"}
	mod, res, err := ctx.CompileModule(src, nvrtc.Options{NameExpressions: exprs})
	require.NoError(t, err)
	defer mod.Close()
	require.Len(t, res.LoweredNames, 2)
	lowered := res.LoweredNames["mul<float, 4>"]
	assert.True(t, strings.HasPrefix(lowered, "_Z"), "mangled: %s", lowered)
	fn, err := mod.Function(lowered)
	require.NoError(t, err)
	buf, err := driver.Alloc[float32](ctx, 8)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, buf.CopyFromHost(ctx.LegacyStream(), []float32{1, 2, 3, 4, 5, 6, 7, 8}))
	require.NoError(t, s.Launch(fn, driver.Grid(1), driver.Block(8), buf))
	require.NoError(t, s.Synchronize())
	out := make([]float32, 8)
	require.NoError(t, buf.CopyToHost(ctx.LegacyStream(), out))
	assert.Equal(t, []float32{4, 8, 12, 16, 20, 24, 28, 32}, out)

	fnInt, err := mod.Function(res.LoweredNames["mul<int, 3>"])
	require.NoError(t, err)
	ibuf, err := driver.Alloc[int32](ctx, 2)
	require.NoError(t, err)
	defer ibuf.Close()
	require.NoError(t, ibuf.CopyFromHost(ctx.LegacyStream(), []int32{5, -2}))
	require.NoError(t, s.Launch(fnInt, driver.Grid(1), driver.Block(2), ibuf))
	require.NoError(t, s.Synchronize())
	iout := make([]int32, 2)
	require.NoError(t, ibuf.CopyToHost(ctx.LegacyStream(), iout))
	assert.Equal(t, []int32{15, -6}, iout)
}

func TestInMemoryHeaderAndDefines(t *testing.T) {
	ctx, s := gpu(t)
	src := `
#include "factor.h"
extern "C" __global__ void k(int* out) { *out = FACTOR * OFFSET; }
`
	mod, _, err := ctx.CompileModule(src, nvrtc.Options{
		Headers: map[string]string{"factor.h": "#define FACTOR 6\n"},
		Defines: map[string]string{"OFFSET": "7"},
	})
	require.NoError(t, err)
	defer mod.Close()
	fn, err := mod.Function("k")
	require.NoError(t, err)
	out, err := driver.Alloc[int32](ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	require.NoError(t, s.Launch(fn, driver.Grid(1), driver.Block(1), out))
	require.NoError(t, s.Synchronize())
	got := make([]int32, 1)
	require.NoError(t, out.CopyToHost(ctx.LegacyStream(), got))
	assert.Equal(t, int32(42), got[0])
}

func TestSyntaxErrorLog(t *testing.T) {
	requireNVRTC(t)
	src := "extern \"C\" __global__ void k(int* p) {\n  int a = 1;\n  *p = a + undefined_name;\n}\n"
	_, err := nvrtc.Compile(src, nvrtc.Options{Name: "broken.cu"})
	require.Error(t, err)
	assert.ErrorIs(t, err, nvrtc.ErrCompilation)
	var ce *nvrtc.CompileError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Log, "broken.cu(3)")
	assert.Contains(t, ce.Log, "undefined_name")
	assert.Contains(t, err.Error(), "broken.cu(3)")
}

func TestWarningsReachTheLog(t *testing.T) {
	requireNVRTC(t)
	res, err := nvrtc.Compile("extern \"C\" __global__ void k() { int unused_variable; }\n", nvrtc.Options{})
	require.NoError(t, err)
	assert.Contains(t, res.Log, "unused_variable", "a warning on success is kept")
}

func TestInvalidOptionAndArch(t *testing.T) {
	requireNVRTC(t)
	_, err := nvrtc.Compile(scaleSrc, nvrtc.Options{Extra: []string{"--no-such-option"}})
	assert.ErrorIs(t, err, nvrtc.ErrInvalidOption)
	_, err = nvrtc.Compile(scaleSrc, nvrtc.Options{Arch: "sm_12"})
	require.Error(t, err)
	assert.ErrorIs(t, err, nvrtc.ErrInvalidOption)
	t.Logf("unknown architecture: %v", err)
}

func TestNameExpressionNotInSource(t *testing.T) {
	requireNVRTC(t)
	_, err := nvrtc.Compile(scaleSrc, nvrtc.Options{NameExpressions: []string{"no_such_kernel<int>"}})
	require.Error(t, err)
	assert.ErrorIs(t, err, nvrtc.ErrCompilation)
	assert.Contains(t, err.Error(), "no_such_kernel", "the log names the expression")
}

func TestLTO(t *testing.T) {
	requireNVRTC(t)
	res, err := nvrtc.Compile(scaleSrc, nvrtc.Options{Arch: "sm_90", LTO: true})
	require.NoError(t, err)
	assert.NotEmpty(t, res.LTOIR)
	assert.Empty(t, res.CUBIN)
}

func TestConcurrentCompiles(t *testing.T) {
	ctx, _ := gpu(t)
	const workers = 16
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = func() error {
				s, err := ctx.NewStream(driver.StreamNonBlocking)
				if err != nil {
					return err
				}
				defer s.Close()
				src := fmt.Sprintf("extern \"C\" __global__ void k(int* out) { *out = VALUE + %d; }\n", w)
				mod, _, err := ctx.CompileModule(src, nvrtc.Options{Defines: map[string]string{"VALUE": fmt.Sprint(w * 100)}})
				if err != nil {
					return err
				}
				defer mod.Close()
				fn, err := mod.Function("k")
				if err != nil {
					return err
				}
				out, err := driver.Alloc[int32](ctx, 1)
				if err != nil {
					return err
				}
				defer out.Close()
				if err := s.Launch(fn, driver.Grid(1), driver.Block(1), out); err != nil {
					return err
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				got := make([]int32, 1)
				if err := out.CopyToHost(s, got); err != nil {
					return err
				}
				if got[0] != int32(w*101) {
					return fmt.Errorf("worker %d: got %d, want %d", w, got[0], w*101)
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
}

func BenchmarkCompileSmallKernel(b *testing.B) {
	requireNVRTC(b)
	for i := 0; i < b.N; i++ {
		if _, err := nvrtc.Compile(scaleSrc, nvrtc.Options{Arch: "sm_90"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompileSmallKernelPTX(b *testing.B) {
	requireNVRTC(b)
	for i := 0; i < b.N; i++ {
		if _, err := nvrtc.Compile(scaleSrc, nvrtc.Options{Arch: "compute_90"}); err != nil {
			b.Fatal(err)
		}
	}
}
