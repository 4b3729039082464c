package cublas_test

import (
	"testing"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/internal/gputest"
)

// BenchmarkGemm64 queues 64×64×64 SGEMMs back to back on one handle (a
// wait every 1000 calls and at the end), per call; with -benchmem it
// shows what one Gemm allocates.
func BenchmarkGemm64(b *testing.B) {
	g := newGPU(b, nil)
	const n = 64
	a := cublas.ColMajorMatrix(upload(b, g, make([]float32, n*n)), n, n)
	bm := cublas.ColMajorMatrix(upload(b, g, make([]float32, n*n)), n, n)
	c := cublas.ColMajorMatrix(upload(b, g, make([]float32, n*n)), n, n)
	if err := cublas.Gemm(g.h, 1, a, bm, 0, c); err != nil {
		b.Fatal(err)
	}
	if err := g.s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer gputest.Profile(b, "gemm64")()
	b.ResetTimer()
	for i := range b.N {
		if err := cublas.Gemm(g.h, 1, a, bm, 0, c); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			if err := g.s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := g.s.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMatmulPlan: a 64×64×64 float32 cuBLASLt matmul with a bias and
// ReLU, per call, run from a plan made once ("Reused") and from a plan
// made, run and closed at every call ("Rebuilt": descriptors, layouts,
// preference and the heuristic each time, as a binding without plans
// does), each queued then waited for every 100 calls.
func BenchmarkMatmulPlan(b *testing.B) {
	g := newGPU(b, nil)
	const n = 64
	a := cublas.RowMajorMatrix(upload(b, g, make([]float32, n*n)), n, n)
	bm := cublas.RowMajorMatrix(upload(b, g, make([]float32, n*n)), n, n)
	d := cublas.RowMajorMatrix(upload(b, g, make([]float32, n*n)), n, n)
	bias := upload(b, g, make([]float32, n))
	opts := &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUBias}
	wait := func(i int) {
		if i%100 == 99 {
			if err := g.s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("Reused", func(b *testing.B) {
		p, err := cublas.NewMatmulPlan(g.h, a, bm, d, opts)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := p.Run(1, a, bm, 0, d, d, bias); err != nil {
				b.Fatal(err)
			}
			wait(i)
		}
		if err := g.s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("Rebuilt", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			p, err := cublas.NewMatmulPlan(g.h, a, bm, d, opts)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Run(1, a, bm, 0, d, d, bias); err != nil {
				b.Fatal(err)
			}
			if err := p.Close(); err != nil {
				b.Fatal(err)
			}
			wait(i)
		}
		if err := g.s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	})
}
