//go:build linux

package cublas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestMatmulPlanCapturedBiasFromFake: a captured Run's bias is the one it
// named, for good: Runs after the capture with another bias (which
// change the plan's descriptor) leave the graph's alone, and the graph
// holds its bias, closed, through the replays.
func TestMatmulPlanCapturedBiasFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 3, 2, 4
	ah, bh := data[float32](m*k, 1), data[float32](k*n, 2)
	A, B := cublas.ColMajorMatrix(up(t, e.s, ah), m, k), cublas.ColMajorMatrix(up(t, e.s, bh), k, n)
	d1, d2 := up(t, e.s, make([]float32, m*n)), up(t, e.s, make([]float32, m*n))
	D1, D2 := cublas.ColMajorMatrix(d1, m, n), cublas.ColMajorMatrix(d2, m, n)
	bias1h, bias2h := []float32{1, 2, 3}, []float32{100, 200, 300}
	bias1, err := driver.AllocCopy(e.s, bias1h)
	require.NoError(t, err)
	bias2 := up(t, e.s, bias2h)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D1, &cublas.MatmulOptions{Epilogue: cublas.EpilogueBias})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()

	g, err := graph.Capture(e.s, graph.CaptureGlobal, func(*driver.Stream) error {
		return p.Run(1, A, B, 0, D1, D1, bias1)
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, g.Close()) }()
	x, err := g.Instantiate()
	require.NoError(t, err)
	defer func() { assert.NoError(t, x.Close()) }()
	require.NoError(t, bias1.Close())

	want := func(bias []float32) []float32 {
		w := gemmWant(ah, bh, m, n, k)
		for i := range w {
			w[i] += bias[i%m]
		}
		return w
	}
	for range 3 {
		require.NoError(t, p.Run(1, A, B, 0, D2, D2, bias2))
		require.NoError(t, x.Launch(e.s))
	}
	assert.Equal(t, want(bias1h), down(t, e.s, d1), "the graph's bias")
	assert.Equal(t, want(bias2h), down(t, e.s, d2), "the later Runs' bias")
}
