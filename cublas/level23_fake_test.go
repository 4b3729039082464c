//go:build linux

package cublas_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// gemvEveryWay runs Gemv for T with both layouts of A, every operation
// and several increments, against plain Go; a conjugate transpose of a
// complex row-major A is refused (ErrShape).
func gemvEveryWay[T cublas.Float](t *testing.T, e *fenv) {
	const m, n = 3, 4 // op(A) is m×n
	alpha, beta := scalar[T](2, -1), scalar[T](-3, 1)
	for _, l := range layouts {
		for _, o := range ops {
			for _, ix := range []int{1, -2} {
				for _, iy := range []int{1, 3, -1} {
					name := fmt.Sprintf("%T A%s%s incx %d incy %d", *new(T), layoutName(l), opName(o), ix, iy)
					ar, ac := m, n
					if o != cublas.NoTrans {
						ar, ac = n, m
					}
					a, ah := shape[T](t, e.s, ar, ac, l, o, iy != 3, 1)
					x, xh := vec[T](t, e, n, ix, 2)
					y, yh := vec[T](t, e, m, iy, 3)
					before := opsRun(t)
					err := cublas.Gemv(e.h, alpha, a, x, beta, y)
					if isCplx[T]() && o == cublas.ConjTrans && l == cublas.RowMajor {
						assert.ErrorIs(t, err, cublas.ErrShape, name)
						assert.Equal(t, before, opsRun(t), name)
						continue
					}
					require.NoError(t, err, name)
					want := append([]T(nil), yh...)
					for i := 0; i < m; i++ {
						var s complex128
						for j := 0; j < n; j++ {
							s += opAtC(ah, a, i, j) * toC(xh[vidx(x, j)])
						}
						want[vidx(y, i)] = fromC[T](toC(alpha)*s + toC(beta)*toC(yh[vidx(y, i)]))
					}
					assert.Equal(t, want, down(t, e.s, y.Buf), name)
				}
			}
		}
	}
}

// TestGemvFromFake: Gemv for the four types.
func TestGemvFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	gemvEveryWay[float32](t, e)
	gemvEveryWay[float64](t, e)
	gemvEveryWay[complex64](t, e)
	gemvEveryWay[complex128](t, e)
}

// gerEveryWay runs Ger (and Gerc, the same for real types) for T with
// both layouts of A and several increments, against plain Go.
func gerEveryWay[T cublas.Real](t *testing.T, e *fenv) {
	const m, n = 4, 3
	for _, l := range layouts {
		for _, ix := range []int{1, -2} {
			for _, iy := range []int{2, -1} {
				for _, conj := range []bool{false, true} {
					name := fmt.Sprintf("%T A%s incx %d incy %d conj %v", *new(T), layoutName(l), ix, iy, conj)
					a, ah := shape[T](t, e.s, m, n, l, cublas.NoTrans, ix == 1, 1)
					x, xh := vec[T](t, e, m, ix, 2)
					y, yh := vec[T](t, e, n, iy, 3)
					var err error
					if conj {
						err = cublas.Gerc(e.h, 3, x, y, a)
					} else {
						err = cublas.Ger(e.h, 3, x, y, a)
					}
					require.NoError(t, err, name)
					want := append([]T(nil), ah...)
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							want[idx(a, i, j)] += 3 * xh[vidx(x, i)] * yh[vidx(y, j)]
						}
					}
					assert.Equal(t, want, down(t, e.s, a.Buf), name)
				}
			}
		}
	}
}

// TestGerFromFake: Ger and Gerc for float32 and float64 (the fake has no
// complex ger: there cuBLAS's missing function is ErrNotSupported, and a
// complex Gerc of a row-major A is refused before it, ErrShape).
func TestGerFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	gerEveryWay[float32](t, e)
	gerEveryWay[float64](t, e)
	x, y := up(t, e.s, data[complex64](3, 1)), up(t, e.s, data[complex64](2, 2))
	a := up(t, e.s, data[complex64](6, 3))
	err := cublas.Ger(e.h, 1, cublas.VectorOf(x), cublas.VectorOf(y), cublas.ColMajorMatrix(a, 3, 2))
	assert.ErrorIs(t, err, cublas.ErrNotSupported)
	err = cublas.Gerc(e.h, 1, cublas.VectorOf(x), cublas.VectorOf(y), cublas.RowMajorMatrix(a, 3, 2))
	assert.ErrorIs(t, err, cublas.ErrShape)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
}

// triangle is the n×n triangular matrix the view a (n×n, stored with
// garbage outside its uplo triangle, and on the diagonal when unit) means,
// in plain Go: element (i, j) of op(T).
func triangle[T cublas.Real](host []T, a cublas.Matrix[T], uplo cublas.Uplo, diag cublas.Diag) func(i, j int) T {
	return func(i, j int) T {
		if a.Op != cublas.NoTrans {
			i, j = j, i
		}
		switch {
		case i == j && diag == cublas.Unit:
			return 1
		case uplo == cublas.Lower && i < j, uplo == cublas.Upper && i > j:
			return 0
		}
		return host[idx(a, i, j)]
	}
}

// triData fills the n×n view a of host with a well-conditioned triangle:
// a diagonal of ±1 and ±2 and small integers elsewhere, garbage (99)
// where the routine must not read.
func triData[T cublas.Real](host []T, a cublas.Matrix[T], uplo cublas.Uplo, diag cublas.Diag) {
	n := a.Rows
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			switch {
			case i == j && diag == cublas.Unit:
				host[idx(a, i, j)] = 99
			case i == j:
				host[idx(a, i, j)] = T([]float64{1, -2, 2, -1}[i%4])
			case uplo == cublas.Lower && i < j, uplo == cublas.Upper && i > j:
				host[idx(a, i, j)] = 99
			default:
				host[idx(a, i, j)] = T((i+2*j)%5 - 2)
			}
		}
	}
}

// trsmEveryWay runs Trsm for T over sides, triangles, diagonals,
// operations and layouts of A and B: B is made op(A)·X (or X·op(A)) for
// an integer X, so the solution with alpha 2 is exactly 2X.
func trsmEveryWay[T cublas.Real](t *testing.T, e *fenv) {
	const m, n = 4, 3
	for _, side := range []cublas.Side{cublas.Left, cublas.Right} {
		for _, uplo := range []cublas.Uplo{cublas.Lower, cublas.Upper} {
			for _, diag := range []cublas.Diag{cublas.NonUnit, cublas.Unit} {
				for _, o := range ops[:2] {
					for _, la := range layouts {
						for _, lb := range layouts {
							name := fmt.Sprintf("%T side %d uplo %d diag %d A%s%s B%s", *new(T), side, uplo, diag, layoutName(la), opName(o), layoutName(lb))
							na := m
							if side == cublas.Right {
								na = n
							}
							a, ah := shape[T](t, e.s, na, na, la, o, la == lb, 1)
							triData(ah, a, uplo, diag)
							require.NoError(t, a.Buf.CopyFromHost(e.s, ah))
							tri := triangle(ah, a, uplo, diag)
							xs := data[T](m*n, 2) // X, column-major m×n
							b, bh := shape[T](t, e.s, m, n, lb, cublas.NoTrans, la != lb, 3)
							for i := 0; i < m; i++ {
								for j := 0; j < n; j++ {
									var s T
									for l := 0; l < na; l++ {
										if side == cublas.Left {
											s += tri(i, l) * xs[l+j*m]
										} else {
											s += xs[i+l*m] * tri(l, j)
										}
									}
									bh[idx(b, i, j)] = s
								}
							}
							require.NoError(t, b.Buf.CopyFromHost(e.s, bh))
							require.NoError(t, cublas.Trsm(e.h, side, uplo, diag, 2, a, b), name)
							want := append([]T(nil), bh...)
							for i := 0; i < m; i++ {
								for j := 0; j < n; j++ {
									want[idx(b, i, j)] = 2 * xs[i+j*m]
								}
							}
							assert.Equal(t, want, down(t, e.s, b.Buf), name)
							assert.Equal(t, ah, down(t, e.s, a.Buf), name)
						}
					}
				}
			}
		}
	}
}

// TestTrsmFromFake: Trsm for float32 and float64 (the fake has no complex
// trsm).
func TestTrsmFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	trsmEveryWay[float32](t, e)
	trsmEveryWay[float64](t, e)
}

// trsvEveryWay runs Trsv for T as trsmEveryWay does Trsm, with
// increments.
func trsvEveryWay[T cublas.Real](t *testing.T, e *fenv) {
	const n = 5
	for _, uplo := range []cublas.Uplo{cublas.Lower, cublas.Upper} {
		for _, diag := range []cublas.Diag{cublas.NonUnit, cublas.Unit} {
			for _, o := range ops[:2] {
				for _, l := range layouts {
					for _, inc := range []int{1, 2, -1} {
						name := fmt.Sprintf("%T uplo %d diag %d A%s%s inc %d", *new(T), uplo, diag, layoutName(l), opName(o), inc)
						a, ah := shape[T](t, e.s, n, n, l, o, inc != 1, 1)
						triData(ah, a, uplo, diag)
						require.NoError(t, a.Buf.CopyFromHost(e.s, ah))
						tri := triangle(ah, a, uplo, diag)
						xs := data[T](n, 2)
						x, xh := vec[T](t, e, n, inc, 3)
						for i := 0; i < n; i++ {
							var s T
							for j := 0; j < n; j++ {
								s += tri(i, j) * xs[j]
							}
							xh[vidx(x, i)] = s
						}
						require.NoError(t, x.Buf.CopyFromHost(e.s, xh))
						require.NoError(t, cublas.Trsv(e.h, uplo, diag, a, x), name)
						want := append([]T(nil), xh...)
						for i := 0; i < n; i++ {
							want[vidx(x, i)] = xs[i]
						}
						assert.Equal(t, want, down(t, e.s, x.Buf), name)
					}
				}
			}
		}
	}
}

// TestTrsvFromFake: Trsv for float32 and float64.
func TestTrsvFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	trsvEveryWay[float32](t, e)
	trsvEveryWay[float64](t, e)
}

// syrkEveryWay runs Syrk for T over triangles, operations and layouts of
// A and C: the uplo triangle of C (in C's own (i, j) terms) becomes
// alpha·op(A)·op(A)ᵀ + beta·C, the other stays.
func syrkEveryWay[T cublas.Real](t *testing.T, e *fenv) {
	const n, k = 4, 3
	for _, uplo := range []cublas.Uplo{cublas.Lower, cublas.Upper} {
		for _, o := range ops {
			for _, la := range layouts {
				for _, lc := range layouts {
					name := fmt.Sprintf("%T uplo %d A%s%s C%s", *new(T), uplo, layoutName(la), opName(o), layoutName(lc))
					ar, ac := n, k
					if o != cublas.NoTrans {
						ar, ac = k, n
					}
					a, ah := shape[T](t, e.s, ar, ac, la, o, la == lc, 1)
					c, ch := shape[T](t, e.s, n, n, lc, cublas.NoTrans, la != lc, 2)
					require.NoError(t, cublas.Syrk(e.h, uplo, 2, a, -1, c), name)
					want := append([]T(nil), ch...)
					for i := 0; i < n; i++ {
						for j := 0; j < n; j++ {
							if (uplo == cublas.Lower && i < j) || (uplo == cublas.Upper && i > j) {
								continue
							}
							var s complex128
							for l := 0; l < k; l++ {
								s += opAtC(ah, a, i, l) * opAtC(ah, a, j, l)
							}
							want[idx(c, i, j)] = T(2*real(s)) - ch[idx(c, i, j)]
						}
					}
					assert.Equal(t, want, down(t, e.s, c.Buf), name)
				}
			}
		}
	}
}

// TestSyrkFromFake: Syrk for float32 and float64 (the fake has no complex
// syrk).
func TestSyrkFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	syrkEveryWay[float32](t, e)
	syrkEveryWay[float64](t, e)
}

// TestUnmodelledRoutinesFromFake: Symm, Trmm and complex Syrk, which the
// fake lacks, reach cuBLAS with checked views (ErrNotSupported from the
// missing function) and refuse bad views before it (ErrOutOfBounds).
func TestUnmodelledRoutinesFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	a, b, c := up(t, e.s, data[float64](9, 1)), up(t, e.s, data[float64](6, 2)), up(t, e.s, data[float64](6, 3))
	A, B, C := cublas.ColMajorMatrix(a, 3, 3), cublas.ColMajorMatrix(b, 3, 2), cublas.ColMajorMatrix(c, 3, 2)
	assert.ErrorIs(t, cublas.Symm(e.h, cublas.Left, cublas.Upper, 1, A, B, 0, C), cublas.ErrNotSupported)
	assert.ErrorIs(t, cublas.Trmm(e.h, cublas.Left, cublas.Upper, cublas.NonUnit, 1, A, B, C), cublas.ErrNotSupported)
	bad := B
	bad.Offset = 1
	err := cublas.Symm(e.h, cublas.Left, cublas.Upper, 1, A, bad, 0, C)
	assert.ErrorIs(t, err, cublas.ErrOutOfBounds)
	assert.Contains(t, err.Error(), "cublas: Symm: B:")
	err = cublas.Trmm(e.h, cublas.Left, cublas.Upper, cublas.NonUnit, 1, A, B, bad)
	assert.ErrorIs(t, err, cublas.ErrOutOfBounds)
	assert.Contains(t, err.Error(), "cublas: Trmm: C:")
	long := up(t, e.s, data[float64](12, 4))
	half := cublas.Matrix[float64]{Buf: long, Offset: 3, Rows: 3, Cols: 2}
	err = cublas.Trmm(e.h, cublas.Left, cublas.Upper, cublas.NonUnit, 1, A, cublas.ColMajorMatrix(long, 3, 2), half)
	assert.ErrorIs(t, err, cublas.ErrAlias, "C overlaps B without being B")
	z := up(t, e.s, data[complex128](9, 1))
	assert.ErrorIs(t, cublas.Syrk(e.h, cublas.Lower, 1, cublas.ColMajorMatrix(z, 3, 3), 0, cublas.Matrix[complex128]{Buf: z, Rows: 3, Cols: 3}), cublas.ErrAlias)
	w := up(t, e.s, data[complex128](9, 2))
	assert.ErrorIs(t, cublas.Syrk(e.h, cublas.Lower, 1, cublas.ColMajorMatrix(z, 3, 3), 0, cublas.ColMajorMatrix(w, 3, 3)), cublas.ErrNotSupported)
	assert.Zero(t, opsRun(t))
}
