package cublas_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// TestGPUMatmulPlanFP8Out: E4M3×E4M3 into E4M3, E4M3×E5M2 into E5M2
// and E4M3, E5M2×E4M3 into E4M3 and E5M2; column-major and row-major; None and ReLU;
// scaled and not; D's amax; saturation. Exact.
func TestGPUMatmulPlanFP8Out(t *testing.T) {
	g := newGPU(t, nil)
	needFP8(t, g)
	fp8Out[cublas.Float8E4M3, cublas.Float8E4M3, cublas.Float8E4M3](t, g.s, g.h, 64, 32, 64)
	fp8Out[cublas.Float8E4M3, cublas.Float8E5M2, cublas.Float8E5M2](t, g.s, g.h, 64, 32, 64)
	fp8Out[cublas.Float8E4M3, cublas.Float8E5M2, cublas.Float8E4M3](t, g.s, g.h, 64, 32, 64)
	fp8Out[cublas.Float8E5M2, cublas.Float8E4M3, cublas.Float8E4M3](t, g.s, g.h, 64, 32, 64)
	fp8Out[cublas.Float8E5M2, cublas.Float8E4M3, cublas.Float8E5M2](t, g.s, g.h, 64, 32, 64)
}

// TestGPUMatmulPlanFP8OutHeld: D's scale and amax buffers of a queued
// RunWith closed at once: the matmul still reads the scale (D is the
// result times 0.5) and writes the amax into memory still allocated
// (compute-sanitizer's memcheck sees a write to freed memory).
func TestGPUMatmulPlanFP8OutHeld(t *testing.T) {
	g := newGPU(t, nil)
	needFP8(t, g)
	type E4 = cublas.Float8E4M3
	const m, n, k = 32, 32, 32
	ah, bh := make([]E4, m*k), make([]E4, k*n)
	for i := range ah {
		ah[i], bh[i] = cublas.Float8E4M3Of(float32(i%3-1)), cublas.Float8E4M3Of(float32(i%4-2))
	}
	dd := upload(t, g, make([]E4, m*n))
	A, B, D := fp8Views(upload(t, g, ah), upload(t, g, bh), dd, m, n, k, false)
	p, err := cublas.NewMatmulPlan(g.h, A, B, D, &cublas.MatmulOptions{AmaxD: true})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	sd, err := driver.AllocCopy(g.s, []float32{0.5})
	require.NoError(t, err)
	amax, err := driver.AllocZeroed[float32](g.s, 1)
	require.NoError(t, err)
	require.NoError(t, p.RunWith(1, A, B, 0, D, D, cublas.MatmulExtras[E4]{Scales: cublas.MatmulScales{D: sd, AmaxD: amax}}))
	require.NoError(t, sd.Close())
	require.NoError(t, amax.Close())
	want := fp8Want(m, n, k,
		func(i, j int) float64 { return opv(ah, A, i, j, f8Val[E4]) },
		func(i, j int) float64 { return opv(bh, B, i, j, f8Val[E4]) }, nil, 1, 1, 1, 0, nil, false, cublas.EpilogueNone)
	got := download(t, g, dd)
	for i := range m {
		for j := range n {
			if w := f8Sat[E4](want[i*n+j] * 0.5); got[idx(D, i, j)] != w {
				t.Fatalf("D[%d,%d] = %v, want %v", i, j, f8Val(got[idx(D, i, j)]), f8Val(w))
			}
		}
	}
}

// TestGPUMatmulPlanFP8OutGELU: GELU into an 8-bit D (E4M3×E4M3→E4M3,
// column-major and row-major, D's scale 0.25, products spanning GELU's
// bend): each element of D within one E4M3 step of the plain-Go GELU
// times 0.25 (cuBLASLt's GELU is an approximation), D's amax that of
// GELU's output before D's scale, within 1%. Where cuBLASLt offers no
// such kernel (NewMatmulPlan's ErrNotSupported), the test is skipped,
// saying so.
func TestGPUMatmulPlanFP8OutGELU(t *testing.T) {
	g := newGPU(t, nil)
	needFP8(t, g)
	type E4 = cublas.Float8E4M3
	const m, n, k = 64, 32, 64
	ah, bh := make([]E4, m*k), make([]E4, k*n)
	for i := range ah {
		ah[i] = cublas.Float8E4M3Of(float32(i*5%7-3) / 4)
	}
	for i := range bh {
		bh[i] = cublas.Float8E4M3Of(float32(i*3%5-2) / 4)
	}
	da, db, dd := upload(t, g, ah), upload(t, g, bh), upload(t, g, make([]E4, m*n))
	sd, amax := upload(t, g, []float32{0.25}), upload(t, g, []float32{-1})
	for _, rowMajor := range []bool{false, true} {
		A, B, D := fp8Views(da, db, dd, m, n, k, rowMajor)
		p, err := cublas.NewMatmulPlan(g.h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueGELU, AmaxD: true})
		if errors.Is(err, cublas.ErrNotSupported) {
			t.Skipf("rowMajor=%v: cuBLASLt offers no GELU into an 8-bit D here: %v", rowMajor, err)
		}
		require.NoError(t, err, "rowMajor=%v", rowMajor)
		require.NoError(t, amax.Memset32(g.s, 0xffffffff))
		require.NoError(t, p.RunWith(1, A, B, 0, D, D, cublas.MatmulExtras[E4]{Scales: cublas.MatmulScales{D: sd, AmaxD: amax}}))
		want := fp8Want(m, n, k,
			func(i, j int) float64 { return opv(ah, A, i, j, f8Val[E4]) },
			func(i, j int) float64 { return opv(bh, B, i, j, f8Val[E4]) }, nil, 1, 1, 1, 0, nil, rowMajor, cublas.EpilogueGELU)
		got, wmax, neg := download(t, g, dd), 0.0, 0
		for i := range m {
			for j := range n {
				v := want[i*n+j]
				wmax = math.Max(wmax, math.Abs(v))
				if v < -0.01 {
					neg++
				}
				w, x := v*0.25, f8Val(got[idx(D, i, j)])
				// One step of E4M3 is at most an eighth of a normal
				// value, 2^-9 below them.
				if math.Abs(x-w) > math.Abs(w)/8+1.0/512 {
					t.Fatalf("rowMajor=%v: D[%d,%d] = %v, want %v (GELU %v times 0.25) within one E4M3 step", rowMajor, i, j, x, w, v)
				}
			}
		}
		require.Positive(t, neg, "some GELU outputs are negative")
		assert.InEpsilon(t, wmax, float64(download(t, g, amax)[0]), 0.01, "rowMajor=%v: D's amax, of GELU's output before D's scale", rowMajor)
		require.NoError(t, p.Close())
	}
}
