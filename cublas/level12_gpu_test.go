package cublas_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
)

// TestGPUGemv: y = alpha·op(A)·x + beta·y for each operation and layout,
// with positive, strided and negative increments (exact). A conjugate
// transpose of a row-major A is refused.
func TestGPUGemv(t *testing.T) {
	g := newGPU(t, nil)
	forTypes(t, func(t *testing.T) { gemvCases[float32](t, g) }, func(t *testing.T) { gemvCases[float64](t, g) },
		func(t *testing.T) { gemvCases[complex64](t, g) }, func(t *testing.T) { gemvCases[complex128](t, g) })
}

func gemvCases[T cublas.Float](t *testing.T, g *gpu) {
	r := rand.New(rand.NewPCG(21, 22))
	const m, n = 11, 7
	alpha, beta := num[T](2, 1), num[T](-1, 0)
	for _, la := range layouts {
		for _, oa := range opsOf[T]() {
			for _, inc := range [][2]int{{1, 1}, {2, 3}, {-2, -1}} {
				name := fmt.Sprintf("A %s %s, incs %v", lname(la), oname(oa), inc)
				pad := inc[0] != 1
				a, ha := newMat[T](t, g, r, m, n, la, pad)
				a.Op = oa
				rows, cols := opDims(a)
				x, hx := newVec[T](t, g, r, cols, inc[0], pad)
				y, hy := newVec[T](t, g, r, rows, inc[1], !pad)
				err := cublas.Gemv(g.h, alpha, a, x, beta, y)
				if oa == cublas.ConjTrans && la == cublas.RowMajor {
					refusedUnchanged(t, g, err, cublas.ErrShape, "Gemv", "A", y.Buf, hy)
					continue
				}
				require.NoError(t, err, name)
				want := slices.Clone(hy)
				for i := range rows {
					var s T
					for j := range cols {
						s += opAt(ha, a, i, j) * hx[vidx(x, j)]
					}
					want[vidx(y, i)] = alpha*s + beta*hy[vidx(y, i)]
				}
				near(t, name, want, download(t, g, y.Buf), 0)
			}
		}
	}
}

// TestGPUGerAndGerc: A += alpha·x·yᵀ (Ger) and A += alpha·x·yᴴ (Gerc) for
// each layout and increments (exact). Gerc of a complex row-major A is
// refused.
func TestGPUGerAndGerc(t *testing.T) {
	g := newGPU(t, nil)
	forTypes(t, func(t *testing.T) { gerCases[float32](t, g) }, func(t *testing.T) { gerCases[float64](t, g) },
		func(t *testing.T) { gerCases[complex64](t, g) }, func(t *testing.T) { gerCases[complex128](t, g) })
}

func gerCases[T cublas.Float](t *testing.T, g *gpu) {
	r := rand.New(rand.NewPCG(23, 24))
	const m, n = 9, 6
	alpha := num[T](-2, 1)
	for _, conjY := range []bool{false, true} {
		for _, la := range layouts {
			for _, inc := range [][2]int{{1, 1}, {3, -2}} {
				routine := "Ger"
				if conjY {
					routine = "Gerc"
				}
				name := fmt.Sprintf("%s, A %s, incs %v", routine, lname(la), inc)
				pad := inc[0] != 1
				a, ha := newMat[T](t, g, r, m, n, la, pad)
				x, hx := newVec[T](t, g, r, m, inc[0], pad)
				y, hy := newVec[T](t, g, r, n, inc[1], !pad)
				var err error
				if conjY {
					err = cublas.Gerc(g.h, alpha, x, y, a)
				} else {
					err = cublas.Ger(g.h, alpha, x, y, a)
				}
				if conjY && complexType[T]() && la == cublas.RowMajor {
					refusedUnchanged(t, g, err, cublas.ErrShape, "Gerc", "A", a.Buf, ha)
					continue
				}
				require.NoError(t, err, name)
				want := slices.Clone(ha)
				for i := range m {
					for j := range n {
						yj := hy[vidx(y, j)]
						if conjY {
							yj = conj(yj)
						}
						want[idx(a, i, j)] += alpha * hx[vidx(x, i)] * yj
					}
				}
				near(t, name, want, download(t, g, a.Buf), 0)
			}
		}
	}
}

// TestGPUTrsv: op(A)·x = b for each triangle, diagonal, operation and
// layout; b is made as op(T)·x0 here, so the solution is x0 (solveTol).
func TestGPUTrsv(t *testing.T) {
	g := newGPU(t, nil)
	forTypes(t, func(t *testing.T) { trsvCases[float32](t, g) }, func(t *testing.T) { trsvCases[float64](t, g) },
		func(t *testing.T) { trsvCases[complex64](t, g) }, func(t *testing.T) { trsvCases[complex128](t, g) })
}

func trsvCases[T cublas.Float](t *testing.T, g *gpu) {
	r := rand.New(rand.NewPCG(25, 26))
	const n = 10
	for _, uplo := range []cublas.Uplo{cublas.Lower, cublas.Upper} {
		for _, diag := range []cublas.Diag{cublas.NonUnit, cublas.Unit} {
			for _, oa := range opsOf[T]() {
				for _, la := range layouts {
					for _, inc := range []int{1, -3} {
						name := fmt.Sprintf("uplo %d, diag %d, A %s %s, inc %d", uplo, diag, lname(la), oname(oa), inc)
						pad := inc != 1
						a, ha := newMat[T](t, g, r, n, n, la, pad)
						triangular(ha, a, uplo, diag, r)
						require.NoError(t, a.Buf.CopyFromHost(g.s, ha))
						a.Op = oa
						x, hx := newVec[T](t, g, r, n, inc, !pad)
						hb := slices.Clone(hx)
						for i := range n {
							var s T
							for j := range n {
								s += triAt(ha, a, uplo, diag, i, j) * hx[vidx(x, j)]
							}
							hb[vidx(x, i)] = s
						}
						require.NoError(t, x.Buf.CopyFromHost(g.s, hb))
						err := cublas.Trsv(g.h, uplo, diag, a, x)
						if oa == cublas.ConjTrans && la == cublas.RowMajor {
							refusedUnchanged(t, g, err, cublas.ErrShape, "Trsv", "A", x.Buf, hb)
							continue
						}
						require.NoError(t, err, name)
						near(t, name, hx, download(t, g, x.Buf), solveTol[T]())
					}
				}
			}
		}
	}
}

// TestGPULevel1: Axpy, Scal, Copy, Swap with strided and negative
// increments, and the reductions Dot, Dotc, Nrm2, Asum, Iamax to the
// host and, in their To forms, to device memory (exact, Nrm2 sqrtTol).
func TestGPULevel1(t *testing.T) {
	g := newGPU(t, nil)
	forTypes(t, func(t *testing.T) { level1Cases[float32, float32](t, g) }, func(t *testing.T) { level1Cases[float64, float64](t, g) },
		func(t *testing.T) { level1Cases[complex64, float32](t, g) }, func(t *testing.T) { level1Cases[complex128, float64](t, g) })
}

func level1Cases[T cublas.Float, R cublas.Real](t *testing.T, g *gpu) {
	r := rand.New(rand.NewPCG(27, 28))
	const n = 37
	alpha := num[T](3, -1)
	for _, inc := range [][2]int{{1, 1}, {2, -1}, {-3, 2}} {
		name := fmt.Sprintf("incs %v", inc)
		x, hx := newVec[T](t, g, r, n, inc[0], true)
		y, hy := newVec[T](t, g, r, n, inc[1], false)

		require.NoError(t, cublas.Axpy(g.h, alpha, x, y), name)
		want := slices.Clone(hy)
		for k := range n {
			want[vidx(y, k)] += alpha * hx[vidx(x, k)]
		}
		near(t, "Axpy, "+name, want, download(t, g, y.Buf), 0)
		near(t, "Axpy leaves x, "+name, hx, download(t, g, x.Buf), 0)
		hy = want

		var dot, dotc T
		for k := range n {
			dot += hx[vidx(x, k)] * hy[vidx(y, k)]
			dotc += conj(hx[vidx(x, k)]) * hy[vidx(y, k)]
		}
		got, err := cublas.Dot(g.h, x, y)
		require.NoError(t, err, name)
		assert.Equal(t, dot, got, "Dot, "+name)
		got, err = cublas.Dotc(g.h, x, y)
		require.NoError(t, err, name)
		assert.Equal(t, dotc, got, "Dotc, "+name)
		res := upload(t, g, make([]T, 3))
		require.NoError(t, cublas.DotTo(g.h, x, y, cublas.Vector[T]{Buf: res, Offset: 1, N: 1}), name)
		require.NoError(t, cublas.DotcTo(g.h, x, y, cublas.Vector[T]{Buf: res, Offset: 2, N: 1}), name)
		assert.Equal(t, []T{0, dot, dotc}, download(t, g, res), "DotTo and DotcTo, "+name)

		require.NoError(t, cublas.Copy(g.h, x, y), name)
		want = slices.Clone(hy)
		for k := range n {
			want[vidx(y, k)] = hx[vidx(x, k)]
		}
		near(t, "Copy, "+name, want, download(t, g, y.Buf), 0)

		hy2 := smallInts[T](r, len(hy))
		require.NoError(t, y.Buf.CopyFromHost(g.s, hy2))
		require.NoError(t, cublas.Swap(g.h, x, y), name)
		wx, wy := slices.Clone(hx), slices.Clone(hy2)
		for k := range n {
			wx[vidx(x, k)], wy[vidx(y, k)] = hy2[vidx(y, k)], hx[vidx(x, k)]
		}
		near(t, "Swap x, "+name, wx, download(t, g, x.Buf), 0)
		near(t, "Swap y, "+name, wy, download(t, g, y.Buf), 0)
	}

	// The single-vector routines need a positive increment.
	for _, inc := range []int{1, 3} {
		name := fmt.Sprintf("inc %d", inc)
		x, hx := newVec[T](t, g, r, n, inc, inc != 1)
		hx[vidx(x, 17)] = num[T](-9, 2) // the largest |re|+|im|, unique
		require.NoError(t, x.Buf.CopyFromHost(g.s, hx))
		var sq, asum float64
		for k := range n {
			v := c128(hx[vidx(x, k)])
			sq += real(v)*real(v) + imag(v)*imag(v)
			asum += math.Abs(real(v)) + math.Abs(imag(v))
		}
		nrm := math.Sqrt(sq)
		gotN, err := cublas.Nrm2(g.h, x)
		require.NoError(t, err, name)
		assert.InDelta(t, nrm, gotN, nrm*sqrtTol[T](), "Nrm2, "+name)
		gotA, err := cublas.Asum(g.h, x)
		require.NoError(t, err, name)
		assert.Equal(t, asum, gotA, "Asum, "+name)
		gotI, err := cublas.Iamax(g.h, x)
		require.NoError(t, err, name)
		assert.Equal(t, 17, gotI, "Iamax, "+name)

		rr := upload(t, g, make([]R, 3))
		require.NoError(t, cublas.Nrm2To(g.h, x, cublas.Vector[R]{Buf: rr, Offset: 0, N: 1}), name)
		require.NoError(t, cublas.AsumTo(g.h, x, cublas.Vector[R]{Buf: rr, Offset: 2, N: 1}), name)
		gotR := download(t, g, rr)
		assert.InDelta(t, nrm, float64(gotR[0]), nrm*sqrtTol[T](), "Nrm2To, "+name)
		assert.Equal(t, []R{0, R(asum)}, gotR[1:], "AsumTo, "+name)
		ri := upload(t, g, []int32{-5, -5})
		require.NoError(t, cublas.IamaxTo(g.h, x, cublas.Vector[int32]{Buf: ri, Offset: 1, N: 1}), name)
		assert.Equal(t, []int32{-5, 18}, download(t, g, ri), "IamaxTo counts from 1, "+name)

		require.NoError(t, cublas.Scal(g.h, alpha, x), name)
		want := slices.Clone(hx)
		for k := range n {
			want[vidx(x, k)] *= alpha
		}
		near(t, "Scal, "+name, want, download(t, g, x.Buf), 0)
	}
}
