//go:build linux

package cublasraw_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/faketest"
)

// How fakecublas queues, captures and checks: stream order, pointer
// modes, bad uses, invalid values.

// sgemm2 queues C = alpha A B + beta C for 2x2 matrices on e's handle.
func sgemm2(e *fenv, alpha, a, b, beta, c uintptr) error {
	return cublasraw.Sgemm(e.h, cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_OP_N, 2, 2, 2, alpha, a, 2, b, 2, beta, c, 2)
}

var (
	identity = []float32{1, 0, 0, 1}
	mat      = []float32{1, 2, 3, 4}
)

// TestFakeHandleState: defaults, setters and getters, refused modes,
// versions and status names; a destroyed handle is a bad use.
func TestFakeHandleState(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	var h cublasraw.Handle
	require.NoError(t, cublasraw.Create(&h))
	assert.Equal(t, int64(2), faketest.CUBLAS(t, "fake_cublas_live_handles"))
	var s cublasraw.Stream
	require.NoError(t, cublasraw.GetStream(h, &s))
	assert.Zero(t, s, "the legacy stream by default")
	require.NoError(t, cublasraw.SetStream(h, cublasraw.Stream(e.s)))
	require.NoError(t, cublasraw.GetStream(h, &s))
	assert.Equal(t, cublasraw.Stream(e.s), s)
	var pm cublasraw.PointerMode
	require.NoError(t, cublasraw.GetPointerMode(h, &pm))
	assert.Equal(t, cublasraw.CUBLAS_POINTER_MODE_HOST, pm)
	require.NoError(t, cublasraw.SetPointerMode(h, cublasraw.CUBLAS_POINTER_MODE_DEVICE))
	require.NoError(t, cublasraw.GetPointerMode(h, &pm))
	assert.Equal(t, cublasraw.CUBLAS_POINTER_MODE_DEVICE, pm)
	assert.ErrorIs(t, cublasraw.SetPointerMode(h, 2), cublasraw.CUBLAS_STATUS_INVALID_VALUE)
	require.NoError(t, cublasraw.SetMathMode(h, cublasraw.CUBLAS_TF32_TENSOR_OP_MATH|cublasraw.CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))
	var mm cublasraw.Math
	require.NoError(t, cublasraw.GetMathMode(h, &mm))
	assert.Equal(t, cublasraw.CUBLAS_TF32_TENSOR_OP_MATH|cublasraw.CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, mm)
	assert.ErrorIs(t, cublasraw.SetMathMode(h, 7), cublasraw.CUBLAS_STATUS_INVALID_VALUE)
	require.NoError(t, cublasraw.SetAtomicsMode(h, cublasraw.CUBLAS_ATOMICS_ALLOWED))
	var am cublasraw.AtomicsMode
	require.NoError(t, cublasraw.GetAtomicsMode(h, &am))
	assert.Equal(t, cublasraw.CUBLAS_ATOMICS_ALLOWED, am)
	var v int32
	require.NoError(t, cublasraw.GetVersion(h, &v))
	assert.Equal(t, int32(cublasraw.CUBLAS_VERSION), v)
	name, err := cublasraw.GetStatusName(cublasraw.CUBLAS_STATUS_INVALID_VALUE)
	require.NoError(t, err)
	assert.Equal(t, byte('C'), *name)
	assert.ErrorIs(t, cublasraw.GetStream(h, nil), cublasraw.CUBLAS_STATUS_INVALID_VALUE)
	assert.ErrorIs(t, cublasraw.GetStream(0, &s), cublasraw.CUBLAS_STATUS_NOT_INITIALIZED)

	require.NoError(t, cublasraw.Destroy(h))
	assert.Equal(t, int64(1), faketest.CUBLAS(t, "fake_cublas_live_handles"))
	assert.ErrorIs(t, cublasraw.SetStream(h, 0), cublasraw.CUBLAS_STATUS_NOT_INITIALIZED)
	expectBad(t, 1, "cublasSetStream_v2: destroyed or unknown handle")
}

// TestFakeInvalidValues: arguments cuBLAS refuses with
// CUBLAS_STATUS_INVALID_VALUE (or NOT_SUPPORTED) are refused before
// anything is queued, and count no bad use.
func TestFakeInvalidValues(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	a, c := upload(t, mat), upload(t, identity)
	_, one := host(float32(1))
	op := cublasraw.CUBLAS_OP_N
	inval := cublasraw.CUBLAS_STATUS_INVALID_VALUE
	for name, err := range map[string]error{
		"m < 0":          cublasraw.Sgemm(e.h, op, op, -1, 2, 2, one, a, 2, a, 2, one, c, 2),
		"k < 0":          cublasraw.Sgemm(e.h, op, op, 2, 2, -1, one, a, 2, a, 2, one, c, 2),
		"lda < m":        cublasraw.Sgemm(e.h, op, op, 2, 2, 2, one, a, 1, a, 2, one, c, 2),
		"ldb < k":        cublasraw.Sgemm(e.h, op, cublasraw.CUBLAS_OP_T, 2, 3, 2, one, a, 2, a, 2, one, c, 2),
		"ldc < m":        cublasraw.Sgemm(e.h, op, op, 2, 2, 2, one, a, 2, a, 2, one, c, 1),
		"bad op":         cublasraw.Sgemm(e.h, 7, op, 2, 2, 2, one, a, 2, a, 2, one, c, 2),
		"nil alpha":      cublasraw.Sgemm(e.h, op, op, 2, 2, 2, 0, a, 2, a, 2, one, c, 2),
		"batch < 0":      cublasraw.SgemmStridedBatched(e.h, op, op, 2, 2, 2, one, a, 2, 0, a, 2, 0, one, c, 2, 0, -1),
		"gemv incx 0":    cublasraw.Sgemv(e.h, op, 2, 2, one, a, 2, c, 0, one, c, 1),
		"gemv lda":       cublasraw.Sgemv(e.h, op, 3, 1, one, a, 2, c, 1, one, c, 1),
		"ger incy 0":     cublasraw.Sger(e.h, 2, 2, one, c, 1, c, 0, a, 2),
		"trsv uplo full": cublasraw.Strsv(e.h, cublasraw.CUBLAS_FILL_MODE_FULL, op, 0, 2, a, 2, c, 1),
		"trsm ldb":       cublasraw.Strsm(e.h, 0, 0, op, 0, 3, 1, one, a, 3, c, 2),
		"syrk n < 0":     cublasraw.Ssyrk(e.h, 0, op, -1, 2, one, a, 2, one, c, 2),
		"dot nil result": cublasraw.Sdot(e.h, 2, c, 1, c, 1, 0),
		"workspace 8":    cublasraw.SetWorkspace(e.h, a+8, 8),
	} {
		assert.ErrorIs(t, err, inval, name)
	}
	assert.ErrorIs(t, cublasraw.GemmEx(e.h, op, op, 2, 2, 2, one, a, cublasraw.CUDA_R_32F, 2, a, cublasraw.CUDA_R_64F, 2, one, c,
		cublasraw.CUDA_R_32F, 2, cublasraw.CUBLAS_COMPUTE_32F, cublasraw.CUBLAS_GEMM_DEFAULT), cublasraw.CUBLAS_STATUS_NOT_SUPPORTED)
	assert.ErrorIs(t, sgemm2(&fenv{}, one, a, a, one, c), cublasraw.CUBLAS_STATUS_NOT_INITIALIZED, "a NULL handle")
	require.NoError(t, cublasraw.Sgemm(e.h, op, op, 0, 2, 2, one, a, 2, a, 2, one, c, 2), "m == 0: nothing to do")
	e.sync(t)
	assert.Zero(t, faketest.CUBLAS(t, "fake_cublas_ops_run"))
	assert.Equal(t, identity, download[float32](t, c, 4))
}

// TestFakeGemmWaitsForItsStream: a gemm queued behind a gated host
// function has not run until the gate opens; then it has.
func TestFakeGemmWaitsForItsStream(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	_, one := host(float32(1))
	_, zero := host(float32(0))
	c := upload(t, []float32{9, 9, 9, 9})
	gate(t, e.s, 3)
	require.NoError(t, sgemm2(e, one, upload(t, mat), upload(t, identity), zero, c))
	assert.Zero(t, faketest.CUBLAS(t, "fake_cublas_ops_run"))
	assert.Equal(t, []float32{9, 9, 9, 9}, download[float32](t, c, 4), "not yet run")
	faketest.Call(t, "fake_open_gate", 3)
	e.sync(t)
	assert.Equal(t, int64(1), faketest.CUBLAS(t, "fake_cublas_ops_run"))
	assert.Equal(t, mat, download[float32](t, c, 4))
}

// TestFakePointerModes: in host mode alpha is read at the call; in device
// mode when the operation runs, and a reduction's result is written to
// device memory then, without waiting at the call.
func TestFakePointerModes(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	alpha, palpha := host(float32(2))
	_, zero := host(float32(0))
	a, b := upload(t, mat), upload(t, identity)
	c1 := upload(t, make([]float32, 4))
	gate(t, e.s, 4)
	require.NoError(t, sgemm2(e, palpha, a, b, zero, c1))
	*alpha = 5 // too late: copied at the call
	faketest.Call(t, "fake_open_gate", 4)
	e.sync(t)
	assert.Equal(t, []float32{2, 4, 6, 8}, download[float32](t, c1, 4))

	require.NoError(t, cublasraw.SetPointerMode(e.h, cublasraw.CUBLAS_POINTER_MODE_DEVICE))
	dalpha, dzero := upload(t, []float32{2}), upload(t, []float32{0})
	c2 := upload(t, make([]float32, 4))
	res := upload(t, []float32{-1})
	gate(t, e.s, 5)
	require.NoError(t, sgemm2(e, dalpha, a, b, dzero, c2))
	require.NoError(t, cublasraw.Sdot(e.h, 4, a, 1, a, 1, res))
	require.NoError(t, cu.MemcpyHtoD(cu.CUdeviceptr(dalpha), host1(float32(3)), 4)) // read when it runs
	assert.Equal(t, []float32{-1}, download[float32](t, res, 1), "the call did not wait")
	faketest.Call(t, "fake_open_gate", 5)
	e.sync(t)
	assert.Equal(t, []float32{3, 6, 9, 12}, download[float32](t, c2, 4))
	assert.Equal(t, []float32{30}, download[float32](t, res, 1))
}

// TestFakeBadMemory: a freed buffer at the call is refused and counted;
// a buffer freed while the operation waits is counted when it runs, and
// the operation touches nothing; so is a freed workspace.
func TestFakeBadMemory(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	_, one := host(float32(1))
	a, c := upload(t, mat), upload(t, identity)
	gone := upload(t, mat)
	require.NoError(t, cu.MemFree(cu.CUdeviceptr(gone)))
	assert.ErrorIs(t, sgemm2(e, one, gone, a, one, c), cublasraw.CUBLAS_STATUS_EXECUTION_FAILED)
	assert.Equal(t, int64(1), faketest.Call(t, "fake_bad_ptr_uses"))
	expectBad(t, 1, "cublasSgemm_v2: bad device pointer")
	assert.ErrorIs(t, sgemm2(e, one, a+12, a, one, c), cublasraw.CUBLAS_STATUS_EXECUTION_FAILED, "overruns its allocation")
	expectBad(t, 1, "bad device pointer")

	var late cu.CUdeviceptr // stream-ordered: its free does not wait for the gemm
	require.NoError(t, cu.MemAllocAsync(&late, 16, e.s))
	e.sync(t)
	gate(t, e.s, 6)
	require.NoError(t, sgemm2(e, one, uintptr(late), a, one, c))
	require.NoError(t, cu.MemFree(late))
	faketest.Call(t, "fake_open_gate", 6)
	e.sync(t)
	assert.Equal(t, identity, download[float32](t, c, 4), "nothing computed")
	expectBad(t, 1, "cublasSgemm_v2: bad device pointer")

	var ws cu.CUdeviceptr
	require.NoError(t, cu.MemAlloc(&ws, 4096))
	require.NoError(t, cublasraw.SetWorkspace(e.h, uintptr(ws), 4096))
	require.NoError(t, sgemm2(e, one, a, a, one, c))
	e.sync(t)
	require.NoError(t, cu.MemFree(ws))
	assert.ErrorIs(t, sgemm2(e, one, a, a, one, c), cublasraw.CUBLAS_STATUS_EXECUTION_FAILED)
	expectBad(t, 2, "workspace is not live device memory")
	require.NoError(t, cublasraw.SetStream(e.h, cublasraw.Stream(e.s)), "back to the default workspace")
	require.NoError(t, sgemm2(e, one, a, a, one, c))
	e.sync(t)
}

// TestFakeCapturedGemm: a gemm captured into a graph runs at each launch,
// not at the capture; a host-mode result inside a capture is refused
// (cuBLAS must synchronise) and breaks the capture.
func TestFakeCapturedGemm(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	_, one := host(float32(1))
	c := upload(t, make([]float32, 4))
	require.NoError(t, cu.StreamBeginCapture(e.s, cu.CU_STREAM_CAPTURE_MODE_RELAXED))
	require.NoError(t, sgemm2(e, one, upload(t, mat), upload(t, identity), one, c))
	var g cu.CUgraph
	require.NoError(t, cu.StreamEndCapture(e.s, &g))
	var x cu.CUgraphExec
	require.NoError(t, cu.GraphInstantiateWithFlags(&x, g, 0))
	e.sync(t)
	assert.Zero(t, faketest.CUBLAS(t, "fake_cublas_ops_run"), "captured, not run")
	for range 2 {
		require.NoError(t, cu.GraphLaunch(x, e.s))
	}
	e.sync(t)
	assert.Equal(t, int64(2), faketest.CUBLAS(t, "fake_cublas_ops_run"))
	assert.Equal(t, []float32{2, 4, 6, 8}, download[float32](t, c, 4), "C += A at each launch")

	require.NoError(t, cu.StreamBeginCapture(e.s, cu.CU_STREAM_CAPTURE_MODE_RELAXED))
	_, res := host(float32(0))
	assert.ErrorIs(t, cublasraw.Sdot(e.h, 4, c, 1, c, 1, res), cublasraw.CUBLAS_STATUS_EXECUTION_FAILED)
	var g2 cu.CUgraph
	assert.ErrorIs(t, cu.StreamEndCapture(e.s, &g2), cu.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
	expectBad(t, 1, "a result in host memory (pointer mode host) inside a stream capture")

	// The handle destroyed, the graph launched again: the gemm runs after
	// its handle is gone, a bad use.
	var h2 cublasraw.Handle
	require.NoError(t, cublasraw.Create(&h2))
	require.NoError(t, cublasraw.SetStream(h2, cublasraw.Stream(e.s)))
	require.NoError(t, cu.StreamBeginCapture(e.s, cu.CU_STREAM_CAPTURE_MODE_RELAXED))
	require.NoError(t, cublasraw.Sgemm(h2, 0, 0, 2, 2, 2, one, upload(t, mat), 2, upload(t, identity), 2, one, c, 2))
	var g3 cu.CUgraph
	require.NoError(t, cu.StreamEndCapture(e.s, &g3))
	var x3 cu.CUgraphExec
	require.NoError(t, cu.GraphInstantiateWithFlags(&x3, g3, 0))
	require.NoError(t, cublasraw.Destroy(h2))
	require.NoError(t, cu.GraphLaunch(x3, e.s))
	e.sync(t)
	assert.Equal(t, []float32{2, 4, 6, 8}, download[float32](t, c, 4), "not computed")
	expectBad(t, 1, "ran after its handle was destroyed")
	for _, err := range []error{cu.GraphExecDestroy(x), cu.GraphExecDestroy(x3), cu.GraphDestroy(g), cu.GraphDestroy(g3)} {
		assert.NoError(t, err)
	}
}

// TestFakeDestroyWaitsAndContext: cublasDestroy waits for the handle's
// queued work (cuBLAS synchronises the device); a call without the
// handle's context current is a bad use; fake_cublas_fail_next fails one
// call.
func TestFakeDestroyWaitsAndContext(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	_, one := host(float32(1))
	c := upload(t, make([]float32, 4))
	var h cublasraw.Handle
	require.NoError(t, cublasraw.Create(&h))
	require.NoError(t, cublasraw.SetStream(h, cublasraw.Stream(e.s)))
	gate(t, e.s, 7)
	require.NoError(t, cublasraw.Sgemm(h, 0, 0, 2, 2, 2, one, upload(t, mat), 2, upload(t, identity), 2, one, c, 2))
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cu.CtxSetCurrent(e.ctx); err != nil {
			done <- err
			return
		}
		done <- cublasraw.Destroy(h)
	}()
	select {
	case err := <-done:
		t.Fatalf("cublasDestroy returned (%v) while the handle's gemm waited", err)
	case <-time.After(50 * time.Millisecond):
	}
	faketest.Call(t, "fake_open_gate", 7)
	require.NoError(t, <-done)
	assert.Equal(t, int64(1), faketest.CUBLAS(t, "fake_cublas_ops_run"), "run before Destroy returned")
	assert.Equal(t, mat, download[float32](t, c, 4))

	require.NoError(t, cu.CtxSetCurrent(0))
	assert.Error(t, sgemm2(e, one, c, c, one, c))
	require.NoError(t, cu.CtxSetCurrent(e.ctx))
	expectBad(t, 1, "the handle's context")

	faketest.CUBLASFailNext(t, "cublasSgemm_v2", int32(cublasraw.CUBLAS_STATUS_ALLOC_FAILED))
	assert.ErrorIs(t, sgemm2(e, one, c, c, one, c), cublasraw.CUBLAS_STATUS_ALLOC_FAILED)
	require.NoError(t, sgemm2(e, one, c, c, one, c), "only the next one")
	e.sync(t)
}
