package cu_test

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/gputest"
)

// TestGPUResolveAll resolves every generated entry point on this driver.
func TestGPUResolveAll(t *testing.T) {
	gputest.Require(t)
	path, version, err := cu.Load()
	require.NoError(t, err)
	names := map[string]bool{}
	failed := 0
	for _, r := range cu.ResolveAll() {
		names[r.Func] = true
		if r.Err != nil {
			failed++
			t.Errorf("%s (ABI %d) does not resolve: %v", r.Func, r.ABI, r.Err)
		}
	}
	t.Logf("driver %s (CUDA %s): %d entry points of %d functions, %d resolved, %d failed",
		path, cu.FormatVersion(version), len(cu.ResolveAll()), len(names), len(cu.ResolveAll())-failed, failed)
	assert.Len(t, names, 440)
}

func cstr(s string) *byte { b := append([]byte(s), 0); return &b[0] }

type rawModule struct {
	mod         cu.CUmodule
	empty, add4 cu.CUfunction
	stream      cu.CUstream
}

func loadRaw(tb testing.TB) *rawModule {
	tb.Helper()
	gputest.PrimaryContext(tb)
	m := &rawModule{}
	ptx := append([]byte(gputest.EmptyKernelPTX), 0)
	require.NoError(tb, cu.ModuleLoadData(&m.mod, unsafe.Pointer(&ptx[0])))
	require.NoError(tb, cu.ModuleGetFunction(&m.empty, m.mod, cstr("empty")))
	require.NoError(tb, cu.ModuleGetFunction(&m.add4, m.mod, cstr("add4")))
	require.NoError(tb, cu.StreamCreate(&m.stream, uint32(cu.CU_STREAM_NON_BLOCKING)))
	tb.Cleanup(func() {
		_ = cu.StreamDestroy(m.stream)
		_ = cu.ModuleUnload(m.mod)
	})
	return m
}

// TestGPURawLaunch launches through the raw table: an empty kernel, and one
// whose four arguments are checked by the value it writes.
func TestGPURawLaunch(t *testing.T) {
	m := loadRaw(t)
	require.NoError(t, cu.LaunchKernel(m.empty, 1, 1, 1, 1, 1, 1, 0, m.stream, nil, nil))
	require.NoError(t, cu.StreamSynchronize(m.stream))

	var dptr cu.CUdeviceptr
	require.NoError(t, cu.MemAlloc(&dptr, 4))
	defer cu.MemFree(dptr)
	a, b, c := uint32(40), uint32(1), uint32(1)
	args := []unsafe.Pointer{unsafe.Pointer(&dptr), unsafe.Pointer(&a), unsafe.Pointer(&b), unsafe.Pointer(&c)}
	require.NoError(t, cu.LaunchKernel(m.add4, 1, 1, 1, 1, 1, 1, 0, m.stream, &args[0], nil))
	require.NoError(t, cu.StreamSynchronize(m.stream))
	var out uint32
	require.NoError(t, cu.MemcpyDtoH(unsafe.Pointer(&out), dptr, 4))
	assert.EqualValues(t, 42, out)

	// A failing call comes back as an *Error naming the function.
	err := cu.LaunchKernel(m.empty, 0, 1, 1, 1, 1, 1, 0, m.stream, nil, nil)
	assert.ErrorIs(t, err, cu.CUDA_ERROR_INVALID_VALUE)
	assert.Contains(t, err.Error(), "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1)")
}

// TestGPUFloatArguments exercises the RegisterFunc path for functions that
// take floats by value, reading the values back through pointers.
func TestGPUFloatArguments(t *testing.T) {
	gputest.PrimaryContext(t)
	var tex cu.CUtexref
	require.NoError(t, cu.TexRefCreate(&tex))
	defer cu.TexRefDestroy(tex)
	require.NoError(t, cu.TexRefSetMipmapLevelClamp(tex, 1.5, 7.25))
	require.NoError(t, cu.TexRefSetMipmapLevelBias(tex, -2.5))
	var lo, hi, bias float32
	require.NoError(t, cu.TexRefGetMipmapLevelClamp(&lo, &hi, tex))
	require.NoError(t, cu.TexRefGetMipmapLevelBias(&bias, tex))
	assert.Equal(t, float32(1.5), lo)
	assert.Equal(t, float32(7.25), hi)
	assert.Equal(t, float32(-2.5), bias)
}

// TestGPUStructByValue exercises the by-value paths: an 8-byte CUmemLocation
// (cuMemAdvise) and a 64-byte IPC handle (cuIpcOpenEventHandle).
func TestGPUStructByValue(t *testing.T) {
	gputest.PrimaryContext(t)
	var managed cu.CUdeviceptr
	require.NoError(t, cu.MemAllocManaged(&managed, 1<<20, uint32(cu.CU_MEM_ATTACH_GLOBAL)))
	defer cu.MemFree(managed)
	// Both fields of the 8-byte struct must arrive: a device location reads
	// back as its ordinal, a host location as CU_DEVICE_CPU (-1).
	for _, tc := range []struct {
		loc  cu.CUmemLocation
		want int32
	}{
		{cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE, Id: 0}, 0},
		{cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_HOST, Id: 0}, int32(cu.CU_DEVICE_CPU)},
		{cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE, Id: 0}, 0},
	} {
		require.NoError(t, cu.MemAdvise(managed, 1<<20, cu.CU_MEM_ADVISE_SET_PREFERRED_LOCATION, tc.loc))
		var got int32 = -100
		require.NoError(t, cu.MemRangeGetAttribute(unsafe.Pointer(&got), 4, cu.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, managed, 1<<20))
		assert.Equal(t, tc.want, got, "location %+v", tc.loc)
	}
	bad := cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE, Id: 9999}
	assert.Error(t, cu.MemAdvise(managed, 1<<20, cu.CU_MEM_ADVISE_SET_PREFERRED_LOCATION, bad))

	var ev cu.CUevent
	require.NoError(t, cu.EventCreate(&ev, uint32(cu.CU_EVENT_INTERPROCESS|cu.CU_EVENT_DISABLE_TIMING)))
	defer cu.EventDestroy(ev)
	var h cu.CUipcEventHandle
	require.NoError(t, cu.IpcGetEventHandle(&h, ev))
	// The driver reads the 64-byte handle passed by value: a real handle gets
	// past the lookup and is refused only because this process made it
	// (INVALID_CONTEXT), while a zeroed one fails to map (MAP_FAILED).
	var opened cu.CUevent
	assert.ErrorIs(t, cu.IpcOpenEventHandle(&opened, h), cu.CUDA_ERROR_INVALID_CONTEXT)
	var zero cu.CUipcEventHandle
	assert.ErrorIs(t, cu.IpcOpenEventHandle(&opened, zero), cu.CUDA_ERROR_MAP_FAILED)
	runtime.KeepAlive(h)
}

// TestGPUZeroAllocs: a raw launch and a trivial call allocate nothing.
func TestGPUZeroAllocs(t *testing.T) {
	if gputest.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	m := loadRaw(t)
	var dptr cu.CUdeviceptr
	require.NoError(t, cu.MemAlloc(&dptr, 4))
	defer cu.MemFree(dptr)
	x, y, z := uint32(1), uint32(2), uint32(3)
	args := []unsafe.Pointer{unsafe.Pointer(&dptr), unsafe.Pointer(&x), unsafe.Pointer(&y), unsafe.Pointer(&z)}
	var ctx cu.CUcontext
	allocs := testing.AllocsPerRun(1000, func() {
		_ = cu.LaunchKernel(m.add4, 1, 1, 1, 1, 1, 1, 0, m.stream, &args[0], nil)
		_ = cu.CtxGetCurrent(&ctx)
	})
	assert.Zero(t, allocs)
	require.NoError(t, cu.StreamSynchronize(m.stream))
}

func BenchmarkRawLaunchEmpty(b *testing.B) {
	m := loadRaw(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := cu.LaunchKernel(m.empty, 1, 1, 1, 1, 1, 1, 0, m.stream, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := cu.StreamSynchronize(m.stream); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRawLaunch4Args(b *testing.B) {
	m := loadRaw(b)
	var dptr cu.CUdeviceptr
	require.NoError(b, cu.MemAlloc(&dptr, 4))
	defer cu.MemFree(dptr)
	x, y, z := uint32(1), uint32(2), uint32(3)
	args := []unsafe.Pointer{unsafe.Pointer(&dptr), unsafe.Pointer(&x), unsafe.Pointer(&y), unsafe.Pointer(&z)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := cu.LaunchKernel(m.add4, 1, 1, 1, 1, 1, 1, 0, m.stream, &args[0], nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := cu.StreamSynchronize(m.stream); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRawCtxGetCurrent(b *testing.B) {
	gputest.PrimaryContext(b)
	var ctx cu.CUcontext
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := cu.CtxGetCurrent(&ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawCtxGetLimit is the raw call behind driver's
// BenchmarkContextBound, with the context already current on a locked thread.
func BenchmarkRawCtxGetLimit(b *testing.B) {
	gputest.PrimaryContext(b)
	var v uintptr
	b.ReportAllocs()
	for b.Loop() {
		if err := cu.CtxGetLimit(&v, cu.CU_LIMIT_STACK_SIZE); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawLaunchEmptyBatched syncs after every 256 launches, like the C
// baseline's "(sync/256)" line.
func BenchmarkRawLaunchEmptyBatched(b *testing.B) {
	m := loadRaw(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := cu.LaunchKernel(m.empty, 1, 1, 1, 1, 1, 1, 0, m.stream, nil, nil); err != nil {
			b.Fatal(err)
		}
		if i++; i%256 == 0 {
			if err := cu.StreamSynchronize(m.stream); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := cu.StreamSynchronize(m.stream); err != nil {
		b.Fatal(err)
	}
}
