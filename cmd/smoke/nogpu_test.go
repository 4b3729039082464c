package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/loader"
)

// TestNoGPUIfUsesTheSentinel: smoke's exit status 2 is decided by
// driver.ErrNoGPU, so it agrees with what programs test.
func TestNoGPUIfUsesTheSentinel(t *testing.T) {
	var ng *noGPUError

	drv := fmt.Errorf("driver: cannot load the CUDA driver: %w", &loader.NotFoundError{Library: loader.KindDriver, EnvVar: "PURECUDA_LIBCUDA"})
	if assert.ErrorAs(t, noGPUIf(drv, "no CUDA driver library found"), &ng) {
		assert.Equal(t, "no CUDA driver library found", ng.why)
	}

	mac := &loader.UnsupportedPlatformError{Library: loader.KindDriver, GOOS: "darwin", GOARCH: "arm64"}
	if assert.ErrorAs(t, noGPUIf(mac, "no CUDA driver library found"), &ng) {
		assert.Equal(t, "unsupported platform darwin/arm64", ng.why)
	}

	old := fmt.Errorf("driver: libcuda.so.1 implements CUDA 11.8: %w", driver.ErrNoGPU)
	if assert.ErrorAs(t, noGPUIf(old, "the driver is older than CUDA 12.0"), &ng) {
		assert.Equal(t, "the driver is older than CUDA 12.0", ng.why)
	}

	for _, err := range []error{
		&loader.NotFoundError{Library: loader.KindNVRTC, EnvVar: "PURECUDA_LIBNVRTC"},
		&driver.Error{Func: "cuInit", Code: driver.ErrSystemDriverMismatch},
		errors.New("something else"),
	} {
		got := noGPUIf(err, "why")
		assert.False(t, errors.As(got, &ng), "%v is a failure, not no GPU", err)
		assert.Equal(t, err, got)
	}
}
