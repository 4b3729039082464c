package cublas_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

// refMatmulRows is D = epi(A·B + bias) for row-major A (m×k), B (k×n),
// bias per column of D (n), in float64.
func refMatmulRows(a, b []float32, bias []float32, m, n, k int, epi cublas.Epilogue) []float64 {
	d := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				s += float64(a[i*k+l]) * float64(b[l*n+j])
			}
			if bias != nil {
				s += float64(bias[j])
			}
			switch epi {
			case cublas.EpilogueReLU, cublas.EpilogueReLUBias:
				s = math.Max(s, 0)
			case cublas.EpilogueGELU, cublas.EpilogueGELUBias:
				s = 0.5 * s * (1 + math.Tanh(0.7978845608028654*(s+0.044715*s*s*s)))
			}
			d[i*n+j] = s
		}
	}
	return d
}

// TestGPUMatmulPlan: a plan made once runs many times, on row-major and
// column-major views, with every epilogue offered, autotuned or not; the
// results match a plain-Go reference (exact for small integers without
// GELU, 1e-3 relative with it: cuBLASLt's GELU is a fast approximation).
func TestGPUMatmulPlan(t *testing.T) {
	g := newGPU(t, nil)
	r := rand.New(rand.NewPCG(1, 2))
	const m, n, k = 64, 48, 32
	a, b, bias := make([]float32, m*k), make([]float32, k*n), make([]float32, n)
	for i := range a {
		a[i] = float32(r.IntN(7) - 3)
	}
	for i := range b {
		b[i] = float32(r.IntN(7) - 3)
	}
	for i := range bias {
		bias[i] = float32(r.IntN(9) - 4)
	}
	da, db, dbias := upload(t, g, a), upload(t, g, b), upload(t, g, bias)
	dd, err := driver.AllocZeroed[float32](g.s, m*n)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dd.Close() })
	A, B, D := cublas.RowMajorMatrix(da, m, k), cublas.RowMajorMatrix(db, k, n), cublas.RowMajorMatrix(dd, m, n)
	for _, epi := range []cublas.Epilogue{cublas.EpilogueNone, cublas.EpilogueReLU, cublas.EpilogueBias, cublas.EpilogueReLUBias, cublas.EpilogueGELU, cublas.EpilogueGELUBias} {
		for _, tune := range []int{0, 8} {
			p, err := cublas.NewMatmulPlan(g.h, A, B, D, &cublas.MatmulOptions{Epilogue: epi, Autotune: tune})
			require.NoError(t, err, "epilogue %d autotune %d", epi, tune)
			if tune > 1 {
				t.Logf("epilogue %d: autotune timed %v", epi, p.Tuned())
				assert.NotEmpty(t, p.Tuned())
			}
			var bb *driver.Buffer[float32]
			var bh []float32
			if epi == cublas.EpilogueBias || epi == cublas.EpilogueReLUBias || epi == cublas.EpilogueGELUBias {
				bb, bh = dbias, bias
			}
			want := refMatmulRows(a, b, bh, m, n, k, epi)
			for run := 0; run < 3; run++ {
				require.NoError(t, dd.Memset32(g.s, 0x7fc00000)) // NaN: beta 0 must not read C
				require.NoError(t, p.Run(1, A, B, 0, D, D, bb))
				got := download(t, g, dd)
				tol := 0.0
				if epi == cublas.EpilogueGELU || epi == cublas.EpilogueGELUBias {
					tol = 1e-3
				}
				bad := 0
				for i := range want {
					if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol*math.Max(1, math.Abs(want[i]))) {
						if bad < 3 {
							t.Errorf("epilogue %d autotune %d run %d: D[%d] = %v, want %v", epi, tune, run, i, got[i], want[i])
						}
						bad++
					}
				}
			}
			require.NoError(t, p.Close())
		}
	}

	// Column-major, beta 1 into a separate C, alpha 2.
	c := make([]float32, m*n)
	for i := range c {
		c[i] = float32(r.IntN(5) - 2)
	}
	dc := upload(t, g, c)
	Ac, Bc := cublas.ColMajorMatrix(da, m, k), cublas.ColMajorMatrix(db, k, n) // the same data read column-major
	Cc, Dc := cublas.ColMajorMatrix(dc, m, n), cublas.ColMajorMatrix(dd, m, n)
	p, err := cublas.NewMatmulPlan(g.h, Ac, Bc, Dc, nil)
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.Run(2, Ac, Bc, 1, Cc, Dc, nil))
	got := download(t, g, dd)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s float32
			for l := 0; l < k; l++ {
				s += a[i+l*m] * b[l+j*k]
			}
			if want := 2*s + c[i+j*m]; got[i+j*m] != want {
				t.Fatalf("column-major D[%d,%d] = %v, want %v", i, j, got[i+j*m], want)
			}
		}
	}

	// Views that do not match the plan, a missing bias, a closed plan.
	err = p.Run(1, cublas.ColMajorMatrix(da, m, k-1), Bc, 0, Dc, Dc, nil)
	assert.ErrorIs(t, err, cublas.ErrShape)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	err = p.Run(1, Ac, Bc, 0, Dc, Dc, dbias)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "no bias epilogue: a bias is refused")
	err = p.Run(1, Ac, Bc, 0, cublas.ColMajorMatrix(dd, m, n).Sub(1, 0, m-1, n), Dc, nil)
	assert.Error(t, err, "C's shape differs from the plan's")
	short, err := driver.Alloc[float32](g.ctx, m*n-1)
	require.NoError(t, err)
	defer short.Close()
	err = p.Run(1, Ac, Bc, 0, Dc, cublas.ColMajorMatrix(short, m, n), nil)
	assert.ErrorIs(t, err, cublas.ErrOutOfBounds)
	require.NoError(t, p.Close())
	assert.ErrorIs(t, p.Run(1, Ac, Bc, 0, Dc, Dc, nil), driver.ErrClosed)
}

// TestGPUMatmulPlanCaptured: a plan's runs captured into a graph are held
// by it: operands, plan and handle closed, the graph replays exactly.
func TestGPUMatmulPlanCaptured(t *testing.T) {
	needCUBLAS(t)
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	defer ctx.Close()
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	h, err := cublas.NewHandle(s, nil)
	require.NoError(t, err)
	const m, n, k = 32, 32, 16
	a, b := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = float32(i%5 - 2)
	}
	for i := range b {
		b[i] = float32(i%3 - 1)
	}
	da, err := driver.AllocCopy(s, a)
	require.NoError(t, err)
	db, err := driver.AllocCopy(s, b)
	require.NoError(t, err)
	dd, err := driver.AllocZeroed[float32](s, m*n)
	require.NoError(t, err)
	defer dd.Close()
	A, B, D := cublas.RowMajorMatrix(da, m, k), cublas.RowMajorMatrix(db, k, n), cublas.RowMajorMatrix(dd, m, n)
	p, err := cublas.NewMatmulPlan(h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLU})
	require.NoError(t, err)
	gr, err := graph.Capture(s, graph.CaptureRelaxed, func(*driver.Stream) error { return p.Run(1, A, B, 1, D, D, nil) }) // D = relu(A·B + D)
	require.NoError(t, err)
	defer gr.Close()
	require.NoError(t, p.Close())
	require.NoError(t, h.Close())
	require.NoError(t, da.Close())
	require.NoError(t, db.Close())
	x, err := gr.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	const replays = 50
	for range replays {
		require.NoError(t, x.Launch(s))
	}
	got, err := dd.ToHost(s)
	require.NoError(t, err)
	want := make([]float64, m*n)
	for range replays {
		prod := refMatmulRows(a, b, nil, m, n, k, cublas.EpilogueNone)
		for i := range want {
			want[i] = math.Max(prod[i]+want[i], 0)
		}
	}
	for i := range want {
		if float64(got[i]) != want[i] {
			t.Fatalf("D[%d] = %v after %d replays, want %v", i, got[i], replays, want[i])
		}
	}
}

// TestGPUGemmBatched: batches of matrices anywhere (two buffers,
// interleaved offsets, row-major), pointer arrays built by the call,
// exact; captured, the graph holds them.
func TestGPUGemmBatched(t *testing.T) {
	g := newGPU(t, nil)
	const m, n, k, count = 8, 6, 5, 7
	r := rand.New(rand.NewPCG(3, 4))
	pool := smallInts[float64](r, 2*count*m*k+count*k*n)
	dp := upload(t, g, pool)
	out, err := driver.AllocZeroed[float64](g.s, count*m*n)
	require.NoError(t, err)
	t.Cleanup(func() { _ = out.Close() })
	var as, bs, cs []cublas.Matrix[float64]
	for i := range count {
		as = append(as, cublas.Matrix[float64]{Buf: dp, Offset: 2 * i * m * k, Rows: m, Cols: k, Layout: cublas.RowMajor})
		bs = append(bs, cublas.Matrix[float64]{Buf: dp, Offset: 2*count*m*k + i*k*n, Rows: k, Cols: n, Layout: cublas.RowMajor})
		cs = append(cs, cublas.Matrix[float64]{Buf: out, Offset: (count - 1 - i) * m * n, Rows: m, Cols: n, Layout: cublas.RowMajor})
	}
	require.NoError(t, cublas.GemmBatched(g.h, 1, as, bs, 0, cs))
	got := download(t, g, out)
	want := make([]float64, count*m*n)
	for i := range count {
		for x := 0; x < m; x++ {
			for y := 0; y < n; y++ {
				var s float64
				for l := 0; l < k; l++ {
					s += pool[2*i*m*k+x*k+l] * pool[2*count*m*k+i*k*n+l*n+y]
				}
				want[(count-1-i)*m*n+x*n+y] = s
			}
		}
	}
	near(t, "GemmBatched", want, got, 0)

	// Overlapping outputs are refused.
	cs[1] = cs[0]
	err = cublas.GemmBatched(g.h, 1, as, bs, 0, cs)
	assert.ErrorIs(t, err, cublas.ErrAlias)

	// Captured: the pointer arrays and operands live with the graph.
	cs[1] = cublas.Matrix[float64]{Buf: out, Offset: (count - 2) * m * n, Rows: m, Cols: n, Layout: cublas.RowMajor}
	gr, err := graph.Capture(g.s, graph.CaptureRelaxed, func(*driver.Stream) error { return cublas.GemmBatched(g.h, 1, as, bs, 1, cs) })
	require.NoError(t, err)
	defer gr.Close()
	x, err := gr.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	for range 3 {
		require.NoError(t, x.Launch(g.s))
	}
	got = download(t, g, out)
	for i := range want {
		want[i] *= 4 // once, then three more times added
	}
	near(t, "GemmBatched captured", want, got, 0)
}
