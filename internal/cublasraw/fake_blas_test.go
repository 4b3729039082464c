//go:build linux

package cublasraw_test

import (
	"math/cmplx"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/faketest"
)

// Results of fakecublas's routines, against plain-Go references, exactly
// (small integers).

// TestFakeGemmFamily: Sgemm and Dgemm in every transpose, Cgemm, GemmEx,
// the strided batch and the pointer-array batch.
func TestFakeGemmFamily(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k, lda, ldb, ldc = 3, 4, 5, 6, 7, 5
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		a, b, c := ints(lda*max(m, k), 2), ints(ldb*max(k, n), 3), ints(ldc*n, 5)
		want := refGemm(tr[0], tr[1], m, n, k, 2, a, lda, b, ldb, -1, c, ldc)
		op := func(b bool) cublasraw.Operation {
			if b {
				return cublasraw.CUBLAS_OP_T
			}
			return cublasraw.CUBLAS_OP_N
		}
		_, al32 := host(float32(2))
		_, be32 := host(float32(-1))
		dc := upload(t, f32(c))
		require.NoError(t, cublasraw.Sgemm(e.h, op(tr[0]), op(tr[1]), m, n, k, al32, upload(t, f32(a)), lda, upload(t, f32(b)), ldb, be32, dc, ldc))
		_, al64 := host(2.0)
		_, be64 := host(-1.0)
		dd := upload(t, c)
		require.NoError(t, cublasraw.Dgemm(e.h, op(tr[0]), op(tr[1]), m, n, k, al64, upload(t, a), lda, upload(t, b), ldb, be64, dd, ldc))
		de := upload(t, f32(c))
		require.NoError(t, cublasraw.GemmEx(e.h, op(tr[0]), op(tr[1]), m, n, k, al32, upload(t, f32(a)), cublasraw.CUDA_R_32F, lda,
			upload(t, f32(b)), cublasraw.CUDA_R_32F, ldb, be32, de, cublasraw.CUDA_R_32F, ldc, cublasraw.CUBLAS_COMPUTE_32F, cublasraw.CUBLAS_GEMM_DEFAULT))
		e.sync(t)
		assert.Equal(t, f32(want), download[float32](t, dc, len(c)), "Sgemm %v", tr)
		assert.Equal(t, want, download[float64](t, dd, len(c)), "Dgemm %v", tr)
		assert.Equal(t, f32(want), download[float32](t, de, len(c)), "GemmEx %v", tr)
	}

	// Cgemm, conjugate transpose of A: (1+i) conj entries.
	ca := []complex64{1 + 2i, 3 - 1i, -2 + 1i, 0 + 1i} // 2x2
	cb := []complex64{1, 1i, 2, -1}
	_, cal := host(complex64(1))
	_, cbe := host(complex64(0))
	dcc := upload(t, make([]complex64, 4))
	require.NoError(t, cublasraw.Cgemm(e.h, cublasraw.CUBLAS_OP_C, cublasraw.CUBLAS_OP_N, 2, 2, 2, cal, upload(t, ca), 2, upload(t, cb), 2, cbe, dcc, 2))
	e.sync(t)
	var wantC [4]complex64
	for j := 0; j < 2; j++ {
		for i := 0; i < 2; i++ {
			for l := 0; l < 2; l++ {
				wantC[i+2*j] += complex64(cmplx.Conj(complex128(ca[l+2*i]))) * cb[l+2*j]
			}
		}
	}
	assert.Equal(t, wantC[:], download[complex64](t, dcc, 4))

	// Strided batch of 3 and the pointer-array batch of the same.
	const batch, sA, sB, sC = 3, 2 * 2, 2 * 2, 2 * 2
	a, b := ints(batch*sA, 4), ints(batch*sB, 6)
	_, one := host(float32(1))
	_, zero := host(float32(0))
	ds := upload(t, make([]float32, batch*sC))
	da, db := upload(t, f32(a)), upload(t, f32(b))
	require.NoError(t, cublasraw.SgemmStridedBatched(e.h, 0, 0, 2, 2, 2, one, da, 2, sA, db, 2, sB, zero, ds, 2, sC, batch))
	dp := upload(t, make([]float32, batch*sC))
	var pa, pb, pc []uintptr
	for i := 0; i < batch; i++ {
		pa, pb, pc = append(pa, da+uintptr(i*sA*4)), append(pb, db+uintptr(i*sB*4)), append(pc, dp+uintptr(i*sC*4))
	}
	require.NoError(t, cublasraw.SgemmBatched(e.h, 0, 0, 2, 2, 2, one, upload(t, pa), 2, upload(t, pb), 2, zero, upload(t, pc), 2, batch))
	e.sync(t)
	var want []float64
	for i := 0; i < batch; i++ {
		want = append(want, refGemm(false, false, 2, 2, 2, 1, a[i*sA:], 2, b[i*sB:], 2, 0, make([]float64, 4), 2)...)
	}
	assert.Equal(t, f32(want), download[float32](t, ds, batch*sC), "strided")
	assert.Equal(t, f32(want), download[float32](t, dp, batch*sC), "pointer arrays")
	assert.Equal(t, int64(4*3+3), faketest.CUBLAS(t, "fake_cublas_ops_run"))
}

// TestFakeLevel1And2: Sgemv (both ways), Dgemv, Sger, Saxpy with a
// negative increment, Sdot, Snrm2, Sasum, Isamax, Sscal, Scopy, Sswap, in
// host pointer mode (results back when the call returns).
func TestFakeLevel1And2(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	a := []float64{1, 2, 3, 9, 4, 5, 6, 9} // 3x2, lda 4
	x := []float64{1, -1, 2}
	_, one := host(float32(1))
	_, zero := host(float32(0))
	y := upload(t, []float32{7, 7})
	require.NoError(t, cublasraw.Sgemv(e.h, cublasraw.CUBLAS_OP_T, 3, 2, one, upload(t, f32(a)), 4, upload(t, f32(x)), 1, zero, y, 1))
	yd := upload(t, []float64{1, 1, 1})
	_, two := host(2.0)
	require.NoError(t, cublasraw.Dgemv(e.h, cublasraw.CUBLAS_OP_N, 3, 2, two, upload(t, a), 4, upload(t, []float64{1, -1}), 1, two, yd, 1))
	ger := upload(t, []float32{0, 0, 0, 0})
	require.NoError(t, cublasraw.Sger(e.h, 2, 2, one, upload(t, []float32{1, 2}), 1, upload(t, []float32{3, 4}), 1, ger, 2))
	ax := upload(t, []float32{10, 20, 30})
	_, three := host(float32(3))
	require.NoError(t, cublasraw.Saxpy(e.h, 3, three, upload(t, []float32{1, 2, 3}), -1, ax, 1))
	e.sync(t)
	assert.Equal(t, []float32{1 - 2 + 6, 4 - 5 + 12}, download[float32](t, y, 2))
	assert.Equal(t, []float64{2*(1-4) + 2, 2*(2-5) + 2, 2*(3-6) + 2}, download[float64](t, yd, 3))
	assert.Equal(t, []float32{3, 6, 4, 8}, download[float32](t, ger, 4))
	assert.Equal(t, []float32{10 + 9, 20 + 6, 30 + 3}, download[float32](t, ax, 3), "a negative increment walks x from its end")

	v := upload(t, []float32{3, -4, 0, 12})
	dot, pdot := host(float32(0))
	require.NoError(t, cublasraw.Sdot(e.h, 4, v, 1, upload(t, []float32{1, 1, 1, 1}), 1, pdot))
	assert.Equal(t, float32(11), *dot, "host mode: the result is there when the call returns")
	nrm, pnrm := host(float32(0))
	require.NoError(t, cublasraw.Snrm2(e.h, 2, v, 1, pnrm))
	assert.Equal(t, float32(5), *nrm)
	asum, pasum := host(float32(0))
	require.NoError(t, cublasraw.Sasum(e.h, 4, v, 1, pasum))
	assert.Equal(t, float32(19), *asum)
	imax, pimax := host(int32(0))
	require.NoError(t, cublasraw.Isamax(e.h, 4, v, 1, pimax))
	assert.Equal(t, int32(4), *imax, "1-based")
	require.NoError(t, cublasraw.Isamax(e.h, 0, v, 1, pimax))
	assert.Zero(t, *imax, "n == 0: 0")
	nd, pnd := host(0.0)
	require.NoError(t, cublasraw.Dnrm2(e.h, 2, upload(t, []float64{6, 8}), 1, pnd))
	assert.Equal(t, 10.0, *nd)

	_, half := host(float32(-2))
	require.NoError(t, cublasraw.Sscal(e.h, 2, half, v, 2))
	cp := upload(t, make([]float32, 4))
	require.NoError(t, cublasraw.Scopy(e.h, 4, v, 1, cp, 1))
	sw := upload(t, []float32{1, 2})
	require.NoError(t, cublasraw.Sswap(e.h, 2, sw, 1, cp, 2))
	e.sync(t)
	assert.Equal(t, []float32{-6, -4, 0, 12}, download[float32](t, v, 4))
	assert.Equal(t, []float32{-6, 0}, download[float32](t, sw, 2))
	assert.Equal(t, []float32{1, -4, 2, 12}, download[float32](t, cp, 4))
}

// TestFakeTriangularAndSyrk: Strsv, Strsm from the left and the right,
// Dtrsm transposed, Ssyrk on its lower triangle only.
func TestFakeTriangularAndSyrk(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	// lower L = [[2,0],[1,1]] column-major {2,1,0,1}; the 0 slot holds 9, not read.
	l := []float32{2, 1, 9, 1}
	x := upload(t, []float32{4, 5}) // L x = b: x = {2, 3}
	require.NoError(t, cublasraw.Strsv(e.h, cublasraw.CUBLAS_FILL_MODE_LOWER, cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_DIAG_NON_UNIT, 2, upload(t, l), 2, x, 1))
	xu := upload(t, []float32{4, 5}) // unit diagonal: x0 = 4, x1 = 5 - 4 = 1
	require.NoError(t, cublasraw.Strsv(e.h, cublasraw.CUBLAS_FILL_MODE_LOWER, cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_DIAG_UNIT, 2, upload(t, l), 2, xu, 1))
	_, one := host(float32(1))
	bl := upload(t, []float32{4, 5, 2, 3}) // L X = B, columns {4,5} and {2,3}
	require.NoError(t, cublasraw.Strsm(e.h, cublasraw.CUBLAS_SIDE_LEFT, cublasraw.CUBLAS_FILL_MODE_LOWER, cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_DIAG_NON_UNIT, 2, 2, one, upload(t, l), 2, bl, 2))
	br := upload(t, []float32{5, 4}) // 1x2 row: X L = B: x1 = 4, 2 x0 + x1 = 5 → x0 = 0.5
	require.NoError(t, cublasraw.Strsm(e.h, cublasraw.CUBLAS_SIDE_RIGHT, cublasraw.CUBLAS_FILL_MODE_LOWER, cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_DIAG_NON_UNIT, 1, 2, one, upload(t, l), 2, br, 1))
	_, two := host(2.0)
	bt := upload(t, []float64{4, 5}) // L^T x = 2 b: [[2,1],[0,1]] x = {8,10}: x1 = 10, x0 = -1
	require.NoError(t, cublasraw.Dtrsm(e.h, cublasraw.CUBLAS_SIDE_LEFT, cublasraw.CUBLAS_FILL_MODE_LOWER, cublasraw.CUBLAS_OP_T, cublasraw.CUBLAS_DIAG_NON_UNIT, 2, 1, two, upload(t, []float64{2, 1, 9, 1}), 2, bt, 2))
	c := upload(t, []float32{1, 1, 100, 1})
	a := []float32{1, 2, 3, 4} // 2x2: A A^T = [[10,14],[14,20]]
	require.NoError(t, cublasraw.Ssyrk(e.h, cublasraw.CUBLAS_FILL_MODE_LOWER, cublasraw.CUBLAS_OP_N, 2, 2, one, upload(t, a), 2, one, c, 2))
	e.sync(t)
	assert.Equal(t, []float32{2, 3}, download[float32](t, x, 2))
	assert.Equal(t, []float32{4, 1}, download[float32](t, xu, 2))
	assert.Equal(t, []float32{2, 3, 1, 2}, download[float32](t, bl, 4))
	assert.Equal(t, []float32{0.5, 4}, download[float32](t, br, 2))
	assert.Equal(t, []float64{-1, 10}, download[float64](t, bt, 2))
	assert.Equal(t, []float32{11, 15, 100, 21}, download[float32](t, c, 4), "the upper triangle is not touched")
}
