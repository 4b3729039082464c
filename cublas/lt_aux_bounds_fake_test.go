//go:build linux

package cublas_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestMatmulPlanAuxLDBoundFromFake: an AuxLD beyond 2^31-1 is refused when
// the plan is made (2^61 and 2^62 once made the auxiliary matrix's size
// wrap to a few bytes, and the matmul wrote far past a small buffer); the
// largest allowed ones are planned, and a buffer far too small for them
// is refused by Run, nothing queued.
func TestMatmulPlanAuxLDBoundFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 8, 32, 2
	A := cublas.ColMajorMatrix(up(t, e.s, data[float32](m*k, 1)), m, k)
	B := cublas.ColMajorMatrix(up(t, e.s, data[float32](k*n, 2)), k, n)
	dbuf := up(t, e.s, make([]float32, m*n))
	D := cublas.ColMajorMatrix(dbuf, m, n)
	for _, c := range []struct {
		name string
		o    cublas.MatmulOptions
	}{
		{"a mask's AuxLD 2^62", cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAux, AuxLD: 1 << 62}},
		{"a mask's AuxLD 2^61", cublas.MatmulOptions{Epilogue: cublas.EpilogueDReLU, AuxLD: 1 << 61}},
		{"a mask's AuxLD 2^31", cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAuxBias, AuxLD: 1 << 31}},
		{"GELU's AuxLD 2^61", cublas.MatmulOptions{Epilogue: cublas.EpilogueGELUAux, AuxLD: 1 << 61}},
		{"GELU's AuxLD 2^31", cublas.MatmulOptions{Epilogue: cublas.EpilogueDGELU, AuxLD: 1 << 31}},
		{"GELU's AuxLD MaxInt", cublas.MatmulOptions{Epilogue: cublas.EpilogueDGELU, AuxLD: math.MaxInt &^ 7}},
	} {
		p, err := cublas.NewMatmulPlan(e.h, A, B, D, &c.o)
		assert.Nil(t, p, c.name)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, c.name)
		assert.ErrorContains(t, err, "beyond 2^31-1", c.name)
	}

	const maskLD, geluLD = 1<<31 - 128, 1<<31 - 8
	relu, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAux, AuxLD: maskLD})
	require.NoError(t, err)
	defer func() { assert.NoError(t, relu.Close()) }()
	assert.Equal(t, maskLD, relu.AuxLD())
	gelu, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueGELUAux, AuxLD: geluLD})
	require.NoError(t, err)
	defer func() { assert.NoError(t, gelu.Close()) }()
	assert.Equal(t, geluLD, gelu.AuxLD())
	type X = cublas.MatmulExtras[float32]
	mask, aux := up(t, e.s, make([]byte, 64)), up(t, e.s, make([]float32, 64))
	refusedRun(t, e, "a 64-byte mask for AuxLD 2^31-128", cublas.ErrOutOfBounds, "mask", "needs 8589934080 bytes", dbuf,
		func() error { return relu.RunWith(1, A, B, 0, D, D, X{Mask: mask}) })
	refusedRun(t, e, "a 64-element aux for AuxLD 2^31-8", cublas.ErrOutOfBounds, "aux", "aux needs", dbuf,
		func() error { return gelu.RunWith(1, A, B, 0, D, D, X{Aux: aux}) })
}

// TestMatmulPlanAutotuneScratchBoundFromFake: autotuning a plan whose
// scratch auxiliary matrix would pass 2^63 bytes (AuxLD 2^31-8 by 2^31-1
// columns of float32) fails with an error matching driver.ErrOutOfMemory
// before any scratch is allocated, leaving nothing behind.
func TestMatmulPlanAutotuneScratchBoundFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	faketest.CUBLAS(t, "fake_cublaslt_set_algos", 2)
	t.Cleanup(func() { faketest.CUBLAS(t, "fake_cublaslt_set_algos", 1) })
	const n = 1<<31 - 1
	var f *driver.Buffer[float32]
	p, err := cublas.NewMatmulPlan(e.h, cublas.ColMajorMatrix(f, 8, 2), cublas.ColMajorMatrix(f, 2, n), cublas.ColMajorMatrix(f, 8, n),
		&cublas.MatmulOptions{Epilogue: cublas.EpilogueGELUAux, AuxLD: 1<<31 - 8, Autotune: 2})
	assert.Nil(t, p)
	require.ErrorIs(t, err, driver.ErrOutOfMemory)
	assert.ErrorContains(t, err, "autotune's scratch")
	assert.Zero(t, faketest.CUBLAS(t, "fake_cublaslt_live_descs"), "the plan's descriptors are destroyed")
}

// TestMatmulPlanAuxWholeColumnsFromFake: GELU's input is AuxLD·N
// elements, whole columns (cuBLASLt may write a column's last 16-byte
// unit whole, past D's rows): a buffer ending at the last element of D's
// rows, (N-1)·AuxLD + M, is refused, nothing queued; whole columns run.
func TestMatmulPlanAuxWholeColumnsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 4, 3, 2
	A := cublas.ColMajorMatrix(up(t, e.s, data[float32](m*k, 1)), m, k)
	B := cublas.ColMajorMatrix(up(t, e.s, data[float32](k*n, 2)), k, n)
	dbuf := up(t, e.s, make([]float32, m*n))
	D := cublas.ColMajorMatrix(dbuf, m, n)
	type X = cublas.MatmulExtras[float32]
	for _, epi := range []cublas.Epilogue{cublas.EpilogueGELUAux, cublas.EpilogueDGELU} {
		p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: epi})
		require.NoError(t, err)
		ld := p.AuxLD()
		require.Equal(t, 8, ld)
		short := up(t, e.s, make([]float32, (n-1)*ld+m))
		refusedRun(t, e, "GELU's input short of whole columns", cublas.ErrOutOfBounds, "aux", "needs 24 elements", dbuf,
			func() error { return p.RunWith(1, A, B, 0, D, D, X{Aux: short}) })
		whole := up(t, e.s, make([]float32, n*ld))
		assert.NoError(t, p.RunWith(1, A, B, 0, D, D, X{Aux: whole}), "epilogue %d", epi)
		down(t, e.s, dbuf)
		assert.NoError(t, p.Close())
	}
	// A mask is whole columns already: AuxLD/8·N bytes.
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueDReLU})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	refusedRun(t, e, "a mask short of whole columns", cublas.ErrOutOfBounds, "mask", "needs 48 bytes", dbuf,
		func() error { return p.RunWith(1, A, B, 0, D, D, X{Mask: up(t, e.s, make([]byte, 47))}) })
	assert.NoError(t, p.RunWith(1, A, B, 0, D, D, X{Mask: up(t, e.s, make([]byte, 48))}))
}

// TestMatmulPlanAuxEmptyDFromFake: the epilogues with an auxiliary matrix
// refuse an empty D when the plan is made (ErrShape, naming D), whichever
// dimension is 0 and whatever the layout; other epilogues plan it, and
// their Run does nothing.
func TestMatmulPlanAuxEmptyDFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	var f *driver.Buffer[float32]
	for _, l := range []cublas.Layout{cublas.ColMajor, cublas.RowMajor} {
		for _, mn := range [][2]int{{0, 3}, {4, 0}} {
			A := cublas.Matrix[float32]{Buf: f, Rows: mn[0], Cols: 2, Layout: l}
			B := cublas.Matrix[float32]{Buf: f, Rows: 2, Cols: mn[1], Layout: l}
			D := cublas.Matrix[float32]{Buf: f, Rows: mn[0], Cols: mn[1], Layout: l}
			for _, te := range trainingEpilogues {
				name := fmt.Sprintf("%s, D %d×%d, layout %d", te.name, mn[0], mn[1], l)
				for _, ld := range []int{0, 128} {
					p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: te.epi, AuxLD: ld})
					if !te.mask && !te.aux {
						if ld == 0 && assert.NoError(t, err, name) {
							assert.Zero(t, p.AuxLD(), name)
							assert.NoError(t, p.Close())
						}
						continue
					}
					assert.Nil(t, p, name)
					require.ErrorIs(t, err, cublas.ErrShape, name)
					var be *blasview.Error
					if assert.ErrorAs(t, err, &be, name) {
						assert.Equal(t, "D", be.Operand, name)
					}
					assert.ErrorContains(t, err, "D is empty", name)
				}
			}
		}
	}
	// An empty plan without an auxiliary matrix runs, doing nothing.
	A, B := cublas.ColMajorMatrix(up(t, e.s, []float32{1, 2}), 0, 2), cublas.ColMajorMatrix(up(t, e.s, []float32{1, 2, 3, 4, 5, 6}), 2, 3)
	D := cublas.ColMajorMatrix(up(t, e.s, []float32{7}), 0, 3)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueBGradB})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	grad := up(t, e.s, make([]float32, 3))
	assert.NoError(t, p.RunWith(1, A, B, 0, D, D, cublas.MatmulExtras[float32]{Bias: grad}))
	assert.Equal(t, []float32{7}, down(t, e.s, D.Buf))
}
