//go:build linux

package cublas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestMatmulPlanLargeShapesFromFake: a plan's shapes are limited by
// cuBLASLt's 32-bit sizes, not by the template views' buffers: a D of
// more than 2^32 elements (65536×65537, 16 GiB of float32, which a large
// GPU holds) is planned; a leading dimension past 2^31-1 is refused.
func TestMatmulPlanLargeShapesFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	var f32 *driver.Buffer[float32]
	var f16 *driver.Buffer[cublas.Half]
	const m, n = 1 << 16, 1<<16 + 1
	for _, l := range []cublas.Layout{cublas.ColMajor, cublas.RowMajor} {
		A := cublas.Matrix[float32]{Buf: f32, Rows: m, Cols: 1, Layout: l}
		B := cublas.Matrix[float32]{Buf: f32, Rows: 1, Cols: n, Layout: l}
		D := cublas.Matrix[float32]{Buf: f32, Rows: m, Cols: n, Layout: l}
		p, err := cublas.NewMatmulPlan(e.h, A, B, D, nil)
		if assert.NoError(t, err, "layout %d", l) {
			assert.NoError(t, p.Close())
		}
		// Half inputs of as many elements.
		Ah := cublas.Matrix[cublas.Half]{Buf: f16, Rows: m, Cols: 1 << 16, Layout: l}
		Bh := cublas.Matrix[cublas.Half]{Buf: f16, Rows: 1 << 16, Cols: n, Layout: l}
		ph, err := cublas.NewMatmulPlan(e.h, Ah, Bh, D, nil)
		if err == nil {
			assert.NoError(t, ph.Close())
		} else {
			assert.ErrorIs(t, err, cublas.ErrNotSupported, "the fake lacks half types, nothing else: layout %d", l)
		}
	}
	A := cublas.Matrix[float32]{Buf: f32, Rows: 2, Cols: 2, LD: 1 << 31}
	B := cublas.ColMajorMatrix(f32, 2, 2)
	p, err := cublas.NewMatmulPlan(e.h, A, B, cublas.ColMajorMatrix(f32, 2, 2), nil)
	assert.Nil(t, p)
	require.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "beyond 2^31-1")
}
