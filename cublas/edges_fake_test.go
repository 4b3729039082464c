//go:build linux

package cublas_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// TestEmptyOperandsFromFake: zero-sized products, batches and vectors
// are accepted (an empty view may sit at its buffer's end), touch nothing
// and leave the reductions' results at 0 (Iamax -1).
func TestEmptyOperandsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	bh := data[float64](6, 1)
	b := up(t, e.s, bh)
	end := func(rows, cols int) cublas.Matrix[float64] {
		return cublas.Matrix[float64]{Buf: b, Offset: 6, Rows: rows, Cols: cols, LD: max(rows, 1)}
	}
	A := cublas.ColMajorMatrix(b, 2, 3)
	require.NoError(t, cublas.Gemm(e.h, 1, end(0, 3), A.T(), 0, end(0, 2)), "m = 0")
	require.NoError(t, cublas.Gemm(e.h, 1, A.T(), end(2, 0), 0, end(3, 0)), "n = 0")
	sq := cublas.ColMajorMatrix(b, 2, 2) // batch 0 is checked even when there is none; no overlap then
	require.NoError(t, cublas.GemmStridedBatched(e.h, 1, sq, 4, sq, 4, 0, sq, 4, 0), "no batch")
	require.NoError(t, cublas.Gemv(e.h, 1, end(0, 0), cublas.Vector[float64]{Buf: b, Offset: 6}, 1, cublas.Vector[float64]{Buf: b, Offset: 6}))
	x := cublas.Vector[float64]{Buf: b, Offset: 6, N: 0, Inc: 1}
	require.NoError(t, cublas.Axpy(e.h, 2, x, x))
	require.NoError(t, cublas.Scal(e.h, 2, x))
	d, err := cublas.Dot(e.h, x, x)
	require.NoError(t, err)
	assert.Zero(t, d)
	s, err := cublas.Asum(e.h, x)
	require.NoError(t, err)
	assert.Zero(t, s)
	i, err := cublas.Iamax(e.h, x)
	require.NoError(t, err)
	assert.Equal(t, -1, i)
	assert.Equal(t, bh, down(t, e.s, b))
	past := x
	past.Offset = 7
	assert.ErrorIs(t, cublas.Scal(e.h, 2, past), cublas.ErrOutOfBounds, "an empty view past the end")
	noBadUses(t)
}

// TestComplexSyrkConjugateRefusedFromFake: Syrk takes no conjugate
// transpose of a complex A (that is Herk): refused before cuBLAS; for a
// real A it is a transpose and computes.
func TestComplexSyrkConjugateRefusedFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	z, w := up(t, e.s, data[complex64](6, 1)), up(t, e.s, make([]complex64, 9))
	err := cublas.Syrk(e.h, cublas.Upper, 1, cublas.ColMajorMatrix(z, 2, 3).H(), 0, cublas.ColMajorMatrix(w, 3, 3))
	assert.ErrorIs(t, err, cublas.ErrShape)
	assert.Contains(t, err.Error(), "cublas: Syrk: A:")
	assert.Zero(t, opsRun(t))
}

// TestDroppedHandleHeldByGraphFromFake: a Handle dropped without Close
// after one of its routines was captured stays alive for the executable,
// whose launches compute; once the executable is closed the cleanup
// destroys it.
func TestDroppedHandleHeldByGraphFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	x := up(t, e.s, []float32{1, -2, 3})
	var exec *graph.Exec
	func() {
		h, err := cublas.NewHandle(e.s, &cublas.Options{WorkspaceBytes: 1 << 12})
		require.NoError(t, err)
		g, err := graph.Capture(e.s, graph.CaptureThreadLocal, func(*driver.Stream) error {
			return cublas.Scal(h, -1, cublas.VectorOf(x))
		})
		require.NoError(t, err)
		defer g.Close()
		exec, err = g.Instantiate()
		require.NoError(t, err)
	}()
	for i := 0; i < 3; i++ {
		runtime.GC()
		lifetime.Flush()
	}
	assert.EqualValues(t, 2, liveHandles(t), "held by the executable")
	for i := 0; i < 3; i++ {
		require.NoError(t, exec.Launch(e.s))
	}
	assert.Equal(t, []float32{-1, 2, -3}, down(t, e.s, x))
	require.NoError(t, exec.Close())
	deadline := time.Now().Add(20 * time.Second)
	for liveHandles(t) != 1 && time.Now().Before(deadline) {
		runtime.GC()
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, 1, liveHandles(t), "destroyed once the executable is gone")
	noBadUses(t)
}

// TestIamaxToNeeds32BitsFromFake: IamaxTo writes an int32, so x must fit
// cuBLAS's 32-bit call: a huge increment (even on one element) is refused
// before cuBLAS, the message naming the increment.
func TestIamaxToNeeds32BitsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	x := cublas.Vector[float32]{Buf: up(t, e.s, []float32{3}), N: 1, Inc: 1 << 40}
	r := cublas.VectorOf(up(t, e.s, []int32{0}))
	err := cublas.IamaxTo(e.h, x, r)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "cublas: IamaxTo: x: length 1 or increment 1099511627776")
	assert.Zero(t, opsRun(t))
}
