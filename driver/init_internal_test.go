package driver

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/loader"
)

// TestInitDriverNoGPU: initDriver (Init's checks after the library loaded)
// turns a driver older than CUDA 12.0, no device and a stub libcuda into
// errors matching ErrNoGPU, keeping CUDA's status; any other cuInit failure
// is not "no GPU".
func TestInitDriverNoGPU(t *testing.T) {
	called := false
	cuInit := func(flags uint32) error { called = true; return nil }

	err := initDriver("/usr/lib/libcuda.so.1", 11080, cuInit)
	assert.ErrorIs(t, err, ErrNoGPU)
	assert.False(t, called, "cuInit is not called on a driver purecuda cannot run on")
	assert.ErrorContains(t, err, "/usr/lib/libcuda.so.1 implements CUDA 11.8; purecuda needs CUDA 12.0")

	assert.NoError(t, initDriver("libcuda.so.1", 12000, cuInit))
	assert.True(t, called)
	assert.NoError(t, initDriver("libcuda.so.1", 13000, cuInit))

	for _, code := range []Status{ErrNoDevice, ErrStubLibrary} {
		err := initDriver("libcuda.so.1", 13000, func(uint32) error { return &Error{Func: "cuInit", Code: code} })
		assert.ErrorIs(t, err, ErrNoGPU, "%v", code)
		assert.ErrorIs(t, err, code, "CUDA's status still matches")
		var de *Error
		assert.ErrorAs(t, err, &de)
		assert.Contains(t, err.Error(), "no usable GPU: cuInit: "+code.String())
	}
	for _, code := range []Status{ErrSystemDriverMismatch, ErrInvalidValue, ErrOperatingSystem} {
		err := initDriver("libcuda.so.1", 13000, func(uint32) error { return &Error{Func: "cuInit", Code: code} })
		assert.ErrorIs(t, err, code)
		assert.NotErrorIs(t, err, ErrNoGPU, "%v is a failure on a machine with a GPU", code)
	}
}

// TestLoadErrorStub: a stub libcuda that already refuses
// cuDriverGetVersion (while the library loads) is no GPU too; other load
// errors are left as they are.
func TestLoadErrorStub(t *testing.T) {
	assert.NoError(t, loadError(nil))
	stub := loadError(&Error{Func: "cuDriverGetVersion", Code: ErrStubLibrary})
	assert.ErrorIs(t, stub, ErrNoGPU)
	assert.ErrorIs(t, stub, ErrStubLibrary)
	other := &Error{Func: "cuDriverGetVersion", Code: ErrUnknown}
	assert.Equal(t, error(other), loadError(other))
	nf := &loader.NotFoundError{Library: loader.KindDriver}
	assert.Equal(t, error(nf), loadError(nf), "already ErrNoGPU: not wrapped twice")
}

// TestErrNoGPUThroughLoader: the loader's errors for the driver match
// ErrNoGPU (package driver installs it at init); NVRTC's do not.
func TestErrNoGPUThroughLoader(t *testing.T) {
	drv := error(&loader.NotFoundError{Library: loader.KindDriver, EnvVar: "PURECUDA_LIBCUDA"})
	assert.ErrorIs(t, drv, ErrNoGPU)
	assert.ErrorIs(t, drv, loader.ErrNotFound)
	nvrtc := error(&loader.NotFoundError{Library: loader.KindNVRTC, EnvVar: "PURECUDA_LIBNVRTC"})
	assert.NotErrorIs(t, nvrtc, ErrNoGPU, "NVRTC missing is not no GPU")
	assert.ErrorIs(t, nvrtc, loader.ErrNotFound)
	assert.ErrorIs(t, &loader.UnsupportedPlatformError{Library: loader.KindNVRTC, GOOS: "darwin", GOARCH: "arm64"}, ErrNoGPU,
		"an operating system without CUDA has no GPU, whatever library is asked for")
	assert.NotErrorIs(t, &loader.UnsupportedPlatformError{Library: loader.KindNCCL, GOOS: "windows", GOARCH: "amd64"}, ErrNoGPU,
		"NCCL missing on Windows is not no GPU")
	wrapped := errors.Join(errors.New("context"), drv)
	assert.ErrorIs(t, wrapped, ErrNoGPU)
	assert.Equal(t, "12.0", cu.FormatVersion(minDriverVersion))
}
