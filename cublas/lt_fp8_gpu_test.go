package cublas_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// FP8 plans on the GPU. Inputs are small integers (exact in both 8-bit
// formats), the scales 0.5 and 4 and alpha 2: every product and sum is
// exact in cuBLASLt's float32 accumulation, so D equals the plain-Go
// reference rounded once to D's type (tolerance 0).

// needFP8 skips t on GPUs older than compute capability 9.0 (Hopper),
// where these tests are meant to run.
func needFP8(t *testing.T, g *gpu) {
	t.Helper()
	if major, minor := g.ctx.Device().ComputeCapability(); major < 9 {
		t.Skipf("FP8 plans are tested on compute capability 9.0 and later; this GPU is %d.%d", major, minor)
	}
}

// fp8GPU runs TA×TB→TC plans, both layouts, with and without scales, and
// a bias where D is 16-bit.
func fp8GPU[TA, TB f8, TC f8out](t *testing.T, g *gpu) {
	const m, n, k = 64, 32, 64
	ah, bh, ch := make([]TA, m*k), make([]TB, k*n), make([]TC, m*n)
	for i := range ah {
		ah[i] = f8Of[TA](float32(i*5%7 - 3))
	}
	for i := range bh {
		bh[i] = f8Of[TB](float32(i*3%5 - 2))
	}
	for i := range ch {
		ch[i] = outOf[TC](float64(i%5 - 2))
	}
	da, db, dc := upload(t, g, ah), upload(t, g, bh), upload(t, g, ch)
	dd := upload(t, g, make([]TC, m*n))
	sa, sb := upload(t, g, []float32{0.5}), upload(t, g, []float32{4})
	_, f32 := any(*new(TC)).(float32)
	for _, rowMajor := range []bool{false, true} {
		A, B, D := fp8Views(da, db, dd, m, n, k, rowMajor)
		C := cublas.Matrix[TC]{Buf: dc, Rows: m, Cols: n, Layout: D.Layout}
		epis := []cublas.Epilogue{cublas.EpilogueNone}
		if !f32 {
			epis = append(epis, cublas.EpilogueBias)
		}
		for _, epi := range epis {
			for _, scaled := range []bool{true, false} {
				name := fmt.Sprintf("%T×%T→%T rowMajor=%v epilogue %d scaled=%v", *new(TA), *new(TB), *new(TC), rowMajor, epi, scaled)
				p, err := cublas.NewMatmulPlan(g.h, A, B, D, &cublas.MatmulOptions{Epilogue: epi})
				require.NoError(t, err, name)
				x := cublas.MatmulExtras[TC]{}
				s1, s2 := 1.0, 1.0
				if scaled {
					x.Scales = cublas.MatmulScales{A: sa, B: sb}
					s1, s2 = 0.5, 4
				}
				var bias []float64
				if epi == cublas.EpilogueBias {
					nb := m
					if rowMajor {
						nb = n
					}
					bh := make([]TC, nb)
					for i := range bh {
						bh[i] = outOf[TC](float64(i%3 - 1))
						bias = append(bias, float64(i%3-1))
					}
					x.Bias = upload(t, g, bh)
				}
				require.NoError(t, dd.Memset8(g.s, 0xff), name) // NaN in each type: a D left unwritten shows
				require.NoError(t, p.RunWith(2, A, B, 1, C, D, x), name)
				want := fp8Want(m, n, k,
					func(i, j int) float64 { return opv(ah, A, i, j, f8Val[TA]) },
					func(i, j int) float64 { return opv(bh, B, i, j, f8Val[TB]) },
					func(i, j int) float64 { return outVal(ch[idx(C, i, j)]) }, 2, s1, s2, 1, bias, rowMajor, epi)
				checkFP8D(t, name, download(t, g, dd), want, D, m, n)
				require.NoError(t, p.Close())
			}
		}
	}
}

// TestGPUMatmulPlanFP8: E4M3×E4M3 into float32 and BFloat16, E4M3×E5M2
// into Half, E5M2×E4M3 into BFloat16; column-major and row-major ("TN"
// either way); scaled and not; with a bias into the 16-bit types. Exact.
func TestGPUMatmulPlanFP8(t *testing.T) {
	g := newGPU(t, nil)
	needFP8(t, g)
	fp8GPU[cublas.Float8E4M3, cublas.Float8E4M3, float32](t, g)
	fp8GPU[cublas.Float8E4M3, cublas.Float8E4M3, cublas.BFloat16](t, g)
	fp8GPU[cublas.Float8E4M3, cublas.Float8E5M2, cublas.Half](t, g)
	fp8GPU[cublas.Float8E5M2, cublas.Float8E4M3, cublas.BFloat16](t, g)
}

// TestGPUMatmulPlanFP8Held: the scale buffers of a queued RunWith may be
// closed at once: the matmul still reads them (D is scaled by 2·3).
func TestGPUMatmulPlanFP8Held(t *testing.T) {
	g := newGPU(t, nil)
	needFP8(t, g)
	const m, n, k = 32, 32, 32
	ah, bh := make([]cublas.Float8E4M3, m*k), make([]cublas.Float8E4M3, k*n)
	for i := range ah {
		ah[i], bh[i] = cublas.Float8E4M3Of(float32(i%3-1)), cublas.Float8E4M3Of(float32(i%4-2))
	}
	dd := upload(t, g, make([]float32, m*n))
	A, B, D := fp8Views(upload(t, g, ah), upload(t, g, bh), dd, m, n, k, false)
	p, err := cublas.NewMatmulPlan(g.h, A, B, D, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	s1, err := driver.AllocCopy(g.s, []float32{2})
	require.NoError(t, err)
	s2, err := driver.AllocCopy(g.s, []float32{3})
	require.NoError(t, err)
	require.NoError(t, p.RunWith(1, A, B, 0, D, D, cublas.MatmulExtras[float32]{Scales: cublas.MatmulScales{A: s1, B: s2}}))
	require.NoError(t, s1.Close())
	require.NoError(t, s2.Close())
	want := fp8Want(m, n, k,
		func(i, j int) float64 { return opv(ah, A, i, j, f8Val[cublas.Float8E4M3]) },
		func(i, j int) float64 { return opv(bh, B, i, j, f8Val[cublas.Float8E4M3]) }, nil, 1, 2, 3, 0, nil, false, cublas.EpilogueNone)
	got := download(t, g, dd)
	for i := range m {
		for j := range n {
			if w := float32(want[i*n+j]); got[idx(D, i, j)] != w {
				t.Fatalf("D[%d,%d] = %v, want %v", i, j, got[idx(D, i, j)], w)
			}
		}
	}
}
