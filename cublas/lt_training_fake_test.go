//go:build linux

package cublas_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestMatmulPlanTrainingEpiloguesFromFake: every training epilogue, for
// float32 and float64, column-major and row-major D (A and B transposed
// in turn), alpha 2 and beta 1 into a C apart from D: D, the mask or
// GELU's input written, and the bias gradient match the plain-Go
// reference (exactly; 1e-12 relative where GELU's tanh is involved),
// and nothing is written past the gradient or outside the auxiliary
// matrix's elements.
func TestMatmulPlanTrainingEpiloguesFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	trainingFromFake[float32](t, e)
	trainingFromFake[float64](t, e)
}

func trainingFromFake[T cublas.Real](t *testing.T, e *fenv) {
	const m, n, k = 5, 3, 4
	for _, rowMajor := range []bool{false, true} {
		l := cublas.ColMajor
		if rowMajor {
			l = cublas.RowMajor
		}
		ah, bh, ch := data[T](m*k, 1), data[T](k*n, 2), data[T](m*n, 3)
		A := cublas.Matrix[T]{Buf: up(t, e.s, ah), Rows: k, Cols: m, Layout: l, Op: cublas.Trans} // op(A) m×k
		B := cublas.Matrix[T]{Buf: up(t, e.s, bh), Rows: k, Cols: n, Layout: l}
		if rowMajor {
			A = cublas.Matrix[T]{Buf: A.Buf, Rows: m, Cols: k, Layout: l}
			B = cublas.Matrix[T]{Buf: B.Buf, Rows: n, Cols: k, Layout: l, Op: cublas.Trans}
		}
		C := cublas.Matrix[T]{Buf: up(t, e.s, ch), Rows: m, Cols: n, Layout: l}
		dbuf := up(t, e.s, make([]T, m*n))
		D := cublas.Matrix[T]{Buf: dbuf, Rows: m, Cols: n, Layout: l}
		M, N := m, n // D as cuBLASLt sees it
		if rowMajor {
			M, N = n, m
		}
		for _, te := range trainingEpilogues {
			name := fmt.Sprintf("%T %s rowMajor=%v", *new(T), te.name, rowMajor)
			compute := cublas.Compute32F
			if _, f64 := any(*new(T)).(float64); f64 {
				compute = cublas.Compute64F
			}
			p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: te.epi, Compute: compute})
			require.NoError(t, err, name)
			ld := p.AuxLD()
			switch {
			case te.mask:
				assert.Equal(t, 128, ld, name)
			case te.aux:
				assert.Equal(t, (M+7)/8*8, ld, name)
			default:
				assert.Zero(t, ld, name)
			}
			r := ltRef{m: m, n: n, k: k, rowMajor: rowMajor, ld: ld, epi: te.epi, alpha: 2, beta: 1,
				a: func(i, j int) float64 { return real(opAtC(ah, A, i, j)) },
				b: func(i, j int) float64 { return real(opAtC(bh, B, i, j)) },
				c: func(i, j int) float64 { return float64(ch[idx(C, i, j)]) }}
			var x cublas.MatmulExtras[T]
			var biasH, auxH []T
			var maskH []byte
			if te.bias {
				biasH = make([]T, M)
				for i := range biasH {
					biasH[i] = T(i%3) - 0.5 // never an integer: no ReLU input is 0
					r.bias = append(r.bias, float64(biasH[i]))
				}
				x.Bias = up(t, e.s, biasH)
			}
			if te.grad {
				biasH = make([]T, r.gradLen()+2)
				for i := range biasH {
					biasH[i] = 999
				}
				x.Bias = up(t, e.s, biasH)
			}
			if te.mask {
				maskH = make([]byte, ld/8*N)
				for i := range maskH {
					maskH[i] = byte(i*37 + 11)
				}
				r.maskIn = maskH
				x.Mask = up(t, e.s, maskH)
			}
			if te.aux {
				auxH = make([]T, N*ld+2)
				for i := range auxH {
					auxH[i] = T(i%7-3) * 0.5
				}
				r.auxIn = func(i int) float64 { return float64(auxH[i]) }
				x.Aux = up(t, e.s, auxH)
			}
			require.NoError(t, p.RunWith(2, A, B, 1, C, D, x), name)
			want := r.run()
			tol := 0.0
			if te.aux {
				tol = 1e-12
				if _, f32 := any(*new(T)).(float32); f32 {
					tol = 1e-6
				}
			}
			got := down(t, e.s, dbuf)
			for i := range m {
				for j := range n {
					assert.InDelta(t, want.d[i*n+j], float64(got[idx(D, i, j)]), tol*math.Max(1, math.Abs(want.d[i*n+j])), "%s: D[%d,%d]", name, i, j)
				}
			}
			if te.grad {
				g := down(t, e.s, x.Bias)
				for i, w := range want.grad {
					assert.InDelta(t, w, float64(g[i]), tol*math.Max(1, want.gradAbs[i]), "%s: gradient[%d]", name, i)
				}
				assert.Equal(t, []T{999, 999}, g[len(want.grad):], "%s: nothing past the gradient", name)
			}
			if te.mask && !te.back {
				mk := down(t, e.s, x.Mask)
				assert.Len(t, want.bits, m*n, name)
				for pos, bit := range want.bits {
					assert.Equal(t, bit, mk[pos/8]>>(pos%8)&1 == 1, "%s: mask bit %d", name, pos)
				}
			}
			if te.aux && !te.back {
				ax := down(t, e.s, x.Aux)
				for i, v := range ax {
					if w, ok := want.aux[i]; ok {
						assert.InDelta(t, w, float64(v), 0, "%s: GELU's input [%d]", name, i)
					} else {
						assert.Equal(t, auxH[i], v, "%s: aux[%d] is no element of D: unwritten", name, i)
					}
				}
			}
			require.NoError(t, p.Close())
		}
	}
}

// TestMatmulPlanReLURoundTripFromFake: the mask a ReLUAuxBias matmul
// stores is what DReLUBGrad reads: the gradient passes where the forward
// ReLU's input was not negative, and the bias gradient sums it; with an
// AuxLD of 256 (two 128-bit columns' worth) given.
func TestMatmulPlanReLURoundTripFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 6, 4, 3
	ah, bh, gh := data[float32](m*k, 4), data[float32](k*n, 5), data[float32](m*n, 6)
	A, B := cublas.ColMajorMatrix(up(t, e.s, ah), m, k), cublas.ColMajorMatrix(up(t, e.s, bh), k, n)
	y, dg := up(t, e.s, make([]float32, m*n)), up(t, e.s, make([]float32, m*n))
	Y, G := cublas.ColMajorMatrix(y, m, n), cublas.ColMajorMatrix(dg, m, n)
	bias := []float32{0.5, -0.5, 1.5, -1.5, 0.5, -0.5}
	mask := up(t, e.s, make([]byte, 256/8*n))
	fw, err := cublas.NewMatmulPlan(e.h, A, B, Y, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAuxBias, AuxLD: 256})
	require.NoError(t, err)
	defer fw.Close()
	assert.Equal(t, 256, fw.AuxLD())
	require.NoError(t, fw.RunWith(1, A, B, 0, Y, Y, cublas.MatmulExtras[float32]{Bias: up(t, e.s, bias), Mask: mask}))
	// The backward matmul: G = mask ∘ (I·dY) with dY in gh (A: the identity).
	eye := make([]float32, m*m)
	for i := range m {
		eye[i*m+i] = 1
	}
	I, dY := cublas.ColMajorMatrix(up(t, e.s, eye), m, m), cublas.ColMajorMatrix(up(t, e.s, gh), m, n)
	bw, err := cublas.NewMatmulPlan(e.h, I, dY, G, &cublas.MatmulOptions{Epilogue: cublas.EpilogueDReLUBGrad, AuxLD: 256})
	require.NoError(t, err)
	defer bw.Close()
	db := up(t, e.s, make([]float32, m))
	require.NoError(t, bw.RunWith(1, I, dY, 0, G, G, cublas.MatmulExtras[float32]{Bias: db, Mask: mask}))
	pre := gemmWant(ah, bh, m, n, k)
	wantG, wantB := make([]float32, m*n), make([]float32, m)
	for j := range n {
		for i := range m {
			if pre[i+j*m]+bias[i] > 0 {
				wantG[i+j*m] = gh[i+j*m]
				wantB[i] += gh[i+j*m]
			}
		}
	}
	assert.Equal(t, wantG, down(t, e.s, dg))
	assert.Equal(t, wantB, down(t, e.s, db))
}

// TestMatmulPlanTrainingHeldFromFake: a RunWith queued behind a closed
// gate keeps its mask, bias gradient and GELU input through their
// Close: the fakes count no use of freed memory, and the results land.
func TestMatmulPlanTrainingHeldFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 4, 3, 2
	ah, bh := data[float32](m*k, 7), data[float32](k*n, 8)
	A, B := cublas.ColMajorMatrix(up(t, e.s, ah), m, k), cublas.ColMajorMatrix(up(t, e.s, bh), k, n)
	dbuf := up(t, e.s, make([]float32, m*n))
	D := cublas.ColMajorMatrix(dbuf, m, n)
	for _, epi := range []cublas.Epilogue{cublas.EpilogueDReLUBGrad, cublas.EpilogueGELUAux} {
		p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: epi})
		require.NoError(t, err)
		var x cublas.MatmulExtras[float32]
		var owned []func() error
		if epi == cublas.EpilogueDReLUBGrad {
			mask, err := driver.AllocCopy(e.s, make([]byte, 64))
			require.NoError(t, err)
			grad, err := driver.AllocZeroed[float32](e.s, m)
			require.NoError(t, err)
			x.Mask, x.Bias = mask, grad
			owned = append(owned, mask.Close, grad.Close)
		} else {
			aux, err := driver.AllocZeroed[float32](e.s, n*8) // whole columns
			require.NoError(t, err)
			x.Aux = aux
			owned = append(owned, aux.Close)
		}
		open := gate(t, e.s, 3)
		require.NoError(t, p.RunWith(1, A, B, 0, D, D, x))
		for _, c := range owned {
			require.NoError(t, c())
		}
		require.NoError(t, p.Close())
		open()
		require.NoError(t, e.s.Synchronize())
		want := gemmWant(ah, bh, m, n, k)
		got := down(t, e.s, dbuf)
		for i := range want {
			w := 0.0 // DReLU with a zero mask
			if epi == cublas.EpilogueGELUAux {
				w = geluRef(float64(want[i]))
			}
			assert.InDelta(t, w, float64(got[i]), 1e-6*math.Max(1, math.Abs(w)), "epilogue %d: D[%d]", epi, i)
		}
		noBadUses(t)
	}
}

// TestMatmulPlanAutotuneExtrasFromFake: autotune times the training
// epilogues and FP8 plans on scratch operands of their own (a mask, GELU's
// input, a bias gradient), every candidate running (none -1), and the
// plan computes right afterwards (the FP8 one with its A scale, which
// autotune's timings ran without); the fakes count no bad use.
func TestMatmulPlanAutotuneExtrasFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	faketest.CUBLAS(t, "fake_cublaslt_set_algos", 3)
	t.Cleanup(func() { faketest.CUBLAS(t, "fake_cublaslt_set_algos", 1) })
	const m, n, k = 16, 32, 16
	var none *driver.Buffer[float32]
	A, B, D := cublas.ColMajorMatrix(none, m, k), cublas.ColMajorMatrix(none, k, n), cublas.RowMajorMatrix(none, m, n)
	for _, te := range trainingEpilogues {
		p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: te.epi, Autotune: 4})
		require.NoError(t, err, te.name)
		if assert.Len(t, p.Tuned(), 3, te.name) {
			for _, d := range p.Tuned() {
				assert.GreaterOrEqual(t, d, time.Duration(0), te.name)
			}
		}
		require.NoError(t, p.Close())
	}
	ah, bh := make([]cublas.Float8E4M3, m*k), make([]cublas.Float8E4M3, k*n)
	for i := range ah {
		ah[i] = cublas.Float8E4M3Of(float32(i%5 - 2))
	}
	for i := range bh {
		bh[i] = cublas.Float8E4M3Of(float32(i%3 - 1))
	}
	dd := up(t, e.s, make([]float32, m*n))
	fa, fb, fd := fp8Views(up(t, e.s, ah), up(t, e.s, bh), dd, m, n, k, true)
	p, err := cublas.NewMatmulPlan(e.h, fa, fb, fd, &cublas.MatmulOptions{Autotune: 4})
	require.NoError(t, err)
	defer p.Close()
	assert.Len(t, p.Tuned(), 3)
	sa := up(t, e.s, []float32{2})
	require.NoError(t, p.RunWith(1, fa, fb, 0, fd, fd, cublas.MatmulExtras[float32]{Scales: cublas.MatmulScales{A: sa}}))
	want := fp8Want(m, n, k,
		func(i, j int) float64 { return opv(ah, fa, i, j, f8Val[cublas.Float8E4M3]) },
		func(i, j int) float64 { return opv(bh, fb, i, j, f8Val[cublas.Float8E4M3]) }, nil, 1, 2, 1, 0, nil, true, cublas.EpilogueNone)
	got := down(t, e.s, dd)
	for i := range want {
		assert.Equal(t, float32(want[i]), got[i], "D[%d] (row-major)", i)
	}
}
