package cublas_test

import (
	"math"
	"testing"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// Helpers of the FP8 tests (the fake's and the GPU's): element
// conversions and the plain-Go reference.

// f8 are the 8-bit float element types.
type f8 interface {
	cublas.Float8E4M3 | cublas.Float8E5M2
}

// f8out are the element types of an FP8 plan's D.
type f8out interface {
	float32 | cublas.Half | cublas.BFloat16
}

// f8Of is v rounded to T.
func f8Of[T f8](v float32) T {
	if _, ok := any(*new(T)).(cublas.Float8E4M3); ok {
		return any(cublas.Float8E4M3Of(v)).(T)
	}
	return any(cublas.Float8E5M2Of(v)).(T)
}

// f8Val is x's value.
func f8Val[T f8](x T) float64 {
	if v, ok := any(x).(cublas.Float8E4M3); ok {
		return float64(v.Float32())
	}
	return float64(any(x).(cublas.Float8E5M2).Float32())
}

// outOf is v rounded to T (through float32, exact for the values used).
func outOf[T f8out](v float64) T {
	var z T
	switch any(z).(type) {
	case cublas.Half:
		return any(cublas.HalfOf(float32(v))).(T)
	case cublas.BFloat16:
		return any(cublas.BFloat16Of(float32(v))).(T)
	}
	return any(float32(v)).(T)
}

// outVal is x's value.
func outVal[T f8out](x T) float64 {
	switch v := any(x).(type) {
	case cublas.Half:
		return float64(v.Float32())
	case cublas.BFloat16:
		return float64(v.Float32())
	}
	return float64(any(x).(float32))
}

// fp8Want is D = alpha·sa·sb·op(A)·op(B) + beta·C (m×n, row-major here),
// in float64, with the epilogue's bias (by row of D as cuBLASLt sees it:
// per column of a row-major D) and activation.
func fp8Want(m, n, k int, a, b, c func(i, j int) float64, alpha, sa, sb, beta float64, bias []float64, rowMajor bool, epi cublas.Epilogue) []float64 {
	d := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				s += a(i, l) * b(l, j)
			}
			v := alpha * sa * sb * s
			if beta != 0 {
				v += beta * c(i, j)
			}
			if bias != nil {
				if rowMajor {
					v += bias[j]
				} else {
					v += bias[i]
				}
			}
			switch epi {
			case cublas.EpilogueReLU, cublas.EpilogueReLUBias:
				v = math.Max(v, 0)
			case cublas.EpilogueGELU, cublas.EpilogueGELUBias:
				v = geluRef(v)
			}
			d[i*n+j] = v
		}
	}
	return d
}

// opv is element (i, j) of op(m) (real types), m's buffer holding host.
func opv[T cublas.Element](host []T, m cublas.Matrix[T], i, j int, val func(T) float64) float64 {
	if m.Op != cublas.NoTrans {
		i, j = j, i
	}
	return val(host[idx(m, i, j)])
}

// fp8Views are the views of an FP8 matmul in the "TN" form cuBLASLt
// takes: column-major, A the T() of a K×M matrix and B a K×N one;
// row-major, A an M×K matrix and B the T() of an N×K one; D M×N.
func fp8Views[TA, TB f8, TC cublas.Element](a *driver.Buffer[TA], b *driver.Buffer[TB], d *driver.Buffer[TC], m, n, k int, rowMajor bool) (cublas.Matrix[TA], cublas.Matrix[TB], cublas.Matrix[TC]) {
	if rowMajor {
		return cublas.RowMajorMatrix(a, m, k), cublas.RowMajorMatrix(b, n, k).T(), cublas.RowMajorMatrix(d, m, n)
	}
	return cublas.ColMajorMatrix(a, k, m).T(), cublas.ColMajorMatrix(b, k, n), cublas.ColMajorMatrix(d, m, n)
}

// checkFP8D compares an FP8 plan's m×n result got, laid out as D, with
// want (row by row, in float64), rounded to D's type: exact, the first
// three differences reported.
func checkFP8D[TC f8out](t *testing.T, name string, got []TC, want []float64, d cublas.Matrix[TC], m, n int) {
	t.Helper()
	bad := 0
	for i := range m {
		for j := range n {
			w := outVal(outOf[TC](want[i*n+j]))
			if g := outVal(got[idx(d, i, j)]); g != w && bad < 3 {
				t.Errorf("%s: D[%d,%d] = %v, want %v", name, i, j, g, w)
				bad++
			}
		}
	}
}
