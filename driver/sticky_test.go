package driver_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/driver"
)

// The statuses whose description in CUDA 13.0's cuda.h says the process is
// left in an inconsistent state and must be terminated and relaunched
// (cudaErrorAssert's says so in the runtime's documentation).
var stickyStatuses = map[driver.Status]bool{
	226: true, // CUDA_ERROR_CONTAINED
	700: true, // CUDA_ERROR_ILLEGAL_ADDRESS
	702: true, // CUDA_ERROR_LAUNCH_TIMEOUT
	710: true, // CUDA_ERROR_ASSERT
	714: true, // CUDA_ERROR_HARDWARE_STACK_ERROR
	715: true, // CUDA_ERROR_ILLEGAL_INSTRUCTION
	716: true, // CUDA_ERROR_MISALIGNED_ADDRESS
	717: true, // CUDA_ERROR_INVALID_ADDRESS_SPACE
	718: true, // CUDA_ERROR_INVALID_PC
	719: true, // CUDA_ERROR_LAUNCH_FAILED
	721: true, // CUDA_ERROR_TENSOR_MEMORY_LEAK
	810: true, // CUDA_ERROR_MPS_CLIENT_TERMINATED
	911: true, // CUDA_ERROR_EXTERNAL_DEVICE
}

// errors.Is(err, ErrSticky) holds for exactly the unrecoverable faults:
// for a *Error built from the code, for one wrapped, and for the bare
// Status; no other status from 0 to 1000 matches, not even the near
// misses (701 out of resources, 720 cooperative launch too large, 214 ECC,
// 709 context destroyed).
func TestErrStickyMatchesExactlyTheUnrecoverableFaults(t *testing.T) {
	for code := driver.Status(0); code <= 1000; code++ {
		want := stickyStatuses[code]
		err := error(&driver.Error{Func: "cuStreamSynchronize", Code: code})
		assert.Equal(t, want, errors.Is(err, driver.ErrSticky), "%v", code)
		assert.Equal(t, want, errors.Is(fmt.Errorf("step: %w", err), driver.ErrSticky), "wrapped %v", code)
		assert.Equal(t, want, errors.Is(code, driver.ErrSticky), "bare %v", code)
		assert.ErrorIs(t, err, code, "a sticky error still matches its own status")
	}
	for _, near := range []driver.Status{driver.ErrLaunchOutOfResources, driver.ErrCooperativeLaunchTooLarge,
		driver.ErrEccUncorrectable, driver.ErrContextIsDestroyed, driver.ErrOutOfMemory, driver.ErrNotReady} {
		assert.NotErrorIs(t, &driver.Error{Func: "cuLaunchKernel", Code: near}, driver.ErrSticky, "%v", near)
	}
	// ErrSticky is not a status: a sticky error matches no other target,
	// and ErrSticky matches no other sentinel.
	err := &driver.Error{Func: "cuCtxCreate", Code: driver.ErrIllegalAddress}
	assert.NotErrorIs(t, err, driver.ErrNotSupported)
	assert.NotErrorIs(t, err, driver.ErrInvalidArgument)
	assert.NotErrorIs(t, driver.ErrSticky, driver.ErrIllegalAddress)
	assert.Contains(t, driver.ErrSticky.Error(), "the process must exit")
}
