//go:build linux

package cublas_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestGemmContextSwitchFailuresFromFake: Gemm pushes the handle's
// context, calls cuBLAS and clears the thread in one call into C. A failed
// push calls nothing (no GEMM runs); a failed clearing is reported after
// the GEMM was queued (it runs, exact), leaving the context current on the
// thread; a cuBLAS failure still clears the thread.
func TestGemmContextSwitchFailuresFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	ah, bh := data[float32](4, 1), data[float32](4, 2)
	a, b, c := up(t, e.s, ah), up(t, e.s, bh), up(t, e.s, make([]float32, 4))
	A, B, C := cublas.ColMajorMatrix(a, 2, 2), cublas.ColMajorMatrix(b, 2, 2), cublas.ColMajorMatrix(c, 2, 2)
	require.NoError(t, e.s.Synchronize())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	current := func() cu.CUcontext {
		var h cu.CUcontext
		require.NoError(t, cu.CtxGetCurrent(&h))
		return h
	}

	before := opsRun(t)
	faketest.FailNext(t, "cuCtxPushCurrent", 201)
	err := cublas.Gemm(e.h, 1, A, B, 0, C)
	assert.ErrorIs(t, err, driver.ErrInvalidContext)
	assert.Contains(t, err.Error(), "Gemm")
	require.NoError(t, e.s.Synchronize())
	assert.Equal(t, before, opsRun(t), "a failed push calls nothing")
	assert.Zero(t, current())

	faketest.FailNext(t, "cuCtxSetCurrent", 201)
	assert.ErrorIs(t, cublas.Gemm(e.h, 1, A, B, 0, C), driver.ErrInvalidContext, "the clearing's failure")
	assert.NotZero(t, current(), "the clearing failed: the handle's context is still current")
	require.NoError(t, cu.CtxSetCurrent(0))
	require.NoError(t, e.s.Synchronize())
	assert.Equal(t, before+1, opsRun(t), "the GEMM was queued")
	got, err := c.ToHost(e.s)
	require.NoError(t, err)
	want := make([]float32, 4)
	for i := range 2 {
		for j := range 2 {
			for l := range 2 {
				want[i+2*j] += ah[i+2*l] * bh[l+2*j]
			}
		}
	}
	assert.Equal(t, want, got)

	faketest.CUBLASFailNext(t, "cublasSgemm_v2", 7)
	assert.ErrorIs(t, cublas.Gemm(e.h, 1, A, B, 0, C), cublas.StatusInvalidValue)
	assert.Zero(t, current(), "cleared after cuBLAS's failure")
}
