package cublas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

// TestGPUMatmulPlanCapturedBias: cuBLASLt bakes a captured Run's bias
// pointer (a descriptor attribute that Run sets) into the graph: Runs
// after the capture with another bias leave the graph's alone, and the
// graph holds its bias, closed, through the replays. Exact (small
// integers).
func TestGPUMatmulPlanCapturedBias(t *testing.T) {
	g := newGPU(t, nil)
	const m, n, k = 16, 8, 4
	a, b := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = float32(i%5 - 2)
	}
	for i := range b {
		b[i] = float32(i%3 - 1)
	}
	A, B := cublas.RowMajorMatrix(upload(t, g, a), m, k), cublas.RowMajorMatrix(upload(t, g, b), k, n)
	d1, d2 := upload(t, g, make([]float32, m*n)), upload(t, g, make([]float32, m*n))
	D1, D2 := cublas.RowMajorMatrix(d1, m, n), cublas.RowMajorMatrix(d2, m, n)
	bias1h, bias2h := make([]float32, n), make([]float32, n) // per column of a row-major D
	for j := range bias1h {
		bias1h[j], bias2h[j] = float32(j+1), float32(100*(j+1))
	}
	bias1, err := driver.AllocCopy(g.s, bias1h)
	require.NoError(t, err)
	bias2 := upload(t, g, bias2h)
	p, err := cublas.NewMatmulPlan(g.h, A, B, D1, &cublas.MatmulOptions{Epilogue: cublas.EpilogueBias})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	gr, err := graph.Capture(g.s, graph.CaptureRelaxed, func(*driver.Stream) error {
		return p.Run(1, A, B, 0, D1, D1, bias1)
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, gr.Close()) }()
	x, err := gr.Instantiate()
	require.NoError(t, err)
	defer func() { assert.NoError(t, x.Close()) }()
	require.NoError(t, bias1.Close())
	for range 3 {
		require.NoError(t, p.Run(1, A, B, 0, D2, D2, bias2))
		require.NoError(t, x.Launch(g.s))
	}
	check := func(what string, got []float32, bias []float32) {
		want := refMatmulRows(a, b, bias, m, n, k, cublas.EpilogueBias)
		for i := range want {
			if float64(got[i]) != want[i] {
				t.Fatalf("%s: D[%d] = %v, want %v", what, i, got[i], want[i])
			}
		}
	}
	check("the graph's bias", download(t, g, d1), bias1h)
	check("the later Runs' bias", download(t, g, d2), bias2h)
}
