package cublas_test

import (
	"testing"

	"github.com/purecuda/cuda/cublas"
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
