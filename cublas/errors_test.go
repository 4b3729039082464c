package cublas_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// TestStatusText: every status reads as its C name, code and meaning;
// StatusInvalidValue matches driver.ErrInvalidArgument, StatusNotSupported
// ErrNotSupported, and no other status either.
func TestStatusText(t *testing.T) {
	assert.Equal(t, "CUBLAS_STATUS_INVALID_VALUE (7): an invalid numeric value was used as an argument", cublas.StatusInvalidValue.Error())
	assert.Equal(t, "CUBLAS_STATUS_INVALID_VALUE", cublas.StatusInvalidValue.String())
	names := map[cublas.Status]string{
		cublas.StatusNotInitialized: "CUBLAS_STATUS_NOT_INITIALIZED", cublas.StatusAllocFailed: "CUBLAS_STATUS_ALLOC_FAILED",
		cublas.StatusArchMismatch: "CUBLAS_STATUS_ARCH_MISMATCH", cublas.StatusMappingError: "CUBLAS_STATUS_MAPPING_ERROR",
		cublas.StatusExecutionFailed: "CUBLAS_STATUS_EXECUTION_FAILED", cublas.StatusInternalError: "CUBLAS_STATUS_INTERNAL_ERROR",
		cublas.StatusNotSupported: "CUBLAS_STATUS_NOT_SUPPORTED", cublas.StatusLicenseError: "CUBLAS_STATUS_LICENSE_ERROR",
	}
	for s, name := range names {
		assert.Equal(t, name, s.String())
		assert.Contains(t, s.Error(), name+" (")
		assert.NotContains(t, s.Error(), "unknown status", name)
		assert.Equal(t, s == cublas.StatusNotSupported, errors.Is(s, cublas.ErrNotSupported), name)
		assert.False(t, errors.Is(s, driver.ErrInvalidArgument), name)
	}
	assert.ErrorIs(t, cublas.StatusInvalidValue, driver.ErrInvalidArgument)
	assert.NotErrorIs(t, cublas.StatusInvalidValue, cublas.ErrNotSupported)
	assert.Equal(t, "cublasStatus_t(99) (99): unknown status", cublas.Status(99).Error())
	e := &cublas.Error{Op: "Gemm", Func: "cublasSgemm_v2", Status: cublas.StatusInvalidValue}
	assert.Equal(t, "cublas: Gemm: cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE (7): an invalid numeric value was used as an argument", e.Error())
	assert.ErrorIs(t, e, driver.ErrInvalidArgument)
	assert.ErrorIs(t, e, cublas.StatusInvalidValue)
	assert.NotErrorIs(t, e, cublas.StatusInternalError)
	for _, kind := range []error{cublas.ErrShape, cublas.ErrOutOfBounds, cublas.ErrAlias} {
		assert.NotErrorIs(t, kind, driver.ErrInvalidArgument, "the kinds themselves are plain sentinels")
	}
}
