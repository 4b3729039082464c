package cublas_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
)

// exIn and exOut are the input and output types the GemmEx tests use.
type (
	exIn interface {
		cublas.Half | cublas.BFloat16 | int8
	}
	exOut interface{ float32 | int32 }
)

// exOf is v in T (exact for the small integers, and their halves, used).
func exOf[T exIn | exOut](v float64) T {
	var z T
	switch p := any(&z).(type) {
	case *cublas.Half:
		*p = cublas.HalfOf(float32(v))
	case *cublas.BFloat16:
		*p = cublas.BFloat16Of(float32(v))
	case *int8:
		*p = int8(v)
	case *float32:
		*p = float32(v)
	case *int32:
		*p = int32(v)
	}
	return z
}

// exVal is v's value.
func exVal[T exIn | exOut](v T) float64 {
	switch x := any(v).(type) {
	case cublas.Half:
		return float64(x.Float32())
	case cublas.BFloat16:
		return float64(x.Float32())
	case int8:
		return float64(x)
	case float32:
		return float64(x)
	}
	return float64(any(v).(int32))
}

// exMat is a rows×cols view of layout l and operation op over a new
// buffer of small random integers (padded as newMat pads, when pad).
func exMat[T exIn | exOut](tb testing.TB, g *gpu, r *rand.Rand, rows, cols int, l cublas.Layout, op cublas.Op, pad bool) (cublas.Matrix[T], []T) {
	tb.Helper()
	fr, fc := rows, cols
	if pad {
		fr, fc = rows+4, cols+4
	}
	host := make([]T, fr*fc)
	for i := range host {
		host[i] = exOf[T](float64(r.IntN(7) - 3))
	}
	m := cublas.Matrix[T]{Buf: upload(tb, g, host), Rows: fr, Cols: fc, Layout: l}
	if pad {
		m = m.Sub(4, 4, rows, cols) // offsets that keep 4-element alignment, for int8
	}
	m.Op = op
	return m, host
}

// exAt is element (i, j) of op(m) in data (no conjugates: real types).
func exAt[T exIn | exOut](data []T, m cublas.Matrix[T], i, j int) float64 {
	if m.Op != cublas.NoTrans {
		i, j = j, i
	}
	return exVal(data[idx(m, i, j)])
}

// refGemmEx is C = alpha·op(A)·op(B) + beta·C in float64 (exact for the
// values used), over c's buffer contents hc.
func refGemmEx[TI exIn, TC exOut](alpha float64, a cublas.Matrix[TI], ha []TI, b cublas.Matrix[TI], hb []TI, beta float64, c cublas.Matrix[TC], hc []TC) []TC {
	out := slices.Clone(hc)
	m, k := opDims(a)
	_, n := opDims(b)
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				s += exAt(ha, a, i, l) * exAt(hb, b, l, j)
			}
			out[idx(c, i, j)] = exOf[TC](alpha*s + beta*exVal(hc[idx(c, i, j)]))
		}
	}
	return out
}

// TestGPUGemmEx: Half and BFloat16 inputs with a float32 result
// (Compute32F), int8 inputs with an int32 result (Compute32I; sizes,
// leading dimensions and offsets multiples of 4, alpha and beta 1), every layout of A, B and C and every operation
// of A and B, against refGemmEx (exact: small integers, float32 or int32
// accumulation). For int8, cuBLAS may refuse some layouts
// (StatusNotSupported, logged); the "TN" form (column-major C = Aᵀ·B) must
// work, and so must its row-major spelling.
func TestGPUGemmEx(t *testing.T) {
	g := newGPU(t, nil)
	t.Run("Half", func(t *testing.T) { gemmExCases[cublas.Half, float32](t, g, 19, 13, 21, cublas.Compute32F) })
	t.Run("BFloat16", func(t *testing.T) { gemmExCases[cublas.BFloat16, float32](t, g, 19, 13, 21, cublas.Compute32F) })
	t.Run("int8", func(t *testing.T) { gemmExCases[int8, int32](t, g, 32, 16, 64, cublas.Compute32I) })
}

func gemmExCases[TI exIn, TC exOut](t *testing.T, g *gpu, m, n, k int, compute cublas.ComputeType) {
	r := rand.New(rand.NewPCG(31, 32))
	alpha, beta := 2.0, -1.0
	_, isInt := any(TC(0)).(int32)
	if isInt {
		// cuBLAS has documented its int8 path for alpha and beta of 0
		// or 1 only.
		alpha, beta = 1, 1
	}
	unsupported := 0
	ops := []cublas.Op{cublas.NoTrans, cublas.Trans}
	for _, la := range layouts {
		for _, lb := range layouts {
			for _, lc := range layouts {
				for _, oa := range ops {
					for _, ob := range ops {
						pad := (int(la)+int(lb)+int(oa)+int(ob))%2 == 1
						name := fmt.Sprintf("A %s %s, B %s %s, C %s, pad %v", lname(la), oname(oa), lname(lb), oname(ob), lname(lc), pad)
						ar, ac := m, k
						if oa != cublas.NoTrans {
							ar, ac = k, m
						}
						br, bc := k, n
						if ob != cublas.NoTrans {
							br, bc = n, k
						}
						a, ha := exMat[TI](t, g, r, ar, ac, la, oa, pad)
						b, hb := exMat[TI](t, g, r, br, bc, lb, ob, pad)
						c, hc := exMat[TC](t, g, r, m, n, lc, cublas.NoTrans, pad)
						err := cublas.GemmEx(g.h, alpha, a, b, beta, c, compute)
						// TN: cuBLAS's A transposed and B not, C column-major.
						tn := lc == cublas.ColMajor && (oa == cublas.Trans) == (la == cublas.ColMajor) && (ob == cublas.NoTrans) == (lb == cublas.ColMajor)
						if isInt && !tn && errors.Is(err, cublas.StatusNotSupported) {
							unsupported++
							continue
						}
						require.NoError(t, err, name)
						want := refGemmEx(alpha, a, ha, b, hb, beta, c, hc)
						got := download(t, g, c.Buf)
						for i := range want {
							if want[i] != got[i] {
								t.Errorf("%s: element %d is %v, want %v", name, i, got[i], want[i])
								break
							}
						}
					}
				}
			}
		}
	}
	if unsupported > 0 {
		t.Logf("cuBLAS does not support %d of the 64 layout and operation combinations for these types", unsupported)
	}
}

// TestGPUGemmStridedBatchedEx: three BFloat16 batches with a float32
// result, strides with gaps, each layout of C (exact).
func TestGPUGemmStridedBatchedEx(t *testing.T) {
	g := newGPU(t, nil)
	r := rand.New(rand.NewPCG(33, 34))
	const m, n, k, count = 24, 8, 16, 3
	const sa, sb, sc = m*k + 8, k*n + 8, m*n + 8
	shiftI := func(x cublas.Matrix[cublas.BFloat16], d int) cublas.Matrix[cublas.BFloat16] { x.Offset += d; return x }
	shiftC := func(x cublas.Matrix[float32], d int) cublas.Matrix[float32] { x.Offset += d; return x }
	for _, lc := range layouts {
		a, ha := exMat[cublas.BFloat16](t, g, r, (count-1)*sa+m*k, 1, cublas.ColMajor, cublas.NoTrans, false)
		b, hb := exMat[cublas.BFloat16](t, g, r, (count-1)*sb+k*n, 1, cublas.ColMajor, cublas.NoTrans, false)
		c, hc := exMat[float32](t, g, r, (count-1)*sc+m*n, 1, cublas.ColMajor, cublas.NoTrans, false)
		av := cublas.Matrix[cublas.BFloat16]{Buf: a.Buf, Rows: k, Cols: m, Op: cublas.Trans}
		bv := cublas.Matrix[cublas.BFloat16]{Buf: b.Buf, Rows: k, Cols: n, Layout: cublas.RowMajor, Op: cublas.Trans}
		bv.Rows, bv.Cols = n, k
		cv := cublas.Matrix[float32]{Buf: c.Buf, Rows: m, Cols: n, Layout: lc}
		require.NoError(t, cublas.GemmStridedBatchedEx(g.h, 1, av, sa, bv, sb, 0.5, cv, sc, count, cublas.Compute32F), lname(lc))
		want := slices.Clone(hc)
		for i := range count {
			want = refGemmEx(1, shiftI(av, i*sa), ha, shiftI(bv, i*sb), hb, 0.5, shiftC(cv, i*sc), want)
		}
		got := download(t, g, c.Buf)
		for i := range want {
			if want[i] != got[i] {
				t.Errorf("C %s: element %d is %v, want %v", lname(lc), i, got[i], want[i])
				break
			}
		}
	}
}
