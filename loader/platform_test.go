package loader_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/loader"
)

func TestUnsupportedPlatformError(t *testing.T) {
	err := error(&loader.UnsupportedPlatformError{Library: loader.KindDriver, GOOS: "darwin", GOARCH: "arm64"})
	assert.ErrorIs(t, err, loader.ErrUnsupportedPlatform)
	assert.ErrorIs(t, err, loader.ErrNotFound, "callers that treat a missing driver as no GPU need no special case")
	assert.NotErrorIs(t, err, loader.ErrWrongLibrary)
	assert.Contains(t, err.Error(), "CUDA driver library: unsupported platform darwin/arm64")
	assert.Contains(t, err.Error(), loader.SupportedPlatforms)
	assert.NotContains(t, err.Error(), ".so", "nothing is searched, so no library is named")
}
