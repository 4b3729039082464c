package cublasraw_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/gputest"
)

// notExported are functions the headers declare that the real libraries
// of the GPU machines do not export: calling them is ErrNotSupported.
var notExported = map[string]string{
	"cublasLtDisableCpuInstructionsSetMask": "declared by cublasLt.h 13.1, not exported by libcublasLt.so.13 (13.1.0.3, seen on an H200 machine)",
}

// TestGPUResolveAll resolves every generated entry point in the real
// libcublas and libcublasLt (except notExported, which must fail with
// ErrNotSupported).
func TestGPUResolveAll(t *testing.T) {
	gputest.Require(t)
	path, err := cublasraw.Load()
	require.NoError(t, err)
	ltPath, err := cublasraw.LoadLt()
	require.NoError(t, err)
	failed := 0
	res := cublasraw.ResolveAll()
	for _, r := range res {
		if why, ok := notExported[r.Func]; ok && r.Err != nil {
			assert.ErrorIs(t, r.Err, cublasraw.ErrNotSupported, r.Func)
			t.Logf("%s: %s", r.Func, why)
			continue
		}
		if r.Err != nil {
			failed++
			t.Errorf("%s does not resolve: %v", r.Func, r.Err)
		}
	}
	rt, err := cublasraw.GetCudartVersion()
	require.NoError(t, err)
	lt, err := cublasraw.LtGetVersion()
	require.NoError(t, err)
	t.Logf("cuBLAS %s and cuBLASLt %s (version %d, CUDA runtime %d): %d entry points, %d resolved, %d failed",
		path, ltPath, lt, rt, len(res), len(res)-failed, failed)
	assert.Len(t, res, 538+50)
}

// Host scalars at fixed addresses: cuBLAS reads alpha and beta through
// them (the host pointer mode).
var one, zero = float32(1), float32(0)

// device copies host floats to new device memory, freed when t ends.
func device(t *testing.T, host []float32) cu.CUdeviceptr {
	t.Helper()
	var d cu.CUdeviceptr
	require.NoError(t, cu.MemAlloc(&d, uintptr(4*len(host))))
	t.Cleanup(func() { _ = cu.MemFree(d) })
	require.NoError(t, cu.MemcpyHtoD(d, unsafe.Pointer(&host[0]), uintptr(4*len(host))))
	return d
}

func readBack(t *testing.T, ctx cu.CUcontext, d cu.CUdeviceptr, n int) []float32 {
	t.Helper()
	require.NoError(t, cu.CtxSynchronize(ctx))
	out := make([]float32, n)
	require.NoError(t, cu.MemcpyDtoH(unsafe.Pointer(&out[0]), d, uintptr(4*n)))
	return out
}

// gemm2 is C = A·B for 2×2 column-major matrices.
func gemm2(a, b []float32) []float32 {
	c := make([]float32, 4)
	for i := 0; i < 2; i++ {
		for j := 0; j < 2; j++ {
			for k := 0; k < 2; k++ {
				c[i+2*j] += a[i+2*k] * b[k+2*j]
			}
		}
	}
	return c
}

// TestGPUCallsThroughEveryPath: real calls through each lowering: Sgemm
// (14 arguments), GemmStridedBatchedEx (23, beyond ccall's direct path on
// linux/amd64) and LtMatmul (16), each checked against the product
// computed here; a bad argument comes back as *Error naming the function.
func TestGPUCallsThroughEveryPath(t *testing.T) {
	ctx := gputest.PrimaryContext(t)
	var h cublasraw.Handle
	require.NoError(t, cublasraw.Create(&h))
	defer cublasraw.Destroy(h)
	var v int32
	require.NoError(t, cublasraw.GetVersion(h, &v))
	assert.GreaterOrEqual(t, v, int32(120000))

	a := []float32{1, 2, 3, 4, 5, 6, 7, 8}        // two 2×2 matrices
	b := []float32{9, 10, 11, 12, 13, 14, 15, 16} // two 2×2 matrices
	dA, dB := device(t, a), device(t, b)
	dC := device(t, make([]float32, 8))
	alpha, beta := uintptr(unsafe.Pointer(&one)), uintptr(unsafe.Pointer(&zero))

	require.NoError(t, cublasraw.Sgemm(h, cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_OP_N, 2, 2, 2,
		alpha, uintptr(dA), 2, uintptr(dB), 2, beta, uintptr(dC), 2))
	assert.Equal(t, gemm2(a[:4], b[:4]), readBack(t, ctx, dC, 4), "Sgemm")

	require.NoError(t, cublasraw.GemmStridedBatchedEx(h, cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_OP_N, 2, 2, 2,
		alpha, uintptr(dA), cublasraw.CUDA_R_32F, 2, 4, uintptr(dB), cublasraw.CUDA_R_32F, 2, 4,
		beta, uintptr(dC), cublasraw.CUDA_R_32F, 2, 4, 2, cublasraw.CUBLAS_COMPUTE_32F, cublasraw.CUBLAS_GEMM_DEFAULT))
	assert.Equal(t, append(gemm2(a[:4], b[:4]), gemm2(a[4:], b[4:])...), readBack(t, ctx, dC, 8), "GemmStridedBatchedEx")

	err := cublasraw.Sgemm(h, cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_OP_N, 2, 2, 2,
		alpha, uintptr(dA), 1, uintptr(dB), 2, beta, uintptr(dC), 2) // lda < m
	assert.ErrorIs(t, err, cublasraw.CUBLAS_STATUS_INVALID_VALUE)
	assert.Contains(t, err.Error(), "cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE (7)")

	var lt cublasraw.LtHandle
	require.NoError(t, cublasraw.LtCreate(&lt))
	defer cublasraw.LtDestroy(lt)
	var desc cublasraw.LtMatmulDesc
	require.NoError(t, cublasraw.LtMatmulDescCreate(&desc, cublasraw.CUBLAS_COMPUTE_32F, cublasraw.CUDA_R_32F))
	defer cublasraw.LtMatmulDescDestroy(desc)
	var layout cublasraw.LtMatrixLayout
	require.NoError(t, cublasraw.LtMatrixLayoutCreate(&layout, cublasraw.CUDA_R_32F, 2, 2, 2))
	defer cublasraw.LtMatrixLayoutDestroy(layout)
	dD := device(t, make([]float32, 4))
	l := layout
	require.NoError(t, cublasraw.LtMatmul(lt, desc, alpha, uintptr(dA)+16, l, uintptr(dB)+16, l, beta,
		uintptr(dD), l, uintptr(dD), l, nil, 0, 0, 0))
	assert.Equal(t, gemm2(a[4:], b[4:]), readBack(t, ctx, dD, 4), "LtMatmul")
}
