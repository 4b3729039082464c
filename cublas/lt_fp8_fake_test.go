//go:build linux

package cublas_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestMatmulPlanFP8FromFake: FP8 plans for each pair of 8-bit types
// cuBLASLt takes and each type of D, column-major and row-major ("TN"
// either way): D = alpha·a·b·op(A)·op(B) + beta·C with the scale factors
// a and b from device memory, a bias for a 16-bit D; exact against the plain-Go reference (rounded to D's type), and
// without scales (1).
func TestMatmulPlanFP8FromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	fp8FromFake[cublas.Float8E4M3, cublas.Float8E4M3, float32](t, e)
	fp8FromFake[cublas.Float8E4M3, cublas.Float8E5M2, cublas.Half](t, e)
	fp8FromFake[cublas.Float8E5M2, cublas.Float8E4M3, cublas.BFloat16](t, e)
}

func fp8FromFake[TA, TB f8, TC f8out](t *testing.T, e *fenv) {
	const m, n, k = 32, 16, 16
	ah, bh, ch := make([]TA, m*k), make([]TB, k*n), make([]TC, m*n)
	for i := range ah {
		ah[i] = f8Of[TA](float32(i*5%7 - 3))
	}
	for i := range bh {
		bh[i] = f8Of[TB](float32(i*3%5 - 2))
	}
	for i := range ch {
		ch[i] = outOf[TC](float64(i%5 - 2))
	}
	da, db, dc := up(t, e.s, ah), up(t, e.s, bh), up(t, e.s, ch)
	dd := up(t, e.s, make([]TC, m*n))
	sa, sb := up(t, e.s, []float32{0.5}), up(t, e.s, []float32{4})
	_, f32 := any(*new(TC)).(float32)
	for _, rowMajor := range []bool{false, true} {
		A, B, D := fp8Views(da, db, dd, m, n, k, rowMajor)
		C := cublas.Matrix[TC]{Buf: dc, Rows: m, Cols: n, Layout: D.Layout}
		epis := []cublas.Epilogue{cublas.EpilogueNone, cublas.EpilogueReLU}
		if !f32 {
			epis = append(epis, cublas.EpilogueBias)
		}
		for _, epi := range epis {
			for _, scaled := range []bool{true, false} {
				name := fmt.Sprintf("%T×%T→%T rowMajor=%v epilogue %d scaled=%v", *new(TA), *new(TB), *new(TC), rowMajor, epi, scaled)
				p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: epi})
				require.NoError(t, err, name)
				x := cublas.MatmulExtras[TC]{}
				s1, s2 := 1.0, 1.0
				if scaled {
					x.Scales = cublas.MatmulScales{A: sa, B: sb}
					s1, s2 = 0.5, 4
				}
				var bias []float64
				if epi == cublas.EpilogueBias {
					bh := make([]TC, n)
					for i := range bh {
						bh[i] = outOf[TC](float64(i%3 - 1))
						bias = append(bias, float64(i%3-1))
					}
					if !rowMajor {
						bh = make([]TC, m)
						bias = bias[:0]
						for i := range bh {
							bh[i] = outOf[TC](float64(i%3 - 1))
							bias = append(bias, float64(i%3-1))
						}
					}
					x.Bias = up(t, e.s, bh)
				}
				require.NoError(t, p.RunWith(2, A, B, 1, C, D, x), name)
				want := fp8Want(m, n, k,
					func(i, j int) float64 { return opv(ah, A, i, j, f8Val[TA]) },
					func(i, j int) float64 { return opv(bh, B, i, j, f8Val[TB]) },
					func(i, j int) float64 { return outVal(ch[idx(C, i, j)]) }, 2, s1, s2, 1, bias, rowMajor, epi)
				checkFP8D(t, name, down(t, e.s, dd), want, D, m, n)
				require.NoError(t, p.Close())
			}
		}
	}
}

// TestMatmulPlanFP8HeldFromFake: a RunWith queued behind a closed gate
// keeps its scale buffers through their Close (the fakes count
// no use of freed memory), and its result lands.
func TestMatmulPlanFP8HeldFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 16, 16, 16
	ah, bh := make([]cublas.Float8E4M3, m*k), make([]cublas.Float8E4M3, k*n)
	for i := range ah {
		ah[i], bh[i] = cublas.Float8E4M3Of(float32(i%3-1)), cublas.Float8E4M3Of(float32(i%4-2))
	}
	dd := up(t, e.s, make([]float32, m*n))
	A, B, D := fp8Views(up(t, e.s, ah), up(t, e.s, bh), dd, m, n, k, false)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, nil)
	require.NoError(t, err)
	defer p.Close()
	var bufs [2]*driver.Buffer[float32]
	for i, v := range []float32{2, 3} {
		bufs[i], err = driver.AllocCopy(e.s, []float32{v})
		require.NoError(t, err)
	}
	open := gate(t, e.s, 4)
	require.NoError(t, p.RunWith(1, A, B, 0, D, D, cublas.MatmulExtras[float32]{Scales: cublas.MatmulScales{A: bufs[0], B: bufs[1]}}))
	for _, b := range bufs {
		require.NoError(t, b.Close())
	}
	open()
	want := fp8Want(m, n, k,
		func(i, j int) float64 { return opv(ah, A, i, j, f8Val[cublas.Float8E4M3]) },
		func(i, j int) float64 { return opv(bh, B, i, j, f8Val[cublas.Float8E4M3]) }, nil, 1, 2, 3, 0, nil, false, cublas.EpilogueNone)
	got := down(t, e.s, dd)
	for i := range m {
		for j := range n {
			assert.Equal(t, float32(want[i*n+j]), got[idx(D, i, j)], "D[%d,%d]", i, j)
		}
	}
	noBadUses(t)
}

// TestMatmulPlanFP8RefusalsFromFake: what cuBLASLt refuses of FP8 is
// refused before it is called, naming the operand: layouts other than
// "TN", sizes and leading dimensions off 16, unaligned matrices, type
// and compute combinations, epilogues, scales written over D or closed;
// nothing is queued.
func TestMatmulPlanFP8RefusalsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 32, 16, 16
	type E4 = cublas.Float8E4M3
	type E5 = cublas.Float8E5M2
	var a4 *driver.Buffer[E4]
	var b5 *driver.Buffer[E5]
	var f32 *driver.Buffer[float32]
	A, B, D := fp8Views(a4, a4, f32, m, n, k, false)
	planErr := func(name string, err error, kind error, operand, says string) {
		t.Helper()
		assert.ErrorIs(t, err, kind, name)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		assert.ErrorContains(t, err, says, name)
		if operand != "" {
			assert.ErrorContains(t, err, operand+":", name)
		}
	}
	plan := func(o *cublas.MatmulOptions, a cublas.Matrix[E4], b cublas.Matrix[E4], d cublas.Matrix[float32]) error {
		p, err := cublas.NewMatmulPlan(e.h, a, b, d, o)
		assert.Nil(t, p)
		return err
	}
	inv := driver.ErrInvalidArgument
	planErr("NN", plan(nil, cublas.ColMajorMatrix(a4, m, k), B, D), cublas.ErrShape, "A", "\"TN\"")
	planErr("TT", plan(nil, A, cublas.ColMajorMatrix(a4, n, k).T(), D), cublas.ErrShape, "A", "\"TN\"")
	planErr("row-major NN", plan(nil, cublas.RowMajorMatrix(a4, m, k), cublas.RowMajorMatrix(a4, k, n), cublas.RowMajorMatrix(f32, m, n)), cublas.ErrShape, "B", "\"TN\"")
	planErr("M 24", plan(nil, cublas.ColMajorMatrix(a4, k, 24).T(), B, cublas.ColMajorMatrix(f32, 24, n)), cublas.ErrShape, "D", "multiples of 16")
	planErr("K 8", plan(nil, cublas.ColMajorMatrix(a4, 8, m).T(), cublas.ColMajorMatrix(a4, 8, n), D), cublas.ErrShape, "A", "K (the columns of op(A)) a multiple of 16")
	planErr("LDA 24", plan(nil, cublas.Matrix[E4]{Buf: a4, Rows: k, Cols: m, LD: 24}.T(), B, D), cublas.ErrShape, "A", "leading dimension a multiple of 16")
	planErr("LDB 20", plan(nil, A, cublas.Matrix[E4]{Buf: a4, Rows: k, Cols: n, LD: 20}, D), cublas.ErrShape, "B", "leading dimension a multiple of 16")
	planErr("LDD 36", plan(nil, A, B, cublas.Matrix[float32]{Buf: f32, Rows: m, Cols: n, LD: 34}), cublas.ErrShape, "D", "16 bytes' worth")
	planErr("Compute64F", plan(&cublas.MatmulOptions{Compute: cublas.Compute64F}, A, B, D), inv, "", "FP8 computes in Compute32F")
	planErr("ReLUAux", plan(&cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAux}, A, B, D), inv, "", "FP8 plans offer None, ReLU, GELU")
	planErr("bias into float32", plan(&cublas.MatmulOptions{Epilogue: cublas.EpilogueBias}, A, B, D), inv, "", "BFloat16")
	_, err := cublas.NewMatmulPlan(e.h, cublas.ColMajorMatrix(b5, k, m).T(), cublas.ColMajorMatrix(b5, k, n), D, nil)
	planErr("E5M2×E5M2", err, inv, "", "both Float8E5M2")
	_, err = cublas.NewMatmulPlan(e.h, A, cublas.ColMajorMatrix[cublas.Half](nil, k, n), D, nil)
	planErr("E4M3×Half", err, inv, "", "both of 8-bit floats")
	_, err = cublas.NewMatmulPlan(e.h, A, B, cublas.ColMajorMatrix[int8](nil, m, n), nil)
	planErr("an int8 D", err, inv, "", "Half, BFloat16, float32 or of 8-bit floats")
	_, err = cublas.NewMatmulPlan(e.h, cublas.ColMajorMatrix[float32](nil, m, k), cublas.ColMajorMatrix[float32](nil, k, n), cublas.ColMajorMatrix[E4](nil, m, n), nil)
	planErr("an FP8 D of float32 inputs", err, inv, "", "D of 8-bit floats")

	// Runs.
	da := up(t, e.s, make([]E4, m*k+16))
	db := up(t, e.s, make([]E4, k*n))
	dd := up(t, e.s, data[float32](m*n+4, 1))
	A, B, D = fp8Views(da, db, dd, m, n, k, false)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, nil)
	require.NoError(t, err)
	defer p.Close()
	sc := up(t, e.s, []float32{1})
	closed, err := driver.AllocCopy(e.s, []float32{1})
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	type X = cublas.MatmulExtras[float32]
	run := func(a cublas.Matrix[E4], d cublas.Matrix[float32], x X) func() error {
		return func() error { return p.RunWith(1, a, B, 0, d, d, x) }
	}
	off := cublas.Matrix[E4]{Buf: da, Offset: 1, Rows: k, Cols: m}.T()
	refusedRun(t, e, "A unaligned", inv, "", "A: a MatmulPlan needs each matrix to start on a 16-byte boundary", dd, run(off, D, X{}))
	dOff := cublas.Matrix[float32]{Buf: dd, Offset: 1, Rows: m, Cols: n}
	refusedRun(t, e, "D unaligned", inv, "", "D: a MatmulPlan needs each matrix to start on a 16-byte boundary", dd, run(A, dOff, X{}))
	refusedRun(t, e, "A scale closed", driver.ErrClosed, "", "A scale", dd, run(A, D, X{Scales: cublas.MatmulScales{A: closed}}))
	refusedRun(t, e, "B scale inside D", cublas.ErrAlias, "B scale", "overlaps D", dd, run(A, D, X{Scales: cublas.MatmulScales{B: slice(t, dd, 3, 4)}}))
	// A scale may be B's too: both are read.
	assert.NoError(t, p.RunWith(1, A, B, 0, D, D, X{Scales: cublas.MatmulScales{A: sc, B: sc}}))
}
