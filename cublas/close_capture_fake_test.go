//go:build linux

package cublas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestHandleClosedInCaptureFromFake: a Handle whose last reference goes
// while a stream of its context is being captured (closed inside the
// capture, with none of its routines captured) is destroyed once the
// capture is over: cublasDestroy waits for the device, which would
// invalidate the capture. The capture ends well, and the cuBLAS handle
// goes afterwards.
func TestHandleClosedInCaptureFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	live := liveHandles(t)
	for _, mode := range []graph.CaptureMode{graph.CaptureGlobal, graph.CaptureThreadLocal, graph.CaptureRelaxed} {
		h, err := cublas.NewHandle(e.s, &cublas.Options{WorkspaceBytes: 1 << 10})
		require.NoError(t, err)
		var closeErr error
		g, err := graph.Capture(e.s, mode, func(*driver.Stream) error {
			closeErr = h.Close()
			return nil
		})
		require.NoError(t, err, "mode %d: the capture ends well", mode)
		assert.NoError(t, closeErr, "mode %d", mode)
		require.NoError(t, g.Close())
		waitFor(t, "fake_cublas_live_handles", live)
	}
}
