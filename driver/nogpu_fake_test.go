//go:build linux

package driver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/loader"
)

// TestFakeNoDeviceIsNoGPU: a driver library that loads but whose cuInit
// reports CUDA_ERROR_NO_DEVICE (a machine whose GPU is not visible, a
// container started without --gpus) gives, from Init and every entry point
// after it, an error matching ErrNoGPU and CUDA's own status.
func TestFakeNoDeviceIsNoGPU(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	faketest.FailNext(t, "cuInit", int32(driver.ErrNoDevice))
	path, err := driver.LibraryPath()
	require.NoError(t, err, "the library itself loads")
	assert.Equal(t, faketest.Path(), path)

	err = driver.Init()
	require.Error(t, err)
	assert.ErrorIs(t, err, driver.ErrNoGPU)
	assert.ErrorIs(t, err, driver.ErrNoDevice)
	assert.NotErrorIs(t, err, loader.ErrNotFound, "the library was found")
	assert.Contains(t, err.Error(), "no usable GPU: cuInit: CUDA_ERROR_NO_DEVICE")

	_, err = driver.DeviceCount()
	assert.ErrorIs(t, err, driver.ErrNoGPU, "Init's outcome is kept")
	_, err = driver.DeviceByOrdinal(0)
	assert.ErrorIs(t, err, driver.ErrNoGPU)
}
