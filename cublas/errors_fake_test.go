//go:build linux

package cublas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/loader"
)

// TestCUBLASFailuresFromFake: a status cuBLAS returns comes back as an
// *Error naming the routine and the C function; nothing runs, and the
// handle and its operands go on working (after a failed device-result
// reduction, the pointer mode is host again: a host result then does not
// go to device memory, which the fake would count).
func TestCUBLASFailuresFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	a, b, c := up(t, e.s, data[float32](4, 1)), up(t, e.s, data[float32](4, 2)), up(t, e.s, make([]float32, 4))
	A, B, C := cublas.ColMajorMatrix(a, 2, 2), cublas.ColMajorMatrix(b, 2, 2), cublas.ColMajorMatrix(c, 2, 2)
	before := opsRun(t)
	faketest.CUBLASFailNext(t, "cublasSgemm_v2", 7)
	err := cublas.Gemm(e.h, 1, A, B, 0, C)
	var ce *cublas.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, cublas.Error{Op: "Gemm", Func: "cublasSgemm_v2", Status: cublas.StatusInvalidValue}, *ce)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	faketest.CUBLASFailNext(t, "cublasGemmEx", 15)
	err = cublas.GemmEx(e.h, 1, A, B, 0, C, cublas.Compute32F)
	assert.ErrorIs(t, err, cublas.ErrNotSupported)
	assert.Contains(t, err.Error(), "cublas: GemmEx: cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED")
	require.NoError(t, e.s.Synchronize())
	assert.Equal(t, before, opsRun(t))

	x, y := cublas.VectorOf(a), cublas.VectorOf(b)
	faketest.CUBLASFailNext(t, "cublasSdot_v2", 13)
	got, err := cublas.Dot(e.h, x, y)
	assert.ErrorIs(t, err, cublas.StatusExecutionFailed)
	assert.Zero(t, got)
	r := cublas.VectorOf(c)
	r.N = 1
	faketest.CUBLASFailNext(t, "cublasSdot_v2", 14)
	assert.ErrorIs(t, cublas.DotTo(e.h, x, y, r), cublas.StatusInternalError)
	faketest.CUBLASFailNext(t, "cublasSetPointerMode_v2", 14)
	err = cublas.Nrm2To(e.h, x, r)
	assert.ErrorIs(t, err, cublas.StatusInternalError)
	assert.Contains(t, err.Error(), "cublas: Nrm2To: cublasSetPointerMode_v2:")
	// The handle works on, in host pointer mode.
	var want float32
	ah, bh := data[float32](4, 1), data[float32](4, 2)
	for i := range ah {
		want += ah[i] * bh[i]
	}
	got, err = cublas.Dot(e.h, x, y)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	require.NoError(t, cublas.Gemm(e.h, 1, A, B, 0, C))
	assert.Equal(t, gemmWant(ah, bh, 2, 2, 2), down(t, e.s, c))
	// The operands were released: closing them frees them.
	allocs := faketest.Call(t, "fake_live_allocations")
	require.NoError(t, a.Close())
	waitFor(t, "fake_live_allocations", allocs-1)
}

// TestVersionFromFake: Version reads cuBLAS's properties (the fake's
// FAKE_CUBLAS_VERSION, 12.9.4 here) and the path it was loaded from.
func TestVersionFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t, "FAKE_CUBLAS_VERSION=120904") {
		return
	}
	major, minor, patch, path, err := cublas.Version()
	require.NoError(t, err)
	assert.Equal(t, [3]int{12, 9, 4}, [3]int{major, minor, patch})
	assert.Contains(t, path, "fakecublas")
	faketest.CUBLASFailNext(t, "cublasGetProperty", 14)
	_, _, _, _, err = cublas.Version()
	assert.ErrorIs(t, err, cublas.StatusInternalError)
}

// TestMissingCUBLASFromFake: with no cuBLAS where PURECUDA_LIBCUBLAS
// points, NewHandle and Version fail with ErrNotSupported (and
// loader.ErrNotFound), the place searched and how to install it; nothing
// is left.
func TestMissingCUBLASFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t, "PURECUDA_LIBCUBLAS=/nonexistent/libcublas.so.13") {
		return
	}
	ctx := fakeCtx(t)
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	allocs := faketest.Call(t, "fake_live_allocations")
	h, err := cublas.NewHandle(s, nil)
	assert.Nil(t, h)
	assert.ErrorIs(t, err, cublas.ErrNotSupported)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.Contains(t, err.Error(), "/nonexistent/libcublas.so.13")
	assert.Contains(t, err.Error(), "pip install nvidia-cublas")
	_, _, _, _, err = cublas.Version()
	assert.ErrorIs(t, err, cublas.ErrNotSupported)
	assert.Equal(t, allocs, faketest.Call(t, "fake_live_allocations"))
	var nilH *cublas.Handle
	assert.ErrorIs(t, cublas.Gemm(nilH, 1, cublas.Matrix[float32]{}, cublas.Matrix[float32]{}, 0, cublas.Matrix[float32]{}), driver.ErrInvalidArgument)
}
