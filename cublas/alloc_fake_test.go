//go:build linux

package cublas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/gputest"
)

// TestGemmAllocsFromFake: queuing a Gemm allocates nothing in Go (the
// per-call hot path), nor do Gemv, Axpy, Dot, DotTo, GemmEx and a
// MatmulPlan's Run and RunWith (an FP8 one with all its scales too); GemmBatched's count is logged (it builds its pointer
// arrays per call).
func TestGemmAllocsFromFake(t *testing.T) {
	if gputest.RaceEnabled {
		t.Skip("sync.Pool drops frames at random under -race: allocation counts mean nothing")
	}
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	a, b, c := up(t, e.s, data[float32](64, 1)), up(t, e.s, data[float32](64, 2)), up(t, e.s, make([]float32, 64))
	A, B, C := cublas.ColMajorMatrix(a, 8, 8), cublas.RowMajorMatrix(b, 8, 8), cublas.ColMajorMatrix(c, 8, 8)
	x, y := cublas.Vector[float32]{Buf: a, N: 8, Inc: 1}, cublas.Vector[float32]{Buf: c, N: 8, Inc: 1}
	require.NoError(t, cublas.Gemm(e.h, 1, A, B, 0, C))
	gemm := testing.AllocsPerRun(200, func() {
		if err := cublas.Gemm(e.h, 1, A, B.T(), 0, C); err != nil {
			t.Fatal(err)
		}
	})
	gemv := testing.AllocsPerRun(200, func() {
		if err := cublas.Gemv(e.h, 1, A, x, 0, y); err != nil {
			t.Fatal(err)
		}
	})
	axpy := testing.AllocsPerRun(200, func() {
		if err := cublas.Axpy(e.h, 2, x, y); err != nil {
			t.Fatal(err)
		}
	})
	dot := testing.AllocsPerRun(200, func() {
		if _, err := cublas.Dot(e.h, x, y); err != nil {
			t.Fatal(err)
		}
	})
	r := cublas.Vector[float32]{Buf: b, N: 1}
	dotTo := testing.AllocsPerRun(200, func() {
		if err := cublas.DotTo(e.h, x, y, r); err != nil {
			t.Fatal(err)
		}
	})
	ex := testing.AllocsPerRun(200, func() {
		if err := cublas.GemmEx(e.h, 1, A, B, 0, C, cublas.Compute32F); err != nil {
			t.Fatal(err)
		}
	})
	p, err := cublas.NewMatmulPlan(e.h, A, B, C, nil)
	require.NoError(t, err)
	defer p.Close()
	run := testing.AllocsPerRun(200, func() {
		if err := p.Run(1, A, B, 0, C, C, nil); err != nil {
			t.Fatal(err)
		}
	})
	// RunWith, with a bias and a ReLU mask to store: the training path.
	pt, err := cublas.NewMatmulPlan(e.h, A, B, C, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAuxBias})
	require.NoError(t, err)
	defer pt.Close()
	mask := up(t, e.s, make([]byte, pt.AuxLD()/8*8))
	bias := up(t, e.s, make([]float32, 8))
	runWith := testing.AllocsPerRun(200, func() {
		if err := pt.RunWith(1, A, B, 0, C, C, cublas.MatmulExtras[float32]{Bias: bias, Mask: mask}); err != nil {
			t.Fatal(err)
		}
	})
	// RunWith of an FP8 plan with an 8-bit D, its four scale operands
	// named: the most buffers a Run holds.
	type E4 = cublas.Float8E4M3
	A8, B8, D8 := fp8Views(up(t, e.s, make([]E4, 16*16)), up(t, e.s, make([]E4, 16*16)), up(t, e.s, make([]E4, 16*16)), 16, 16, 16, false)
	p8, err := cublas.NewMatmulPlan(e.h, A8, B8, D8, &cublas.MatmulOptions{AmaxD: true})
	require.NoError(t, err)
	defer p8.Close()
	sc8 := cublas.MatmulScales{A: up(t, e.s, []float32{1}), B: up(t, e.s, []float32{1}), D: up(t, e.s, []float32{1}), AmaxD: up(t, e.s, []float32{0})}
	runFP8 := testing.AllocsPerRun(200, func() {
		if err := p8.RunWith(1, A8, B8, 0, D8, D8, cublas.MatmulExtras[E4]{Scales: sc8}); err != nil {
			t.Fatal(err)
		}
	})
	as := []cublas.Matrix[float32]{A, A}
	bs := []cublas.Matrix[float32]{B, B}
	cs := []cublas.Matrix[float32]{C, {Buf: x.Buf, Rows: 8, Cols: 8}}
	cs[1].Buf = up(t, e.s, make([]float32, 64))
	batched := testing.AllocsPerRun(50, func() {
		if err := cublas.GemmBatched(e.h, 1, as, bs, 0, cs); err != nil {
			t.Fatal(err)
		}
	})
	require.NoError(t, e.s.Synchronize())
	t.Logf("allocations per call: Gemm %v, Gemv %v, Axpy %v, Dot %v, DotTo %v, GemmEx %v, MatmulPlan.Run %v, RunWith %v, FP8 RunWith %v; GemmBatched %v (its pinned arrays and views)", gemm, gemv, axpy, dot, dotTo, ex, run, runWith, runFP8, batched)
	assert.Zero(t, run, "MatmulPlan.Run")
	assert.Zero(t, runWith, "MatmulPlan.RunWith")
	assert.Zero(t, runFP8, "MatmulPlan.RunWith of an FP8 plan with an 8-bit D and all its scales")
	assert.Zero(t, dot, "Dot")
	assert.Zero(t, dotTo, "DotTo")
	assert.Zero(t, ex, "GemmEx")
	assert.Zero(t, gemm, "Gemm")
	assert.Zero(t, gemv, "Gemv")
	assert.Zero(t, axpy, "Axpy")
}
