package cublas_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
)

// refGemm is C = alpha·op(A)·op(B) + beta·C over c's buffer contents hc.
func refGemm[T cublas.Float](alpha T, a cublas.Matrix[T], ha []T, b cublas.Matrix[T], hb []T, beta T, c cublas.Matrix[T], hc []T) []T {
	out := slices.Clone(hc)
	m, k := opDims(a)
	_, n := opDims(b)
	for i := range m {
		for j := range n {
			var s T
			for l := range k {
				s += opAt(ha, a, i, l) * opAt(hb, b, l, j)
			}
			out[idx(c, i, j)] = alpha*s + beta*hc[idx(c, i, j)]
		}
	}
	return out
}

// TestGPUGemm: Gemm for every type, every layout of A, B and C, every
// operation of A and B, packed views and Sub blocks, against refGemm
// (exact). A conjugate transpose whose layout differs from C's is
// refused (ErrShape) and leaves C as it was.
func TestGPUGemm(t *testing.T) {
	g := newGPU(t, nil)
	forTypes(t, func(t *testing.T) { gemmCases[float32](t, g) }, func(t *testing.T) { gemmCases[float64](t, g) },
		func(t *testing.T) { gemmCases[complex64](t, g) }, func(t *testing.T) { gemmCases[complex128](t, g) })
}

func gemmCases[T cublas.Float](t *testing.T, g *gpu) {
	r := rand.New(rand.NewPCG(1, 2))
	const m, n, k = 13, 11, 7
	alpha, beta := num[T](2, 1), num[T](-1, 2)
	for _, la := range layouts {
		for _, lb := range layouts {
			for _, lc := range layouts {
				for _, oa := range opsOf[T]() {
					for _, ob := range opsOf[T]() {
						for _, pad := range []bool{false, true} {
							name := fmt.Sprintf("A %s %s, B %s %s, C %s, pad %v", lname(la), oname(oa), lname(lb), oname(ob), lname(lc), pad)
							ar, ac := m, k
							if oa != cublas.NoTrans {
								ar, ac = k, m
							}
							br, bc := k, n
							if ob != cublas.NoTrans {
								br, bc = n, k
							}
							a, ha := newMat[T](t, g, r, ar, ac, la, pad)
							b, hb := newMat[T](t, g, r, br, bc, lb, pad)
							c, hc := newMat[T](t, g, r, m, n, lc, pad)
							a.Op, b.Op = oa, ob
							err := cublas.Gemm(g.h, alpha, a, b, beta, c)
							if (oa == cublas.ConjTrans && la != lc) || (ob == cublas.ConjTrans && lb != lc) {
								operand := "A"
								if !(oa == cublas.ConjTrans && la != lc) {
									operand = "B"
								}
								refusedUnchanged(t, g, err, cublas.ErrShape, "Gemm", operand, c.Buf, hc)
								continue
							}
							require.NoError(t, err, name)
							near(t, name, refGemm(alpha, a, ha, b, hb, beta, c, hc), download(t, g, c.Buf), 0)
						}
					}
				}
			}
		}
	}
}

// TestGPURowMajorEqualsTransposedByHand: a Gemm, Gemv and Trsm on
// row-major views give, element for element, what the same routines give
// on column-major copies transposed here by hand.
func TestGPURowMajorEqualsTransposedByHand(t *testing.T) {
	g := newGPU(t, nil)
	r := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 17, 9, 12
	// transpose is the rows×cols row-major src as a column-major slice.
	transpose := func(src []float32, rows, cols int) []float32 {
		out := make([]float32, len(src))
		for i := range rows {
			for j := range cols {
				out[i+j*rows] = src[i*cols+j]
			}
		}
		return out
	}
	ha, hb := smallInts[float32](r, m*k), smallInts[float32](r, k*n)
	rowC := cublas.RowMajorMatrix(upload(t, g, make([]float32, m*n)), m, n)
	colC := cublas.ColMajorMatrix(upload(t, g, make([]float32, m*n)), m, n)
	require.NoError(t, cublas.Gemm(g.h, 1, cublas.RowMajorMatrix(upload(t, g, ha), m, k), cublas.RowMajorMatrix(upload(t, g, hb), k, n), 0, rowC))
	require.NoError(t, cublas.Gemm(g.h, 1, cublas.ColMajorMatrix(upload(t, g, transpose(ha, m, k)), m, k),
		cublas.ColMajorMatrix(upload(t, g, transpose(hb, k, n)), k, n), 0, colC))
	assert.Equal(t, download(t, g, colC.Buf), transpose(download(t, g, rowC.Buf), m, n), "Gemm")

	hx := smallInts[float32](r, k)
	rowY, colY := upload(t, g, make([]float32, m)), upload(t, g, make([]float32, m))
	require.NoError(t, cublas.Gemv(g.h, 1, cublas.RowMajorMatrix(upload(t, g, ha), m, k), cublas.VectorOf(upload(t, g, hx)), 0, cublas.VectorOf(rowY)))
	require.NoError(t, cublas.Gemv(g.h, 1, cublas.ColMajorMatrix(upload(t, g, transpose(ha, m, k)), m, k), cublas.VectorOf(upload(t, g, hx)), 0, cublas.VectorOf(colY)))
	assert.Equal(t, download(t, g, colY), download(t, g, rowY), "Gemv")

	ht := make([]float32, m*m)
	rowT := cublas.RowMajorMatrix[float32](nil, m, m)
	triangular(ht, rowT, cublas.Lower, cublas.NonUnit, r)
	hB := smallInts[float32](r, m*n)
	rowB := cublas.RowMajorMatrix(upload(t, g, hB), m, n)
	colB := cublas.ColMajorMatrix(upload(t, g, transpose(hB, m, n)), m, n)
	require.NoError(t, cublas.Trsm(g.h, cublas.Left, cublas.Lower, cublas.NonUnit, 1, cublas.RowMajorMatrix(upload(t, g, ht), m, m), rowB))
	require.NoError(t, cublas.Trsm(g.h, cublas.Left, cublas.Lower, cublas.NonUnit, 1, cublas.ColMajorMatrix(upload(t, g, transpose(ht, m, m)), m, m), colB))
	near(t, "Trsm", download(t, g, colB.Buf), transpose(download(t, g, rowB.Buf), m, n), solveTol[float32]())
}

// TestGPUGemmStridedBatched: four batches with strides that leave gaps
// between them, B shared by every batch (stride 0), each layout of C,
// against refGemm per batch (exact).
func TestGPUGemmStridedBatched(t *testing.T) {
	g := newGPU(t, nil)
	forTypes(t, func(t *testing.T) { stridedCases[float32](t, g) }, func(t *testing.T) { stridedCases[float64](t, g) },
		func(t *testing.T) { stridedCases[complex64](t, g) }, func(t *testing.T) { stridedCases[complex128](t, g) })
}

func stridedCases[T cublas.Float](t *testing.T, g *gpu) {
	r := rand.New(rand.NewPCG(5, 6))
	const m, n, k, count = 9, 6, 5, 4
	const sa, sc = m*k + 3, m*n + 5
	alpha, beta := num[T](2, -1), num[T](1, 1)
	shift := func(x cublas.Matrix[T], d int) cublas.Matrix[T] { x.Offset += d; return x }
	for _, lc := range layouts {
		for _, oa := range opsOf[T]() {
			name := fmt.Sprintf("A col %s, C %s", oname(oa), lname(lc))
			ha := smallInts[T](r, (count-1)*sa+m*k)
			a := cublas.Matrix[T]{Buf: upload(t, g, ha), Rows: m, Cols: k, Op: oa}
			if oa != cublas.NoTrans {
				a.Rows, a.Cols = k, m
			}
			b, hb := newMat[T](t, g, r, k, n, cublas.RowMajor, false)
			hc := smallInts[T](r, (count-1)*sc+m*n)
			c := cublas.Matrix[T]{Buf: upload(t, g, hc), Rows: m, Cols: n, Layout: lc}
			err := cublas.GemmStridedBatched(g.h, alpha, a, sa, b, 0, beta, c, sc, count)
			if oa == cublas.ConjTrans && lc == cublas.RowMajor {
				refusedUnchanged(t, g, err, cublas.ErrShape, "GemmStridedBatched", "A", c.Buf, hc)
				continue
			}
			require.NoError(t, err, name)
			want := slices.Clone(hc)
			for i := range count {
				want = refGemm(alpha, shift(a, i*sa), ha, b, hb, beta, shift(c, i*sc), want)
			}
			near(t, name, want, download(t, g, c.Buf), 0)
		}
	}
}

// TestGPUSyrk: the uplo triangle of C = alpha·op(A)·op(A)ᵀ + beta·C for
// each triangle, operation and layouts; the other triangle is untouched
// (exact).
func TestGPUSyrk(t *testing.T) {
	g := newGPU(t, nil)
	forTypes(t, func(t *testing.T) { syrkCases[float32](t, g) }, func(t *testing.T) { syrkCases[float64](t, g) },
		func(t *testing.T) { syrkCases[complex64](t, g) }, func(t *testing.T) { syrkCases[complex128](t, g) })
}

func syrkCases[T cublas.Float](t *testing.T, g *gpu) {
	r := rand.New(rand.NewPCG(7, 8))
	const n, k = 9, 5
	alpha, beta := num[T](-2, 1), num[T](3, 0)
	for _, uplo := range []cublas.Uplo{cublas.Lower, cublas.Upper} {
		for _, la := range layouts {
			for _, lc := range layouts {
				for _, oa := range []cublas.Op{cublas.NoTrans, cublas.Trans} {
					name := fmt.Sprintf("uplo %d, A %s %s, C %s", uplo, lname(la), oname(oa), lname(lc))
					ar, ac := n, k
					if oa == cublas.Trans {
						ar, ac = k, n
					}
					a, ha := newMat[T](t, g, r, ar, ac, la, la == lc)
					a.Op = oa
					c, hc := newMat[T](t, g, r, n, n, lc, la != lc)
					require.NoError(t, cublas.Syrk(g.h, uplo, alpha, a, beta, c), name)
					want := slices.Clone(hc)
					for i := range n {
						for j := range n {
							if !inTriangle(uplo, i, j) {
								continue
							}
							var s T
							for l := range k {
								s += opAt(ha, a, i, l) * opAt(ha, a, j, l)
							}
							want[idx(c, i, j)] = alpha*s + beta*hc[idx(c, i, j)]
						}
					}
					near(t, name, want, download(t, g, c.Buf), 0)
				}
			}
		}
	}
}

// TestGPUSymm: C = alpha·A·B + beta·C (Left) or alpha·B·A + beta·C
// (Right), A symmetric read in its uplo triangle only (the other holds
// values that would show), for each side, triangle and layouts (exact).
func TestGPUSymm(t *testing.T) {
	g := newGPU(t, nil)
	forTypes(t, func(t *testing.T) { symmCases[float32](t, g) }, func(t *testing.T) { symmCases[float64](t, g) },
		func(t *testing.T) { symmCases[complex64](t, g) }, func(t *testing.T) { symmCases[complex128](t, g) })
}

func symmCases[T cublas.Float](t *testing.T, g *gpu) {
	r := rand.New(rand.NewPCG(9, 10))
	const m, n = 8, 6
	alpha, beta := num[T](2, 0), num[T](-1, 1)
	for _, side := range []cublas.Side{cublas.Left, cublas.Right} {
		for _, uplo := range []cublas.Uplo{cublas.Lower, cublas.Upper} {
			for _, la := range layouts {
				for _, lc := range layouts {
					name := fmt.Sprintf("side %d, uplo %d, A %s, B and C %s", side, uplo, lname(la), lname(lc))
					an := m
					if side == cublas.Right {
						an = n
					}
					a, ha := newMat[T](t, g, r, an, an, la, la != lc)
					b, hb := newMat[T](t, g, r, m, n, lc, la == lc)
					c, hc := newMat[T](t, g, r, m, n, lc, true)
					sym := func(i, j int) T {
						if inTriangle(uplo, i, j) {
							return ha[idx(a, i, j)]
						}
						return ha[idx(a, j, i)]
					}
					require.NoError(t, cublas.Symm(g.h, side, uplo, alpha, a, b, beta, c), name)
					want := slices.Clone(hc)
					for i := range m {
						for j := range n {
							var s T
							if side == cublas.Left {
								for l := range m {
									s += sym(i, l) * hb[idx(b, l, j)]
								}
							} else {
								for l := range n {
									s += hb[idx(b, i, l)] * sym(l, j)
								}
							}
							want[idx(c, i, j)] = alpha*s + beta*hc[idx(c, i, j)]
						}
					}
					near(t, name, want, download(t, g, c.Buf), 0)
				}
			}
		}
	}
}

// triProduct is op(T)·X (Left) or X·op(T) (Right) for the m×n X of
// x (a view of hx), T the triangle that a stands for in ha; the result
// is written over x's elements in a copy of hx.
func triProduct[T cublas.Float](side cublas.Side, uplo cublas.Uplo, diag cublas.Diag, a cublas.Matrix[T], ha []T, x cublas.Matrix[T], hx []T, alpha T) []T {
	out := slices.Clone(hx)
	for i := range x.Rows {
		for j := range x.Cols {
			var s T
			if side == cublas.Left {
				for l := range x.Rows {
					s += triAt(ha, a, uplo, diag, i, l) * hx[idx(x, l, j)]
				}
			} else {
				for l := range x.Cols {
					s += hx[idx(x, i, l)] * triAt(ha, a, uplo, diag, l, j)
				}
			}
			out[idx(x, i, j)] = alpha * s
		}
	}
	return out
}

// TestGPUTrsm: op(A)·X = alpha·B (Left) or X·op(A) = alpha·B (Right) for
// each side, triangle, diagonal, operation and layouts: B is made as
// op(T)·X0 here, so the solution is alpha·X0 (solveTol); A's other
// triangle, and its diagonal when Unit, hold values that would show. A
// conjugate transpose of an A whose layout differs from B's is refused.
func TestGPUTrsm(t *testing.T) {
	g := newGPU(t, nil)
	forTypes(t, func(t *testing.T) { trsmCases[float32](t, g) }, func(t *testing.T) { trsmCases[float64](t, g) },
		func(t *testing.T) { trsmCases[complex64](t, g) }, func(t *testing.T) { trsmCases[complex128](t, g) })
}

func trsmCases[T cublas.Float](t *testing.T, g *gpu) {
	testTri[T](t, g, "Trsm")
}

// TestGPUTrmm: C = alpha·op(A)·B (Left) or alpha·B·op(A) (Right), out of
// place and in place (C is B), for each side, triangle, diagonal,
// operation and layouts (exact).
func TestGPUTrmm(t *testing.T) {
	g := newGPU(t, nil)
	forTypes(t, func(t *testing.T) { testTri[float32](t, g, "Trmm") }, func(t *testing.T) { testTri[float64](t, g, "Trmm") },
		func(t *testing.T) { testTri[complex64](t, g, "Trmm") }, func(t *testing.T) { testTri[complex128](t, g, "Trmm") })
}

// testTri runs the cases of Trsm or Trmm (routine).
func testTri[T cublas.Float](t *testing.T, g *gpu, routine string) {
	r := rand.New(rand.NewPCG(11, 12))
	const m, n = 7, 5
	alpha := num[T](2, 1)
	for _, side := range []cublas.Side{cublas.Left, cublas.Right} {
		for _, uplo := range []cublas.Uplo{cublas.Lower, cublas.Upper} {
			for _, diag := range []cublas.Diag{cublas.NonUnit, cublas.Unit} {
				for _, oa := range opsOf[T]() {
					for _, la := range layouts {
						for _, lb := range layouts {
							name := fmt.Sprintf("side %d, uplo %d, diag %d, A %s %s, B %s", side, uplo, diag, lname(la), oname(oa), lname(lb))
							an := m
							if side == cublas.Right {
								an = n
							}
							pad := (int(side)+int(uplo)+int(diag)+int(oa))%2 == 1
							a, ha := newMat[T](t, g, r, an, an, la, pad)
							triangular(ha, a, uplo, diag, r)
							require.NoError(t, a.Buf.CopyFromHost(g.s, ha))
							a.Op = oa
							refuse := oa == cublas.ConjTrans && la != lb
							if routine == "Trsm" {
								x0, size := cublas.Matrix[T]{Rows: m, Cols: n, Layout: lb}, m*n
								if pad {
									x0, size = cublas.Matrix[T]{Rows: m + 3, Cols: n + 2, Layout: lb}.Sub(2, 1, m, n), (m+3)*(n+2)
								}
								hx := smallInts[T](r, size)
								hb := triProduct(side, uplo, diag, a, ha, x0, hx, num[T](1, 0))
								x0.Buf = upload(t, g, hb)
								err := cublas.Trsm(g.h, side, uplo, diag, alpha, a, x0)
								if refuse {
									refusedUnchanged(t, g, err, cublas.ErrShape, "Trsm", "A", x0.Buf, hb)
									continue
								}
								require.NoError(t, err, name)
								want := slices.Clone(hb)
								for i := range m {
									for j := range n {
										want[idx(x0, i, j)] = alpha * hx[idx(x0, i, j)]
									}
								}
								near(t, name, want, download(t, g, x0.Buf), solveTol[T]())
								continue
							}
							b, hb := newMat[T](t, g, r, m, n, lb, !pad)
							c, hc := newMat[T](t, g, r, m, n, lb, pad)
							err := cublas.Trmm(g.h, side, uplo, diag, alpha, a, b, c)
							if refuse {
								refusedUnchanged(t, g, err, cublas.ErrShape, "Trmm", "A", c.Buf, hc)
								continue
							}
							require.NoError(t, err, name)
							want := triProduct(side, uplo, diag, a, ha, b, hb, alpha)
							// The product over b's elements, moved to c's.
							wc := slices.Clone(hc)
							for i := range m {
								for j := range n {
									wc[idx(c, i, j)] = want[idx(b, i, j)]
								}
							}
							near(t, name+", out of place", wc, download(t, g, c.Buf), 0)
							near(t, name+", B unchanged", hb, download(t, g, b.Buf), 0)
							require.NoError(t, cublas.Trmm(g.h, side, uplo, diag, alpha, a, b, b), name)
							near(t, name+", in place", want, download(t, g, b.Buf), 0)
						}
					}
				}
			}
		}
	}
}
