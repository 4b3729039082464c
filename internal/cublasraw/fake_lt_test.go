//go:build linux

package cublasraw_test

import (
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestFakeLtMatmul: fakecublas's cuBLASLt: descriptors and layouts, the
// heuristic's one algorithm, a strided-batch matmul with A transposed
// into D (C kept), D's amax refused (D is not FP8), a destroyed layout is
// a bad use, nothing left live.
func TestFakeLtMatmul(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	var lt cublasraw.LtHandle
	require.NoError(t, cublasraw.LtCreate(&lt))
	var desc cublasraw.LtMatmulDesc
	require.NoError(t, cublasraw.LtMatmulDescCreate(&desc, cublasraw.CUBLAS_COMPUTE_32F, cublasraw.CUDA_R_32F))
	_, ta := host(int32(cublasraw.CUBLAS_OP_T))
	require.NoError(t, cublasraw.LtMatmulDescSetAttribute(desc, cublasraw.CUBLASLT_MATMUL_DESC_TRANSA, ta, 4))
	assert.ErrorIs(t, cublasraw.LtMatmulDescSetAttribute(desc, cublasraw.CUBLASLT_MATMUL_DESC_TRANSA, ta, 8), cublasraw.CUBLAS_STATUS_INVALID_VALUE)
	const batch, stride = 2, 4
	layout := func() cublasraw.LtMatrixLayout {
		var l cublasraw.LtMatrixLayout
		require.NoError(t, cublasraw.LtMatrixLayoutCreate(&l, cublasraw.CUDA_R_32F, 2, 2, 2))
		_, b := host(int32(batch))
		require.NoError(t, cublasraw.LtMatrixLayoutSetAttribute(l, cublasraw.CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, b, 4))
		_, s := host(int64(stride))
		require.NoError(t, cublasraw.LtMatrixLayoutSetAttribute(l, cublasraw.CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, s, 8))
		return l
	}
	la, lb, lc, ld := layout(), layout(), layout(), layout()
	var pref cublasraw.LtMatmulPreference
	require.NoError(t, cublasraw.LtMatmulPreferenceCreate(&pref))
	_, wsb := host(uint64(1 << 20))
	require.NoError(t, cublasraw.LtMatmulPreferenceSetAttribute(pref, cublasraw.CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, wsb, 8))
	var res [2]cublasraw.LtMatmulHeuristicResult
	var n int32
	require.NoError(t, cublasraw.LtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 2, &res[0], &n))
	require.Equal(t, int32(1), n)
	assert.Equal(t, cublasraw.CUBLAS_STATUS_SUCCESS, res[0].State)

	a, b, c := ints(batch*stride, 2), ints(batch*stride, 3), ints(batch*stride, 5)
	da, db, dc, dd := upload(t, f32(a)), upload(t, f32(b)), upload(t, f32(c)), upload(t, make([]float32, batch*stride))
	_, alpha := host(float32(2))
	_, beta := host(float32(1))
	require.NoError(t, cublasraw.LtMatmul(lt, desc, alpha, da, la, db, lb, beta, dc, lc, dd, ld, &res[0].Algo, 0, 0, cublasraw.Stream(e.s)))
	e.sync(t)
	var want []float64
	for i := 0; i < batch; i++ {
		want = append(want, refGemm(true, false, 2, 2, 2, 2, a[i*stride:], 2, b[i*stride:], 2, 1, c[i*stride:i*stride+4], 2)...)
	}
	assert.Equal(t, f32(want), download[float32](t, dd, batch*stride))
	assert.Equal(t, f32(c), download[float32](t, dc, batch*stride), "C is only read")

	var bad cublasraw.LtMatmulAlgo
	assert.ErrorIs(t, cublasraw.LtMatmul(lt, desc, alpha, da, la, db, lb, beta, dc, lc, dd, ld, &bad, 0, 0, cublasraw.Stream(e.s)),
		cublasraw.CUBLAS_STATUS_INVALID_VALUE, "an algorithm the heuristic did not give")
	var l3 cublasraw.LtMatrixLayout
	require.NoError(t, cublasraw.LtMatrixLayoutCreate(&l3, cublasraw.CUDA_R_32F, 3, 2, 3))
	assert.ErrorIs(t, cublasraw.LtMatmul(lt, desc, alpha, da, la, db, lb, beta, dc, lc, dd, l3, nil, 0, 0, cublasraw.Stream(e.s)),
		cublasraw.CUBLAS_STATUS_INVALID_VALUE, "D's shape is not op(A) op(B)'s")
	// D's amax is cuBLASLt's for an FP8 D only: a float D refuses it.
	_, amax := host(uint64(dd))
	require.NoError(t, cublasraw.LtMatmulDescSetAttribute(desc, cublasraw.CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, amax, 8))
	assert.ErrorIs(t, cublasraw.LtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 2, &res[1], &n), cublasraw.CUBLAS_STATUS_INVALID_VALUE, "the heuristic with D's amax")
	assert.ErrorIs(t, cublasraw.LtMatmul(lt, desc, alpha, da, la, db, lb, beta, dc, lc, dd, ld, &res[0].Algo, 0, 0, cublasraw.Stream(e.s)),
		cublasraw.CUBLAS_STATUS_INVALID_VALUE, "a matmul with D's amax")
	_, null := host(uint64(0))
	require.NoError(t, cublasraw.LtMatmulDescSetAttribute(desc, cublasraw.CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, null, 8))
	require.NoError(t, cublasraw.LtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 2, &res[1], &n), "amax NULL again")

	for _, l := range []cublasraw.LtMatrixLayout{la, lb, lc, ld, l3} {
		require.NoError(t, cublasraw.LtMatrixLayoutDestroy(l))
	}
	assert.ErrorIs(t, cublasraw.LtMatmul(lt, desc, alpha, da, la, db, lb, beta, dc, lc, dd, ld, nil, 0, 0, cublasraw.Stream(e.s)),
		cublasraw.CUBLAS_STATUS_INVALID_VALUE)
	expectBad(t, 1, "cublasLtMatmul: destroyed or unknown cuBLASLt object")
	require.NoError(t, cublasraw.LtMatmulPreferenceDestroy(pref))
	require.NoError(t, cublasraw.LtMatmulDescDestroy(desc))
	require.NoError(t, cublasraw.LtDestroy(lt))
	assert.Zero(t, faketest.CUBLAS(t, "fake_cublaslt_live_handles"))
	assert.Zero(t, faketest.CUBLAS(t, "fake_cublaslt_live_descs"))
	assert.Equal(t, uintptr(96), unsafe.Sizeof(res[0]))
}

// TestFakeLtEpilogues: fakecublas applies cuBLASLt's ReLU and bias
// epilogues (the bias one element per row of D, set by BIAS_POINTER) in
// double before storing; a bias epilogue without its pointer is refused
// at the call, a bias past its allocation counted as a bad use, and
// complex types have no epilogue but DEFAULT.
func TestFakeLtEpilogues(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	var lt cublasraw.LtHandle
	require.NoError(t, cublasraw.LtCreate(&lt))
	var desc cublasraw.LtMatmulDesc
	require.NoError(t, cublasraw.LtMatmulDescCreate(&desc, cublasraw.CUBLAS_COMPUTE_64F, cublasraw.CUDA_R_64F))
	var l cublasraw.LtMatrixLayout
	require.NoError(t, cublasraw.LtMatrixLayoutCreate(&l, cublasraw.CUDA_R_64F, 2, 2, 2))
	a, b := []float64{1, -2, 3, -4}, []float64{1, 0, 0, 1} // B = I: D = A (column-major)
	da, db, dd := upload(t, a), upload(t, b), upload(t, make([]float64, 4))
	bias := upload(t, []float64{10, -10})
	_, one := host(1.0)
	_, zero := host(0.0)
	epilogue := func(ep cublasraw.LtEpilogue, p uintptr) {
		_, v := host(int32(ep))
		require.NoError(t, cublasraw.LtMatmulDescSetAttribute(desc, cublasraw.CUBLASLT_MATMUL_DESC_EPILOGUE, v, 4))
		_, bp := host(uint64(p))
		require.NoError(t, cublasraw.LtMatmulDescSetAttribute(desc, cublasraw.CUBLASLT_MATMUL_DESC_BIAS_POINTER, bp, 8))
	}
	run := func() error {
		return cublasraw.LtMatmul(lt, desc, one, da, l, db, l, zero, dd, l, dd, l, nil, 0, 0, cublasraw.Stream(e.s))
	}
	for _, c := range []struct {
		ep   cublasraw.LtEpilogue
		bias uintptr
		want []float64
	}{
		{cublasraw.CUBLASLT_EPILOGUE_RELU, 0, []float64{1, 0, 3, 0}},
		{cublasraw.CUBLASLT_EPILOGUE_BIAS, bias, []float64{11, -12, 13, -14}},
		{cublasraw.CUBLASLT_EPILOGUE_RELU_BIAS, bias, []float64{11, 0, 13, 0}},
	} {
		epilogue(c.ep, c.bias)
		require.NoError(t, run(), c.ep.String())
		e.sync(t)
		assert.Equal(t, c.want, download[float64](t, dd, 4), c.ep.String())
	}
	epilogue(cublasraw.CUBLASLT_EPILOGUE_GELU, 0)
	require.NoError(t, run())
	e.sync(t)
	gelu := func(x float64) float64 { return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) }
	got := download[float64](t, dd, 4)
	for i, x := range a {
		assert.InDelta(t, gelu(x), got[i], 1e-12)
	}
	epilogue(cublasraw.CUBLASLT_EPILOGUE_BIAS, 0)
	assert.ErrorIs(t, run(), cublasraw.CUBLAS_STATUS_INVALID_VALUE, "a bias epilogue without its vector")
	epilogue(cublasraw.CUBLASLT_EPILOGUE_BIAS, bias+8) // one element, two rows
	assert.Error(t, run())
	expectBad(t, 1, "cublasLtMatmul")

	var zdesc cublasraw.LtMatmulDesc
	require.NoError(t, cublasraw.LtMatmulDescCreate(&zdesc, cublasraw.CUBLAS_COMPUTE_64F, cublasraw.CUDA_C_64F))
	var zl cublasraw.LtMatrixLayout
	require.NoError(t, cublasraw.LtMatrixLayoutCreate(&zl, cublasraw.CUDA_C_64F, 2, 2, 2))
	_, relu := host(int32(cublasraw.CUBLASLT_EPILOGUE_RELU))
	require.NoError(t, cublasraw.LtMatmulDescSetAttribute(zdesc, cublasraw.CUBLASLT_MATMUL_DESC_EPILOGUE, relu, 4))
	var pref cublasraw.LtMatmulPreference
	require.NoError(t, cublasraw.LtMatmulPreferenceCreate(&pref))
	var res cublasraw.LtMatmulHeuristicResult
	var n int32
	assert.ErrorIs(t, cublasraw.LtMatmulAlgoGetHeuristic(lt, zdesc, zl, zl, zl, zl, pref, 1, &res, &n), cublasraw.CUBLAS_STATUS_NOT_SUPPORTED)

	for _, x := range []cublasraw.LtMatrixLayout{l, zl} {
		require.NoError(t, cublasraw.LtMatrixLayoutDestroy(x))
	}
	require.NoError(t, cublasraw.LtMatmulPreferenceDestroy(pref))
	require.NoError(t, cublasraw.LtMatmulDescDestroy(desc))
	require.NoError(t, cublasraw.LtMatmulDescDestroy(zdesc))
	require.NoError(t, cublasraw.LtDestroy(lt))
	assert.Zero(t, faketest.CUBLAS(t, "fake_cublaslt_live_descs"))
}

// TestFakeLtAlignment: the heuristic's algorithms assume the preference's
// minimum alignment of A, B, C and D (256 bytes unless set) and the
// alignment of the bias pointer it saw (NULL: 256); a matmul with that
// algorithm and a less aligned pointer is a bad use ("misaligned
// address"), EXECUTION_FAILED with nothing queued, while a NULL algorithm
// takes any; algorithms chosen with 16-byte minimums and a bias stand-in
// 4 bytes past a boundary run with such pointers.
func TestFakeLtAlignment(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	var lt cublasraw.LtHandle
	require.NoError(t, cublasraw.LtCreate(&lt))
	var desc cublasraw.LtMatmulDesc
	require.NoError(t, cublasraw.LtMatmulDescCreate(&desc, cublasraw.CUBLAS_COMPUTE_32F, cublasraw.CUDA_R_32F))
	_, ep := host(int32(cublasraw.CUBLASLT_EPILOGUE_BIAS))
	require.NoError(t, cublasraw.LtMatmulDescSetAttribute(desc, cublasraw.CUBLASLT_MATMUL_DESC_EPILOGUE, ep, 4))
	setBias := func(p uintptr) {
		_, bp := host(uint64(p))
		require.NoError(t, cublasraw.LtMatmulDescSetAttribute(desc, cublasraw.CUBLASLT_MATMUL_DESC_BIAS_POINTER, bp, 8))
	}
	var l cublasraw.LtMatrixLayout
	require.NoError(t, cublasraw.LtMatrixLayoutCreate(&l, cublasraw.CUDA_R_32F, 2, 2, 2))
	var pref cublasraw.LtMatmulPreference
	require.NoError(t, cublasraw.LtMatmulPreferenceCreate(&pref))
	heuristic := func() cublasraw.LtMatmulAlgo {
		var res cublasraw.LtMatmulHeuristicResult
		var n int32
		require.NoError(t, cublasraw.LtMatmulAlgoGetHeuristic(lt, desc, l, l, l, l, pref, 1, &res, &n))
		require.Equal(t, int32(1), n)
		return res.Algo
	}
	// A = [1 2; 3 4] (column-major), B = I, bias {10, 20}: D = A + bias per row.
	da, db := upload(t, []float32{0, 0, 0, 0, 1, 3, 2, 4}), upload(t, []float32{0, 0, 0, 0, 1, 0, 0, 1})
	dd, bias := upload(t, make([]float32, 8)), upload(t, []float32{0, 10, 20})
	_, one := host(float32(1))
	_, zero := host(float32(0))
	run := func(algo *cublasraw.LtMatmulAlgo, a, b, d, bp uintptr) error {
		setBias(bp)
		return cublasraw.LtMatmul(lt, desc, one, a, l, b, l, zero, d, l, d, l, algo, 0, 0, cublasraw.Stream(e.s))
	}
	setBias(0)
	def := heuristic() // 256 bytes of everything
	require.NoError(t, run(&def, da, db, dd, bias), "all at their allocations' starts")
	e.sync(t)
	for _, c := range []struct {
		what          string
		a, b, d, bias uintptr
	}{
		{"A", da + 16, db, dd, bias},
		{"B", da, db + 16, dd, bias},
		{"C", da, db, dd + 16, bias}, // C is D here
		{"the bias", da, db, dd, bias + 4},
	} {
		assert.ErrorIs(t, run(&def, c.a, c.b, c.d, c.bias), cublasraw.CUBLAS_STATUS_EXECUTION_FAILED, c.what)
		expectBad(t, 1, "cublasLtMatmul: misaligned address: "+c.what)
	}
	require.NoError(t, run(nil, da+16, db+16, dd+16, bias+4), "no algorithm: cuBLASLt chooses one for the pointers")
	e.sync(t)
	assert.Equal(t, []float32{11, 23, 12, 24}, download[float32](t, dd+16, 4))

	_, sixteen := host(uint32(16))
	for _, a := range []cublasraw.LtMatmulPreferenceAttributes{cublasraw.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, cublasraw.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
		cublasraw.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, cublasraw.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES} {
		require.NoError(t, cublasraw.LtMatmulPreferenceSetAttribute(pref, a, sixteen, 4))
	}
	setBias(0x1004) // a stand-in: only its alignment counts
	loose := heuristic()
	require.NoError(t, run(&loose, da+16, db+16, dd, bias+4))
	e.sync(t)
	assert.Equal(t, []float32{11, 23, 12, 24}, download[float32](t, dd, 4))
	assert.ErrorIs(t, run(&loose, da+8, db, dd, bias), cublasraw.CUBLAS_STATUS_EXECUTION_FAILED)
	expectBad(t, 1, "cublasLtMatmul: misaligned address: A at")
	assert.ErrorIs(t, run(&loose, da, db, dd, bias+2), cublasraw.CUBLAS_STATUS_EXECUTION_FAILED)
	expectBad(t, 1, "the algorithm assumes 4-byte alignment")

	require.NoError(t, cublasraw.LtMatrixLayoutDestroy(l))
	require.NoError(t, cublasraw.LtMatmulPreferenceDestroy(pref))
	require.NoError(t, cublasraw.LtMatmulDescDestroy(desc))
	require.NoError(t, cublasraw.LtDestroy(lt))
}
