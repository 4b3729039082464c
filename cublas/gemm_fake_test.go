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

// ops are every operation (layouts, the GPU tests' helper, every layout).
var ops = []cublas.Op{cublas.NoTrans, cublas.Trans, cublas.ConjTrans}

func layoutName(l cublas.Layout) string {
	if l == cublas.RowMajor {
		return "R"
	}
	return "C"
}

func opName(o cublas.Op) string { return [...]string{"N", "T", "H"}[o] }

// gemmEveryWay runs Gemm for T with every combination of layouts of A, B
// and C and operations of A and B, on blocks of larger matrices (explicit
// LD and offsets) and on packed ones, and compares the whole of C's buffer
// with refGemm. A conjugate transpose of a complex operand whose layout
// is not C's is refused (ErrShape) with nothing run.
func gemmEveryWay[T cublas.Float](t *testing.T, e *fenv) {
	const m, n, k = 3, 4, 5
	alpha, beta := scalar[T](2, 1), scalar[T](-1, 2)
	runs := 0
	for _, la := range layouts {
		for _, lb := range layouts {
			for _, lc := range layouts {
				for _, oa := range ops {
					for _, ob := range ops {
						sub := (runs % 2) == 0
						name := fmt.Sprintf("%T A%s%s B%s%s C%s sub=%v", *new(T), layoutName(la), opName(oa), layoutName(lb), opName(ob), layoutName(lc), sub)
						ar, ac := m, k
						if oa != cublas.NoTrans {
							ar, ac = k, m
						}
						br, bc := k, n
						if ob != cublas.NoTrans {
							br, bc = n, k
						}
						a, ah := shape[T](t, e.s, ar, ac, la, oa, sub, 1)
						b, bh := shape[T](t, e.s, br, bc, lb, ob, sub, 2)
						c, ch := shape[T](t, e.s, m, n, lc, cublas.NoTrans, !sub, 3)
						before := opsRun(t)
						err := cublas.Gemm(e.h, alpha, a, b, beta, c)
						refused := isCplx[T]() && ((oa == cublas.ConjTrans && la != lc) || (ob == cublas.ConjTrans && lb != lc))
						if refused {
							assert.ErrorIs(t, err, cublas.ErrShape, name)
							assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
							assert.Equal(t, ch, down(t, e.s, c.Buf), name)
							assert.Equal(t, before, opsRun(t), name)
							continue
						}
						require.NoError(t, err, name)
						assert.Equal(t, refGemmC(alpha, a, ah, b, bh, beta, c, ch), down(t, e.s, c.Buf), name)
						assert.Equal(t, before+1, opsRun(t), name)
						runs++
					}
				}
			}
		}
	}
	want := 8 * 9 // real types: every combination runs
	if isCplx[T]() {
		// A conjugate transpose only where the operand's layout is C's.
		want = 0
		for _, la := range layouts {
			for _, lb := range layouts {
				for _, lc := range layouts {
					na, nb := 3, 3
					if la != lc {
						na = 2
					}
					if lb != lc {
						nb = 2
					}
					want += na * nb
				}
			}
		}
	}
	assert.Equal(t, want, runs)
}

// TestGemmEveryLayoutAndOpFromFake: Gemm for the four types, every
// combination of layouts and operations, against plain Go.
func TestGemmEveryLayoutAndOpFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	gemmEveryWay[float32](t, e)
	gemmEveryWay[float64](t, e)
	gemmEveryWay[complex64](t, e)
	gemmEveryWay[complex128](t, e)
}

// TestGemmRowMajorIsTransposeFromFake: row-major views of Go's row-major
// data give the same C as the column-major views of the matrices
// transposed by hand (Cᵀ = Bᵀ·Aᵀ), and as column-major views of the same
// buffers with Trans.
func TestGemmRowMajorIsTransposeFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 4, 3, 6
	ah, bh := data[float64](m*k, 1), data[float64](k*n, 2)
	transpose := func(v []float64, rows, cols int) []float64 { // row-major rows×cols to column-major
		out := make([]float64, len(v))
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				out[i+j*rows] = v[i*cols+j]
			}
		}
		return out
	}
	// Row-major views.
	a, b := up(t, e.s, ah), up(t, e.s, bh)
	c := up(t, e.s, make([]float64, m*n))
	require.NoError(t, cublas.Gemm(e.h, 1, cublas.RowMajorMatrix(a, m, k), cublas.RowMajorMatrix(b, k, n), 0, cublas.RowMajorMatrix(c, m, n)))
	rowMajor := down(t, e.s, c)
	// By hand: column-major copies of A and B, C column-major, then
	// transposed back to row-major.
	ac, bc := up(t, e.s, transpose(ah, m, k)), up(t, e.s, transpose(bh, k, n))
	cc := up(t, e.s, make([]float64, m*n))
	require.NoError(t, cublas.Gemm(e.h, 1, cublas.ColMajorMatrix(ac, m, k), cublas.ColMajorMatrix(bc, k, n), 0, cublas.ColMajorMatrix(cc, m, n)))
	assert.Equal(t, transpose(rowMajor, m, n), down(t, e.s, cc))
	// The transpose identity: the row-major m×k A is the column-major
	// k×m matrix Aᵀ; Cᵀ (n×m column-major, C's row-major storage) = Bᵀ·Aᵀ.
	ct := up(t, e.s, make([]float64, m*n))
	require.NoError(t, cublas.Gemm(e.h, 1, cublas.ColMajorMatrix(b, n, k), cublas.ColMajorMatrix(a, k, m), 0, cublas.ColMajorMatrix(ct, n, m)))
	assert.Equal(t, rowMajor, down(t, e.s, ct))
	// And with Trans: the same buffers seen column-major and transposed.
	c2 := up(t, e.s, make([]float64, m*n))
	require.NoError(t, cublas.Gemm(e.h, 1, cublas.ColMajorMatrix(a, k, m).T(), cublas.ColMajorMatrix(b, n, k).T(), 0, cublas.RowMajorMatrix(c2, m, n)))
	assert.Equal(t, rowMajor, down(t, e.s, c2))
	// And against plain Go.
	want := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			for l := 0; l < k; l++ {
				want[i*n+j] += ah[i*k+l] * bh[l*n+j]
			}
		}
	}
	assert.Equal(t, want, rowMajor)
}

// TestGemmBetaZeroDoesNotReadCFromFake: with beta 0, C may hold NaN; with
// k 0, C is only scaled.
func TestGemmBetaZeroDoesNotReadCFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	nan := float32(0)
	nan /= nan
	a, b := up(t, e.s, data[float32](6, 1)), up(t, e.s, data[float32](6, 2))
	c := up(t, e.s, []float32{nan, nan, nan, nan})
	require.NoError(t, cublas.Gemm(e.h, 1, cublas.ColMajorMatrix(a, 2, 3), cublas.ColMajorMatrix(b, 3, 2), 0, cublas.ColMajorMatrix(c, 2, 2)))
	ah, bh := data[float32](6, 1), data[float32](6, 2)
	got := down(t, e.s, c)
	for i := 0; i < 2; i++ {
		for j := 0; j < 2; j++ {
			var s float32
			for l := 0; l < 3; l++ {
				s += ah[i+2*l] * bh[l+3*j]
			}
			assert.Equal(t, s, got[i+2*j])
		}
	}
	c2 := up(t, e.s, []float32{1, 2, 3, 4})
	empty := cublas.Matrix[float32]{Buf: a, Rows: 2, Cols: 0, LD: 2}
	require.NoError(t, cublas.Gemm(e.h, 1, empty, cublas.Matrix[float32]{Buf: b, Rows: 0, Cols: 2, LD: 1}, 3, cublas.ColMajorMatrix(c2, 2, 2)))
	assert.Equal(t, []float32{3, 6, 9, 12}, down(t, e.s, c2))
}

// stridedEveryWay runs GemmStridedBatched for T over every layout of A, B
// and C and every operation of A and B, with count 3, strides beyond one
// matrix (and 0 for B: one B for every batch), against refGemm per batch.
func stridedEveryWay[T cublas.Float](t *testing.T, e *fenv) {
	const m, n, k, count = 2, 3, 4, 3
	alpha, beta := scalar[T](1, -1), scalar[T](2, 0)
	for _, la := range layouts {
		for _, lb := range layouts {
			for _, lc := range layouts {
				for _, oa := range ops {
					for _, ob := range ops {
						for _, zeroB := range []bool{false, true} {
							name := fmt.Sprintf("%T A%s%s B%s%s C%s zeroB=%v", *new(T), layoutName(la), opName(oa), layoutName(lb), opName(ob), layoutName(lc), zeroB)
							ar, ac := m, k
							if oa != cublas.NoTrans {
								ar, ac = k, m
							}
							br, bc := k, n
							if ob != cublas.NoTrans {
								br, bc = n, k
							}
							sa, sb, sc := ar*ac+3, br*bc+1, m*n+2
							if zeroB {
								sb = 0
							}
							ah, bh, ch := data[T](2+count*sa, 1), data[T](count*br*bc+5, 2), data[T](1+count*sc, 3)
							a := cublas.Matrix[T]{Buf: up(t, e.s, ah), Offset: 2, Rows: ar, Cols: ac, Layout: la, Op: oa}
							b := cublas.Matrix[T]{Buf: up(t, e.s, bh), Rows: br, Cols: bc, Layout: lb, Op: ob}
							c := cublas.Matrix[T]{Buf: up(t, e.s, ch), Offset: 1, Rows: m, Cols: n, Layout: lc}
							before := opsRun(t)
							err := cublas.GemmStridedBatched(e.h, alpha, a, sa, b, sb, beta, c, sc, count)
							if isCplx[T]() && ((oa == cublas.ConjTrans && la != lc) || (ob == cublas.ConjTrans && lb != lc)) {
								assert.ErrorIs(t, err, cublas.ErrShape, name)
								assert.Equal(t, before, opsRun(t), name)
								continue
							}
							require.NoError(t, err, name)
							want := ch
							for i := 0; i < count; i++ {
								ai, bi, ci := a, b, c
								ai.Offset += i * sa
								bi.Offset += i * sb
								ci.Offset += i * sc
								want = refGemmC(alpha, ai, ah, bi, bh, beta, ci, want)
							}
							assert.Equal(t, want, down(t, e.s, c.Buf), name)
							assert.Equal(t, before+1, opsRun(t), name)
						}
					}
				}
			}
		}
	}
}

// TestGemmStridedBatchedFromFake: GemmStridedBatched for the four types.
func TestGemmStridedBatchedFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	stridedEveryWay[float32](t, e)
	stridedEveryWay[float64](t, e)
	stridedEveryWay[complex64](t, e)
	stridedEveryWay[complex128](t, e)
}

// TestGemmExFloat32FromFake: GemmEx and GemmStridedBatchedEx with float32
// operands and Compute32F (and float64 with Compute64F) compute as Gemm,
// in every layout; 16-bit inputs, which the fake does not model, come
// back as cuBLAS's StatusNotSupported, matching ErrNotSupported.
func TestGemmExFloat32FromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 3, 2, 4
	for _, la := range layouts {
		for _, lb := range layouts {
			for _, lc := range layouts {
				for _, oa := range ops[:2] {
					name := fmt.Sprintf("A%s%s B%s C%s", layoutName(la), opName(oa), layoutName(lb), layoutName(lc))
					ar, ac := m, k
					if oa != cublas.NoTrans {
						ar, ac = k, m
					}
					a, ah := shape[float32](t, e.s, ar, ac, la, oa, true, 1)
					b, bh := shape[float32](t, e.s, k, n, lb, cublas.NoTrans, false, 2)
					c, ch := shape[float32](t, e.s, m, n, lc, cublas.NoTrans, true, 3)
					require.NoError(t, cublas.GemmEx(e.h, 2, a, b, -1, c, cublas.Compute32F), name)
					assert.Equal(t, refGemmC(2, a, ah, b, bh, -1, c, ch), down(t, e.s, c.Buf), name)

					d, dh := shape[float64](t, e.s, ar, ac, la, oa, false, 4)
					f, fh := shape[float64](t, e.s, k, n, lb, cublas.NoTrans, true, 5)
					g, gh := shape[float64](t, e.s, m, n, lc, cublas.NoTrans, false, 6)
					require.NoError(t, cublas.GemmEx(e.h, 0.5, d, f, 0, g, cublas.Compute64F), name)
					assert.Equal(t, refGemmC(0.5, d, dh, f, fh, 0, g, gh), down(t, e.s, g.Buf), name)
				}
			}
		}
	}
	// Strided, float32.
	const count = 2
	ah, bh, ch := data[float32](count*m*k, 1), data[float32](k*n, 2), data[float32](count*m*n, 3)
	a := cublas.RowMajorMatrix(up(t, e.s, ah), m, k)
	b := cublas.ColMajorMatrix(up(t, e.s, bh), k, n)
	c := cublas.RowMajorMatrix(up(t, e.s, ch), m, n)
	require.NoError(t, cublas.GemmStridedBatchedEx(e.h, 1, a, m*k, b, 0, 1, c, m*n, count, cublas.Compute32F))
	want := ch
	for i := 0; i < count; i++ {
		ai, ci := a, c
		ai.Offset, ci.Offset = i*m*k, i*m*n
		want = refGemmC(1, ai, ah, b, bh, 1, ci, want)
	}
	assert.Equal(t, want, down(t, e.s, c.Buf))

	// Half inputs: not modelled by the fake, which says so as cuBLAS does
	// for a combination it lacks.
	hb, err := driver.Alloc[cublas.Half](e.ctx, m*k+k*n)
	require.NoError(t, err)
	defer hb.Close()
	hc, err := driver.Alloc[float32](e.ctx, m*n)
	require.NoError(t, err)
	defer hc.Close()
	err = cublas.GemmEx(e.h, 1, cublas.ColMajorMatrix(hb, m, k), cublas.Matrix[cublas.Half]{Buf: hb, Offset: m * k, Rows: k, Cols: n}, 0, cublas.ColMajorMatrix(hc, m, n), cublas.Compute32F)
	assert.ErrorIs(t, err, cublas.ErrNotSupported)
	assert.ErrorIs(t, err, cublas.StatusNotSupported)
	var ce *cublas.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "GemmEx", ce.Op)
	assert.Equal(t, "cublasGemmEx", ce.Func)
}
