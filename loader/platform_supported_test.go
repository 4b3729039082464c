//go:build linux || windows

package loader_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/loader"
)

// TestSupportedPlatformSearches: on Linux and Windows a missing library is a
// search that failed, never "unsupported platform".
func TestSupportedPlatformSearches(t *testing.T) {
	if _, err := loader.Driver(); err != nil {
		assert.NotErrorIs(t, err, loader.ErrUnsupportedPlatform)
		var nf *loader.NotFoundError
		assert.ErrorAs(t, err, &nf)
	}
	if _, err := loader.NVRTC(); err != nil {
		assert.NotErrorIs(t, err, loader.ErrUnsupportedPlatform)
	}
}
