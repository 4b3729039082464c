//go:build linux

package cublas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestMatmulPlanFP8OutFromFake: FP8 plans whose D is of 8-bit floats, as
// on the GPU (fp8Out), against the fake's model of cuBLASLt.
func TestMatmulPlanFP8OutFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	fp8Out[cublas.Float8E4M3, cublas.Float8E4M3, cublas.Float8E4M3](t, e.s, e.h, 32, 16, 16)
	fp8Out[cublas.Float8E4M3, cublas.Float8E5M2, cublas.Float8E5M2](t, e.s, e.h, 32, 16, 16)
	fp8Out[cublas.Float8E5M2, cublas.Float8E4M3, cublas.Float8E4M3](t, e.s, e.h, 32, 16, 16)
}

// TestMatmulPlanFP8OutRefusalsFromFake: what an 8-bit D cannot have, at
// NewMatmulPlan (a bias, E5M2 from E4M3 by E4M3, AmaxD for another D or
// an empty one) and at Run (beta other
// than 0, a C other than D, a D scale or an amax the plan does not take,
// an amax missing, closed or overlapping an operand): errors,
// nothing queued.
func TestMatmulPlanFP8OutRefusalsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	type E4 = cublas.Float8E4M3
	const m, n, k = 32, 16, 16
	inv := driver.ErrInvalidArgument
	var a4 *driver.Buffer[E4]
	A, B, D := fp8Views(a4, a4, a4, m, n, k, false)
	_, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUBias})
	assert.ErrorIs(t, err, inv)
	assert.ErrorContains(t, err, "an 8-bit D takes no bias")
	_, err = cublas.NewMatmulPlan(e.h, A, B, cublas.ColMajorMatrix[cublas.Float8E5M2](nil, m, n), nil)
	assert.ErrorIs(t, err, inv)
	assert.ErrorContains(t, err, "only where A or B is E5M2")
	_, err = cublas.NewMatmulPlan(e.h, A, B, cublas.ColMajorMatrix[cublas.BFloat16](nil, m, n), &cublas.MatmulOptions{AmaxD: true})
	assert.ErrorIs(t, err, inv)
	assert.ErrorContains(t, err, "D's amax is for a D of 8-bit floats")
	_, err = cublas.NewMatmulPlan(e.h, cublas.ColMajorMatrix[float32](nil, m, k), cublas.ColMajorMatrix[float32](nil, k, n), cublas.ColMajorMatrix[float32](nil, m, n), &cublas.MatmulOptions{AmaxD: true})
	assert.ErrorIs(t, err, inv)
	assert.ErrorContains(t, err, "AmaxD")

	// An empty D with AmaxD: no matmul would run to write the amax.
	_, err = cublas.NewMatmulPlan(e.h, cublas.Matrix[E4]{Rows: k, LD: k}.T(), cublas.Matrix[E4]{Rows: k, Cols: n}, cublas.Matrix[E4]{Cols: n, LD: m}, &cublas.MatmulOptions{AmaxD: true})
	assert.ErrorIs(t, err, cublas.ErrShape)
	assert.ErrorContains(t, err, "D is empty")

	da, db, dd := up(t, e.s, make([]E4, m*k)), up(t, e.s, make([]E4, k*n)), up(t, e.s, make([]E4, 2*m*n))
	A, B, D = fp8Views(da, db, dd, m, n, k, false)
	withAmax, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{AmaxD: true})
	require.NoError(t, err)
	defer withAmax.Close()
	plain, err := cublas.NewMatmulPlan(e.h, A, B, D, nil)
	require.NoError(t, err)
	defer plain.Close()
	amax := up(t, e.s, []float32{-1, -1})
	sc := up(t, e.s, []float32{1})
	closed, err := driver.AllocCopy(e.s, []float32{1})
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	type X = cublas.MatmulExtras[E4]
	other := cublas.Matrix[E4]{Buf: dd, Offset: m * n, Rows: m, Cols: n}
	run := func(p *cublas.MatmulPlan[E4, E4, E4], beta float64, c cublas.Matrix[E4], s cublas.MatmulScales) func() error {
		return func() error { return p.RunWith(1, A, B, beta, c, D, X{Scales: s}) }
	}
	refusedRun(t, e, "beta 1", inv, "", "an 8-bit D adds no C", amax, run(withAmax, 1, D, cublas.MatmulScales{AmaxD: amax}))
	refusedRun(t, e, "C apart from D", inv, "", "c D's own view", amax, run(withAmax, 0, other, cublas.MatmulScales{AmaxD: amax}))
	refusedRun(t, e, "no amax", inv, "", "AmaxD nil: true", amax, run(withAmax, 0, D, cublas.MatmulScales{}))
	refusedRun(t, e, "an amax the plan does not write", inv, "", "AmaxD nil: false", amax, run(plain, 0, D, cublas.MatmulScales{AmaxD: amax}))
	refusedRun(t, e, "amax closed", driver.ErrClosed, "", "D amax", amax, run(withAmax, 0, D, cublas.MatmulScales{AmaxD: closed}))
	refusedRun(t, e, "amax on D's scale", cublas.ErrAlias, "D amax", "overlaps D scale", amax, run(withAmax, 0, D, cublas.MatmulScales{D: slice(t, amax, 0, 1), AmaxD: slice(t, amax, 0, 1)}))
	refusedRun(t, e, "amax on A's scale", cublas.ErrAlias, "D amax", "overlaps A scale", amax, run(withAmax, 0, D, cublas.MatmulScales{A: slice(t, amax, 1, 2), AmaxD: slice(t, amax, 1, 2)}))
	// A scale may be D's too: both are read.
	require.NoError(t, withAmax.RunWith(1, A, B, 0, D, D, X{Scales: cublas.MatmulScales{A: sc, B: sc, D: sc, AmaxD: amax}}))
	assert.Equal(t, float32(0), down(t, e.s, amax)[0], "the amax of a zero D")

	// A D scale on a plan whose D is not of 8-bit floats.
	f32 := up(t, e.s, make([]float32, m*n))
	Af, Bf, Df := fp8Views(da, db, f32, m, n, k, false)
	p16, err := cublas.NewMatmulPlan(e.h, Af, Bf, Df, nil)
	require.NoError(t, err)
	defer p16.Close()
	refusedRun(t, e, "D scale of a float32 D", inv, "", "D's scale is for FP8 plans whose D is of 8-bit floats", f32, func() error {
		return p16.RunWith(1, Af, Bf, 0, Df, Df, cublas.MatmulExtras[float32]{Scales: cublas.MatmulScales{D: sc}})
	})
}
