package cublas_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// FP8 plans whose D is of 8-bit floats, on the fake and on the GPU: the
// inputs are small integers and the scales powers of two, so the result
// is exact in float32 and D is the plain-Go reference scaled by D's scale
// and rounded once to D's type (ties to even, saturating).

// f8Max is the largest finite value of T.
func f8Max[T f8]() float64 {
	if _, ok := any(*new(T)).(cublas.Float8E4M3); ok {
		return 448
	}
	return 57344
}

// f8Sat is v rounded to T, saturating at T's largest finite value.
func f8Sat[T f8](v float64) T {
	mx := f8Max[T]()
	return f8Of[T](float32(math.Max(-mx, math.Min(mx, v))))
}

// hostCopy uploads v on s, the buffer closed when t ends.
func hostCopy[T any](t *testing.T, s *driver.Stream, v []T) *driver.Buffer[T] {
	t.Helper()
	b, err := driver.AllocCopy(s, v)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// hostOf downloads b on s.
func hostOf[T any](t *testing.T, s *driver.Stream, b *driver.Buffer[T]) []T {
	t.Helper()
	v, err := b.ToHost(s)
	require.NoError(t, err)
	return v
}

// fp8Out runs TA×TB→TD plans on h (its stream s): both layouts, the
// epilogues None and ReLU, with and without the A, B and D scales, D's
// amax written; D exact, the amax the largest absolute value of the
// result after the epilogue and before D's scale; then results past D's
// largest finite value, saturated. D fills its buffer, so that a C read
// as 16-bit (cuBLASLt's C of an 8-bit D, which beta 0 must leave unread)
// would fall past it. m, n and k are multiples of 16.
func fp8Out[TA, TB, TD f8](t *testing.T, s *driver.Stream, h *cublas.Handle, m, n, k int) {
	ah, bh := make([]TA, m*k), make([]TB, k*n)
	for i := range ah {
		ah[i] = f8Of[TA](float32(i*5%7 - 3))
	}
	for i := range bh {
		bh[i] = f8Of[TB](float32(i*3%5 - 2))
	}
	da, db, dd := hostCopy(t, s, ah), hostCopy(t, s, bh), hostCopy(t, s, make([]TD, m*n))
	sa, sb, sd := hostCopy(t, s, []float32{0.5}), hostCopy(t, s, []float32{4}), hostCopy(t, s, []float32{0.25})
	amax := hostCopy(t, s, []float32{-1})
	check := func(name string, A cublas.Matrix[TA], B cublas.Matrix[TB], D cublas.Matrix[TD], want []float64, ds float64, withAmax bool) {
		t.Helper()
		got, wmax, bad := hostOf(t, s, dd), 0.0, 0
		for i := range m {
			for j := range n {
				v := want[i*n+j]
				wmax = math.Max(wmax, math.Abs(v))
				if w, g := f8Sat[TD](v*ds), got[idx(D, i, j)]; g != w && bad < 3 {
					t.Errorf("%s: D[%d,%d] = %#x (%v), want %#x (%v, of %v before D's scale)", name, i, j, g, f8Val(g), w, f8Val(w), v)
					bad++
				}
			}
		}
		if withAmax {
			assert.Equal(t, float32(wmax), hostOf(t, s, amax)[0], "%s: D's amax", name)
		}
	}
	for _, rowMajor := range []bool{false, true} {
		A, B, D := fp8Views(da, db, dd, m, n, k, rowMajor)
		a := func(i, j int) float64 { return opv(ah, A, i, j, f8Val[TA]) }
		b := func(i, j int) float64 { return opv(bh, B, i, j, f8Val[TB]) }
		for _, epi := range []cublas.Epilogue{cublas.EpilogueNone, cublas.EpilogueReLU} {
			for _, scaled := range []bool{true, false} {
				name := fmt.Sprintf("%T×%T→%T rowMajor=%v epilogue %v scaled=%v", *new(TA), *new(TB), *new(TD), rowMajor, epi, scaled)
				p, err := cublas.NewMatmulPlan(h, A, B, D, &cublas.MatmulOptions{Epilogue: epi, AmaxD: true, Autotune: 4})
				require.NoError(t, err, name)
				x := cublas.MatmulExtras[TD]{Scales: cublas.MatmulScales{AmaxD: amax}}
				s1, s2, s3 := 1.0, 1.0, 1.0
				if scaled {
					x.Scales.A, x.Scales.B, x.Scales.D = sa, sb, sd
					s1, s2, s3 = 0.5, 4, 0.25
				}
				require.NoError(t, dd.Memset8(s, 0x7f), name) // NaN in both types: a D left unwritten shows
				require.NoError(t, amax.Memset32(s, 0xffffffff), name)
				require.NoError(t, p.RunWith(2, A, B, 0, D, D, x), name)
				check(name, A, B, D, fp8Want(m, n, k, a, b, nil, 2, s1, s2, 0, nil, rowMajor, epi), s3, true)
				require.NoError(t, p.Close())
			}
		}
		// Past D's largest finite value (alpha the power of two that
		// takes the largest result to between 1.5 and 3 times it), with
		// no amax: saturated.
		name := fmt.Sprintf("%T×%T→%T rowMajor=%v saturated", *new(TA), *new(TB), *new(TD), rowMajor)
		largest := 0.0
		for _, v := range fp8Want(m, n, k, a, b, nil, 1, 1, 1, 0, nil, rowMajor, cublas.EpilogueNone) {
			largest = math.Max(largest, math.Abs(v))
		}
		require.Positive(t, largest, name)
		alpha := math.Exp2(math.Ceil(math.Log2(1.5 * f8Max[TD]() / largest)))
		p, err := cublas.NewMatmulPlan(h, A, B, D, nil)
		require.NoError(t, err, name)
		require.NoError(t, dd.Memset8(s, 0x7f), name)
		require.NoError(t, p.Run(alpha, A, B, 0, D, D, nil), name)
		want := fp8Want(m, n, k, a, b, nil, alpha, 1, 1, 0, nil, rowMajor, cublas.EpilogueNone)
		over := 0
		for _, v := range want {
			if math.Abs(v) > f8Max[TD]() {
				over++
			}
		}
		require.Positive(t, over, "%s: some results past the largest value", name)
		check(name, A, B, D, want, 1, false)
		require.NoError(t, p.Close())
	}
}
