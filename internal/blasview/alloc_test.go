package blasview_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	bv "github.com/purecuda/cuda/internal/blasview"
)

// The checks run before every cuBLAS call: accepted calls allocate nothing.
func TestAcceptedChecksAllocateNothing(t *testing.T) {
	a, b, c := row(0, 4096, 0, 64, 64, 64), row(1, 4096, 0, 64, 64, 64), row(2, 4096, 0, 64, 64, 64)
	x, y := vec(3, 64, 0, 64, 1), vec(4, 64, 0, 64, 1)
	for name, f := range map[string]func() error{
		"Gemm":               func() error { _, err := bv.Gemm(a, b, c); return err },
		"GemmStridedBatched": func() error { _, err := bv.GemmStridedBatched(a, b, c, 0, 0, 0, 1); return err },
		"Gemv":               func() error { _, err := bv.Gemv(a, x, y); return err },
		"Ger":                func() error { _, err := bv.Ger(a, x, y, false); return err },
		"Trsm":               func() error { _, err := bv.Trsm(bv.Left, bv.Lower, bv.Unit, a, c); return err },
		"Axpy":               func() error { _, err := bv.Axpy(x, y); return err },
		"Dot":                func() error { _, err := bv.Dot(x, y, nil); return err },
	} {
		assert.NoError(t, f(), name)
		assert.Zero(t, testing.AllocsPerRun(100, func() { _ = f() }), name)
	}
}

func BenchmarkGemmCheck(b *testing.B) {
	x, y, z := row(0, 4096, 0, 64, 64, 64), row(1, 4096, 0, 64, 64, 64), row(2, 4096, 0, 64, 64, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bv.Gemm(x, y, z); err != nil {
			b.Fatal(err)
		}
	}
}
