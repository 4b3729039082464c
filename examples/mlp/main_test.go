package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m, main) }

func TestNoGPU(t *testing.T) { exampletest.NoGPU(t, "mlp") }

// TestOnThisMachine runs the example for real where there is a GPU (and
// must, under PURECUDA_REQUIRE_GPU).
func TestOnThisMachine(t *testing.T) {
	stdout := exampletest.OnThisMachine(t)
	assert.Contains(t, stdout, "mlp: output matches the CPU reference")
	assert.Contains(t, stdout, "mlp: step (queue the pass, wait for it), median of 200: stream calls ")
}

// TestForwardByHand: the CPU reference on a 2→2→1 network worked out by
// hand: row-major weights, bias, ReLU on the hidden layer only.
func TestForwardByHand(t *testing.T) {
	ls := []layer{
		{in: 2, out: 2, w: []float32{1, -1, 2, 1}, b: []float32{0, -10}}, // W = [[1 -1] [2 1]]
		{in: 2, out: 1, w: []float32{3, 1}, b: []float32{-1}},
	}
	// x = [1 1]: hidden = ReLU([1+2, -1+1-10]) = [3 0]; out = 3·3 + 0 − 1 = 8.
	// x = [-2 0]: hidden = ReLU([-2, 2-10]) = [0 0]; out = −1 (no ReLU).
	assert.Equal(t, []float32{8, -1}, forward(ls, []float32{1, 1, -2, 0}))
}

// TestCompare: outputs within the tolerance pass and report the largest
// difference; one beyond it, or NaN, fails and names the element.
func TestCompare(t *testing.T) {
	want := make([]float32, 2*widths[len(widths)-1])
	r := rand.New(rand.NewPCG(3, 4))
	for i := range want {
		want[i] = float32(r.NormFloat64() * 10)
	}
	got := append([]float32(nil), want...)
	got[3] += float32(math.Max(1, math.Abs(float64(want[3])))) * tolerance / 2
	worst, err := compare(want, got)
	require.NoError(t, err)
	assert.InDelta(t, tolerance/2, worst, tolerance/10)

	got[13] = want[13] + float32(math.Max(1, math.Abs(float64(want[13]))))*tolerance*2
	_, err = compare(want, got)
	assert.ErrorContains(t, err, "output 13 (row 1, column 3)")
	got[13] = float32(math.NaN())
	_, err = compare(want, got)
	assert.ErrorContains(t, err, "output 13 ")
	_, err = compare(want, got[:3])
	assert.Error(t, err)
}
