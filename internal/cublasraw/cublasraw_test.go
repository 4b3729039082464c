package cublasraw_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/loader"
)

func TestStatusErrors(t *testing.T) {
	err := error(&cublasraw.Error{Func: "cublasSgemm_v2", Code: cublasraw.CUBLAS_STATUS_INVALID_VALUE})
	assert.Equal(t, "cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE (7)", err.Error())
	assert.ErrorIs(t, err, cublasraw.CUBLAS_STATUS_INVALID_VALUE)
	assert.NotErrorIs(t, err, cublasraw.CUBLAS_STATUS_NOT_SUPPORTED)
	assert.Equal(t, "CUBLAS_STATUS_ARCH_MISMATCH", cublasraw.CUBLAS_STATUS_ARCH_MISMATCH.Name())
	assert.Equal(t, "cublasStatus_t(99)", cublasraw.Status(99).Name())
	assert.Equal(t, "cublasStatus_t(-1)", cublasraw.Status(-1).Name())
	assert.Equal(t, "CUBLAS_OP_C", cublasraw.CUBLAS_OP_HERMITAN.String(), "an alias is named by its first name")
	assert.Equal(t, "CUBLASLT_EPILOGUE_RELU", cublasraw.CUBLASLT_EPILOGUE_RELU.String())
	assert.Equal(t, "CUDA_R_16BF", cublasraw.CUDA_R_16BF.String())
}

func TestSymbolError(t *testing.T) {
	inner := errors.New("undefined symbol: cublasLtGroupedMatmul")
	err := error(&cublasraw.SymbolError{Func: "cublasLtGroupedMatmul", Path: "/x/libcublasLt.so.12", Err: inner})
	assert.Equal(t, "cublasLtGroupedMatmul: not exported by /x/libcublasLt.so.12: undefined symbol: cublasLtGroupedMatmul", err.Error())
	assert.ErrorIs(t, err, cublasraw.ErrNotSupported)
	assert.ErrorIs(t, err, inner)
}

// TestTables: both tables are there, each entry point in the right one,
// the _v2 exports bound under the names C code calls.
func TestTables(t *testing.T) {
	n, lt := cublasraw.Counts()
	assert.Equal(t, 538, n)
	assert.Equal(t, 50, lt) // cublasLt.h's five static inline Init wrappers are not exported
}

// TestWithoutCUBLAS: with no libcublas, every call returns the loader's
// error listing where it looked, and nothing panics.
func TestWithoutCUBLAS(t *testing.T) {
	if path, err := cublasraw.Load(); err == nil {
		t.Skipf("cuBLAS is present here (%s)", path)
	}
	var h cublasraw.Handle
	err := cublasraw.Create(&h)
	require.Error(t, err)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.Contains(t, err.Error(), "cuBLAS library not found")
	assert.Contains(t, err.Error(), "PURECUDA_LIBCUBLAS")
	v, err := cublasraw.GetCudartVersion()
	assert.Zero(t, v)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.ErrorIs(t, cublasraw.GemmStridedBatchedEx(h, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0), loader.ErrNotFound)
	for _, r := range cublasraw.ResolveAll() {
		if !r.Lt {
			assert.ErrorIs(t, r.Err, loader.ErrNotFound, r.Func)
			assert.Contains(t, r.Err.Error(), "PURECUDA_LIBCUBLAS ", r.Func)
		}
	}
}

// TestWithoutCUBLASLt: the same for cuBLASLt, whose functions look for
// libcublasLt.
func TestWithoutCUBLASLt(t *testing.T) {
	if path, err := cublasraw.LoadLt(); err == nil {
		t.Skipf("cuBLASLt is present here (%s)", path)
	}
	var h cublasraw.LtHandle
	err := cublasraw.LtCreate(&h)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.Contains(t, err.Error(), "cuBLASLt library not found")
	assert.Contains(t, err.Error(), "PURECUDA_LIBCUBLASLT")
	assert.ErrorIs(t, cublasraw.LtMatmul(h, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, nil, 0, 0, 0), loader.ErrNotFound)
	for _, r := range cublasraw.ResolveAll() {
		if r.Lt {
			assert.ErrorIs(t, r.Err, loader.ErrNotFound, r.Func)
			assert.Contains(t, r.Err.Error(), "PURECUDA_LIBCUBLASLT", r.Func)
		}
	}
}
