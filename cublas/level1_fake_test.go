//go:build linux

package cublas_test

import (
	"fmt"
	"math"
	"math/cmplx"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// incs are the increments the level-1 tests try, negative ones included
// (the vector then runs from its end).
var incs = []int{1, 2, -1, -3}

// vec is an n-element view with increment inc at offset 1 of a fresh
// buffer of data (seed), just long enough.
func vec[T cublas.Float](t *testing.T, e *fenv, n, inc, seed int) (cublas.Vector[T], []T) {
	t.Helper()
	a := inc
	if a < 0 {
		a = -a
	}
	host := data[T](1+(n-1)*a+1+2, seed)
	return cublas.Vector[T]{Buf: up(t, e.s, host), Offset: 1, N: n, Inc: inc}, host
}

// level1EveryInc runs Axpy, Scal, Copy and Swap for T with every pair of
// increments, against plain Go over the whole buffers.
func level1EveryInc[T cublas.Float](t *testing.T, e *fenv) {
	const n = 5
	alpha := scalar[T](3, -2)
	for _, ix := range incs {
		for _, iy := range incs {
			name := fmt.Sprintf("%T incx %d incy %d", *new(T), ix, iy)
			// Axpy.
			x, xh := vec[T](t, e, n, ix, 1)
			y, yh := vec[T](t, e, n, iy, 2)
			require.NoError(t, cublas.Axpy(e.h, alpha, x, y), name)
			want := append([]T(nil), yh...)
			for k := 0; k < n; k++ {
				want[vidx(y, k)] = fromC[T](toC(alpha)*toC(xh[vidx(x, k)]) + toC(yh[vidx(y, k)]))
			}
			assert.Equal(t, want, down(t, e.s, y.Buf), "Axpy %s", name)
			assert.Equal(t, xh, down(t, e.s, x.Buf), "Axpy %s: x", name)

			// Copy.
			x, xh = vec[T](t, e, n, ix, 3)
			y, yh = vec[T](t, e, n, iy, 4)
			require.NoError(t, cublas.Copy(e.h, x, y), name)
			want = append([]T(nil), yh...)
			for k := 0; k < n; k++ {
				want[vidx(y, k)] = xh[vidx(x, k)]
			}
			assert.Equal(t, want, down(t, e.s, y.Buf), "Copy %s", name)

			// Swap.
			x, xh = vec[T](t, e, n, ix, 5)
			y, yh = vec[T](t, e, n, iy, 6)
			require.NoError(t, cublas.Swap(e.h, x, y), name)
			wx, wy := append([]T(nil), xh...), append([]T(nil), yh...)
			for k := 0; k < n; k++ {
				wx[vidx(x, k)], wy[vidx(y, k)] = yh[vidx(y, k)], xh[vidx(x, k)]
			}
			assert.Equal(t, wx, down(t, e.s, x.Buf), "Swap %s: x", name)
			assert.Equal(t, wy, down(t, e.s, y.Buf), "Swap %s: y", name)
		}
		if ix < 0 {
			continue // Scal needs a positive increment
		}
		x, xh := vec[T](t, e, n, ix, 7)
		require.NoError(t, cublas.Scal(e.h, alpha, x))
		want := append([]T(nil), xh...)
		for k := 0; k < n; k++ {
			want[vidx(x, k)] = fromC[T](toC(alpha) * toC(xh[vidx(x, k)]))
		}
		assert.Equal(t, want, down(t, e.s, x.Buf), "Scal %T inc %d", *new(T), ix)
	}
	// Axpy with y being x itself: y = (alpha+1)·x.
	x, xh := vec[T](t, e, n, 2, 8)
	require.NoError(t, cublas.Axpy(e.h, alpha, x, x))
	want := append([]T(nil), xh...)
	for k := 0; k < n; k++ {
		want[vidx(x, k)] = fromC[T]((toC(alpha) + 1) * toC(xh[vidx(x, k)]))
	}
	assert.Equal(t, want, down(t, e.s, x.Buf), "Axpy in place")
}

// TestLevel1VectorsFromFake: Axpy, Scal, Copy, Swap for the four types.
func TestLevel1VectorsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	level1EveryInc[float32](t, e)
	level1EveryInc[float64](t, e)
	level1EveryInc[complex64](t, e)
	level1EveryInc[complex128](t, e)
}

// reductions checks Dot, Dotc, Nrm2, Asum, Iamax (host results) and
// DotTo, DotcTo, Nrm2To, AsumTo, IamaxTo (device results, written into one
// element of a larger buffer whose others stay) for T against plain Go.
func reductions[T cublas.Float, R cublas.Real](t *testing.T, e *fenv) {
	const n = 6
	for _, ix := range incs {
		for _, iy := range incs {
			name := fmt.Sprintf("%T incx %d incy %d", *new(T), ix, iy)
			x, xh := vec[T](t, e, n, ix, 1)
			y, yh := vec[T](t, e, n, iy, 2)
			var dot, dotc complex128
			for k := 0; k < n; k++ {
				a, b := toC(xh[vidx(x, k)]), toC(yh[vidx(y, k)])
				dot += a * b
				dotc += cmplx.Conj(a) * b
			}
			got, err := cublas.Dot(e.h, x, y)
			require.NoError(t, err, name)
			assert.Equal(t, fromC[T](dot), got, "Dot %s", name)
			got, err = cublas.Dotc(e.h, x, y)
			require.NoError(t, err, name)
			assert.Equal(t, fromC[T](dotc), got, "Dotc %s", name)

			rh := data[T](4, 9)
			r := cublas.Vector[T]{Buf: up(t, e.s, rh), Offset: 2, N: 1}
			require.NoError(t, cublas.DotTo(e.h, x, y, r), name)
			want := append([]T(nil), rh...)
			want[2] = fromC[T](dot)
			assert.Equal(t, want, down(t, e.s, r.Buf), "DotTo %s", name)
			require.NoError(t, cublas.DotcTo(e.h, x, y, r), name)
			want[2] = fromC[T](dotc)
			assert.Equal(t, want, down(t, e.s, r.Buf), "DotcTo %s", name)
		}
		if ix < 0 {
			continue // the single-vector reductions need a positive increment
		}
		name := fmt.Sprintf("%T inc %d", *new(T), ix)
		x, xh := vec[T](t, e, n, ix, 3)
		var sq, asum float64
		best, bestAt := -1.0, -1
		for k := 0; k < n; k++ {
			v := toC(xh[vidx(x, k)])
			sq += real(v)*real(v) + imag(v)*imag(v)
			a := math.Abs(real(v)) + math.Abs(imag(v))
			asum += a
			if a > best {
				best, bestAt = a, k
			}
		}
		nrm, err := cublas.Nrm2(e.h, x)
		require.NoError(t, err, name)
		assert.InEpsilon(t, math.Sqrt(sq), nrm, 1e-6, "Nrm2 %s", name)
		as, err := cublas.Asum(e.h, x)
		require.NoError(t, err, name)
		assert.Equal(t, asum, as, "Asum %s", name)
		im, err := cublas.Iamax(e.h, x)
		require.NoError(t, err, name)
		assert.Equal(t, bestAt, im, "Iamax %s", name)

		rh := []R{7, 7, 7}
		r := cublas.Vector[R]{Buf: up(t, e.s, rh), Offset: 1, N: 1}
		require.NoError(t, cublas.Nrm2To(e.h, x, r), name)
		got := down(t, e.s, r.Buf)
		assert.InEpsilon(t, math.Sqrt(sq), float64(got[1]), 1e-6, "Nrm2To %s", name)
		assert.Equal(t, []R{7, 7}, []R{got[0], got[2]}, "Nrm2To %s", name)
		require.NoError(t, cublas.AsumTo(e.h, x, r), name)
		assert.Equal(t, []R{7, R(asum), 7}, down(t, e.s, r.Buf), "AsumTo %s", name)
		ri := cublas.Vector[int32]{Buf: up(t, e.s, []int32{-5, -5}), Offset: 1, N: 1}
		require.NoError(t, cublas.IamaxTo(e.h, x, ri), name)
		assert.Equal(t, []int32{-5, int32(bestAt + 1)}, down(t, e.s, ri.Buf), "IamaxTo %s: counts from 1", name)
	}
	// An empty vector: Iamax -1, the sums 0.
	x, _ := vec[T](t, e, 1, 1, 4)
	x.N = 0
	im, err := cublas.Iamax(e.h, x)
	require.NoError(t, err)
	assert.Equal(t, -1, im)
	nrm, err := cublas.Nrm2(e.h, x)
	require.NoError(t, err)
	assert.Zero(t, nrm)
	// The first of equal largest elements.
	eq := up(t, e.s, []T{fromC[T](1), fromC[T](-4), fromC[T](2), fromC[T](4), fromC[T](-4)})
	im, err = cublas.Iamax(e.h, cublas.VectorOf(eq))
	require.NoError(t, err)
	assert.Equal(t, 1, im)
}

// TestLevel1ReductionsFromFake: the reductions for the four types, to the
// host and to device memory.
func TestLevel1ReductionsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	reductions[float32, float32](t, e)
	reductions[float64, float64](t, e)
	reductions[complex64, float32](t, e)
	reductions[complex128, float64](t, e)
}

// TestReductionResultTypeFromFake: a device result of another real type
// than x's is refused before cuBLAS (ErrInvalidArgument), nothing run.
func TestReductionResultTypeFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	x := up(t, e.s, data[complex64](4, 1))
	r := up(t, e.s, []float64{0})
	before := opsRun(t)
	err := cublas.Nrm2To(e.h, cublas.VectorOf(x), cublas.VectorOf(r))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "Nrm2To")
	err = cublas.AsumTo(e.h, cublas.VectorOf(x), cublas.VectorOf(r))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "AsumTo")
	assert.Equal(t, before, opsRun(t))
}
