//go:build !linux && !windows

package loader_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/loader"
)

// TestUnsupportedPlatform runs on macOS and the BSDs (CI type-checks it with
// GOOS=darwin go vet): nothing is searched there, and the error says why.
func TestUnsupportedPlatform(t *testing.T) {
	t.Setenv("PURECUDA_LIBCUDA", "/nonexistent/libcuda.so.1") // not even an override is tried
	for _, open := range []func() (*loader.Library, error){loader.Driver, loader.NVRTC} {
		lib, err := open()
		assert.Nil(t, lib)
		var up *loader.UnsupportedPlatformError
		if assert.ErrorAs(t, err, &up) {
			assert.ErrorIs(t, err, loader.ErrNotFound)
			assert.Contains(t, err.Error(), "unsupported platform")
			assert.NotContains(t, err.Error(), "libcuda.so")
			assert.NotContains(t, err.Error(), "/usr/local/cuda")
		}
	}
}
