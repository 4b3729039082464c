//go:build linux

package cublas_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/faketest"
)

// refusedRun checks that f's error matches kind, names the operand (and
// says what in the message), and that nothing was queued or written.
func refusedRun(t *testing.T, e *fenv, name string, kind error, operand, says string, d *driver.Buffer[float32], f func() error) {
	t.Helper()
	before, ops := down(t, e.s, d), opsRun(t)
	err := f()
	require.Error(t, err, name)
	assert.ErrorIs(t, err, kind, name)
	if kind != driver.ErrClosed {
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
	}
	if operand != "" {
		var be *blasview.Error
		if assert.True(t, errors.As(err, &be), "%s: %v", name, err) {
			assert.Equal(t, operand, be.Operand, name)
		}
	}
	assert.Contains(t, err.Error(), says, name)
	assert.Equal(t, before, down(t, e.s, d), "%s: D untouched", name)
	assert.Equal(t, ops, opsRun(t), "%s: nothing queued", name)
}

// slice is b[from:to], closed when t ends.
func slice[T any](t *testing.T, b *driver.Buffer[T], from, to int) *driver.Buffer[T] {
	t.Helper()
	v, err := b.Slice(from, to)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// TestMatmulPlanTrainingRefusalsFromFake: a missing, extra, short,
// misaligned, overlapping or closed auxiliary operand or bias gradient,
// and an AuxLD cuBLASLt would refuse, are refused before cuBLASLt is
// called, naming the operand; nothing is queued.
func TestMatmulPlanTrainingRefusalsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 4, 3, 2
	A := cublas.ColMajorMatrix(up(t, e.s, data[float32](m*k, 1)), m, k)
	B := cublas.ColMajorMatrix(up(t, e.s, data[float32](k*n, 2)), k, n)
	dbuf := up(t, e.s, data[float32](m*n+16, 3))
	D := cublas.ColMajorMatrix(dbuf, m, n)
	plan := func(epi cublas.Epilogue) *cublas.MatmulPlan[float32, float32, float32] {
		p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: epi})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, p.Close()) })
		return p
	}
	relu, drelu, gelu, dgelu, bgradB, none := plan(cublas.EpilogueReLUAux), plan(cublas.EpilogueDReLUBGrad),
		plan(cublas.EpilogueGELUAuxBias), plan(cublas.EpilogueDGELU), plan(cublas.EpilogueBGradB), plan(cublas.EpilogueNone)
	mask := up(t, e.s, make([]byte, 64))      // 128 bits × 3 columns: 48 bytes needed
	aux := up(t, e.s, make([]float32, 40))    // 3 columns of 8: 24 needed
	grad := up(t, e.s, make([]float32, 8))    // 4 or 3 needed
	bias := up(t, e.s, []float32{1, 2, 3, 4}) // GELUAuxBias's bias
	closedMask, err := driver.AllocCopy(e.s, make([]byte, 64))
	require.NoError(t, err)
	require.NoError(t, closedMask.Close())
	type X = cublas.MatmulExtras[float32]
	run := func(p *cublas.MatmulPlan[float32, float32, float32], x X) func() error {
		return func() error { return p.RunWith(1, A, B, 0, D, D, x) }
	}
	inv := driver.ErrInvalidArgument
	refusedRun(t, e, "mask missing", inv, "", "takes a mask", dbuf, run(relu, X{}))
	refusedRun(t, e, "Run on a mask plan", inv, "", "takes a mask", dbuf, func() error { return relu.Run(1, A, B, 0, D, D, nil) })
	refusedRun(t, e, "extra mask", inv, "", "takes a mask", dbuf, run(none, X{Mask: mask}))
	refusedRun(t, e, "aux on a mask plan", inv, "", "auxiliary matrix", dbuf, run(relu, X{Mask: mask, Aux: aux}))
	refusedRun(t, e, "mask short", cublas.ErrOutOfBounds, "mask", "needs 48 bytes", dbuf, run(relu, X{Mask: slice(t, mask, 0, 47)}))
	refusedRun(t, e, "mask misaligned", inv, "", "mask: the address", dbuf, run(relu, X{Mask: slice(t, mask, 8, 56)}))
	refusedRun(t, e, "mask closed", driver.ErrClosed, "", "mask", dbuf, run(relu, X{Mask: closedMask}))
	refusedRun(t, e, "gradient missing", inv, "", "writes a bias gradient", dbuf, run(drelu, X{Mask: mask}))
	refusedRun(t, e, "gradient short", cublas.ErrOutOfBounds, "bias gradient", "", dbuf, run(drelu, X{Mask: mask, Bias: slice(t, grad, 0, 3)}))
	refusedRun(t, e, "BGradB's gradient short (one per column of D)", cublas.ErrOutOfBounds, "bias gradient", "", dbuf, run(bgradB, X{Bias: slice(t, grad, 0, 2)}))
	refusedRun(t, e, "gradient overlapping D", cublas.ErrAlias, "bias gradient", "overlaps D", dbuf, run(drelu, X{Mask: mask, Bias: slice(t, dbuf, m*n-1, m*n+7)}))
	refusedRun(t, e, "aux missing", inv, "", "auxiliary matrix", dbuf, run(dgelu, X{}))
	refusedRun(t, e, "aux short", cublas.ErrOutOfBounds, "aux", "needs 24 elements", dbuf, run(dgelu, X{Aux: slice(t, aux, 0, 23)}))
	refusedRun(t, e, "aux misaligned", inv, "", "aux: the address", dbuf, run(dgelu, X{Aux: slice(t, aux, 1, 30)}))
	refusedRun(t, e, "GELU's input written over D", cublas.ErrAlias, "aux", "overlaps D", dbuf, run(gelu, X{Bias: bias, Aux: slice(t, dbuf, m*n-8, m*n+16)}))
	refusedRun(t, e, "GELU's input written over the bias", cublas.ErrAlias, "aux", "overlaps bias", dbuf, run(gelu, X{Bias: slice(t, aux, 4, 8), Aux: aux}))
	refusedRun(t, e, "GELU's bias missing", inv, "", "takes a bias", dbuf, run(gelu, X{Aux: aux}))
	refusedRun(t, e, "scales on a plan that is not FP8", inv, "", "FP8 plans", dbuf, run(relu, X{Mask: mask, Scales: cublas.MatmulScales{A: aux}}))
	// DGELU reads its input: it may share memory with A, B and C.
	assert.NoError(t, dgelu.RunWith(1, A, B, 0, D, D, X{Aux: aux}), "DGELU reading its input")

	for _, c := range []struct {
		name string
		o    cublas.MatmulOptions
		says string
	}{
		{"AuxLD not a multiple of 128 bits", cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAux, AuxLD: 64}, "multiple of 128"},
		{"AuxLD not a multiple of 8", cublas.MatmulOptions{Epilogue: cublas.EpilogueDGELU, AuxLD: 12}, "multiple of 8"},
		{"AuxLD below D's rows", cublas.MatmulOptions{Epilogue: cublas.EpilogueDGELU, AuxLD: 0 - 8}, "negative AuxLD"},
		{"AuxLD without an auxiliary matrix", cublas.MatmulOptions{Epilogue: cublas.EpilogueBGradA, AuxLD: 8}, "no auxiliary matrix"},
		{"an unknown epilogue", cublas.MatmulOptions{Epilogue: 3}, "unknown epilogue"},
	} {
		p, err := cublas.NewMatmulPlan(e.h, A, B, D, &c.o)
		assert.Nil(t, p, c.name)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, c.name)
		assert.ErrorContains(t, err, c.says, c.name)
	}
	// AuxLD at least the rows: a 200-row D needs 256 bits.
	big := cublas.ColMajorMatrix[float32](nil, 200, 3)
	_, err = cublas.NewMatmulPlan(e.h, cublas.ColMajorMatrix[float32](nil, 200, 2), B, big, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAux, AuxLD: 128})
	assert.ErrorContains(t, err, "at least D's 200 rows")
	p, err := cublas.NewMatmulPlan(e.h, cublas.ColMajorMatrix[float32](nil, 200, 2), B, big, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAux})
	require.NoError(t, err)
	assert.Equal(t, 256, p.AuxLD())
	assert.NoError(t, p.Close())
}
