//go:build linux

package cublas

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
)

// quickEnv is a handle on a stream of the fake device's primary context.
func quickEnv(t *testing.T) (*Handle, *driver.Stream) {
	t.Helper()
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ctx.Close() })
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	h, err := NewHandle(s, &Options{WorkspaceBytes: 1 << 16})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h, s
}

func quickUp[T any](t *testing.T, s *driver.Stream, v []T) *driver.Buffer[T] {
	t.Helper()
	b, err := driver.AllocCopy(s, v)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestGemmQuickPathFromFake: Gemm's quick path takes the common case
// (each layout and operation of A and B, views into their buffers) and
// computes what the general path computes; it leaves to the general path,
// having queued nothing, a closed buffer, a captured stream, C
// overlapping A, a closed handle and the _64 sizes it does not check.
func TestGemmQuickPathFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	h, s := quickEnv(t)
	av, bv := make([]float32, 40), make([]float32, 40)
	for i := range av {
		av[i], bv[i] = float32(i%7-3), float32(i%5-2)
	}
	a, b := quickUp(t, s, av), quickUp(t, s, bv)
	for _, la := range []Layout{ColMajor, RowMajor} {
		for _, lb := range []Layout{ColMajor, RowMajor} {
			for _, lc := range []Layout{ColMajor, RowMajor} {
				for _, ta := range []bool{false, true} {
					A := Matrix[float32]{Buf: a, Offset: 1, Rows: 3, Cols: 4, LD: 6, Layout: la}
					if ta {
						A = Matrix[float32]{Buf: a, Offset: 1, Rows: 4, Cols: 3, LD: 6, Layout: la}.T()
					}
					B := Matrix[float32]{Buf: b, Offset: 2, Rows: 4, Cols: 2, LD: 5, Layout: lb}
					c1, c2 := quickUp(t, s, make([]float32, 12)), quickUp(t, s, make([]float32, 12))
					C1 := Matrix[float32]{Buf: c1, Offset: 2, Rows: 3, Cols: 2, Layout: lc}
					C2 := C1
					C2.Buf = c2
					ok, err := gemmQuick(h, 2, &A, &B, 0, &C1)
					require.True(t, ok, "%v %v %v %v: the quick path takes it", la, lb, lc, ta)
					require.NoError(t, err)
					require.NoError(t, gemmGeneral(h, 2, A, B, 0, C2))
					g1, err := c1.ToHost(s)
					require.NoError(t, err)
					g2, err := c2.ToHost(s)
					require.NoError(t, err)
					assert.Equal(t, g2, g1, "%v %v %v %v", la, lb, lc, ta)
					assert.NotEqual(t, make([]float32, 12), g1)
				}
			}
		}
	}

	ops := func() int64 { return faketest.CUBLAS(t, "fake_cublas_ops_run") }
	require.NoError(t, s.Synchronize())
	before := ops()
	A, B := ColMajorMatrix(a, 4, 4), ColMajorMatrix(b, 4, 4)
	c := quickUp(t, s, make([]float32, 16))
	C := ColMajorMatrix(c, 4, 4)
	closed, err := driver.Alloc[float32](h.Context(), 16)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	declined := func(name string, h *Handle, a, b, c Matrix[float32]) {
		t.Helper()
		ok, err := gemmQuick(h, 1, &a, &b, 0, &c)
		assert.False(t, ok, name)
		assert.NoError(t, err, name)
	}
	declined("closed buffer", h, A, B, ColMajorMatrix(closed, 4, 4))
	declined("nil buffer", h, A, Matrix[float32]{Rows: 4, Cols: 4}, C)
	declined("C overlaps A", h, A, B, ColMajorMatrix(a, 4, 4))
	declined("empty", h, ColMajorMatrix(a, 4, 0), ColMajorMatrix(b, 0, 4), C)
	declined("out of bounds", h, Matrix[float32]{Buf: a, Rows: 4, Cols: 4, LD: 20}, B, C)
	declined("nil handle", nil, A, B, C)
	g, err := graph.Capture(s, graph.CaptureGlobal, func(*driver.Stream) error {
		declined("captured stream", h, A, B, C)
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, g.Close())
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before, ops(), "nothing queued")
	h2, _ := quickEnv(t)
	require.NoError(t, h2.Close())
	declined("closed handle", h2, A, B, C)
	faketest.NoBadUses(t)
}
