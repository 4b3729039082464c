package cublas_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

// The training epilogues on the GPU, against the plain-Go reference of
// lt_training_ref_test.go. Inputs are small integers and biases halves,
// so products, sums, biases and the auxiliary GELU input are exact in
// float32 and Half (tolerance 0), and no ReLU input is 0. Tolerances:
// GELU's D 1e-3 relative (float32; 2e-3 for Half: cuBLASLt's GELU is a
// fast tanh approximation), DGELU's D 5e-3·max(1, |product|) per element
// and its bias gradient the sum of those; a Half bias gradient (sums past
// Half's exact integers) 1e-3 relative. Which types and layouts cuBLASLt
// offers an epilogue for is its choice: a combination it refuses
// (ErrNotSupported from NewMatmulPlan) is logged, and each epilogue must
// run for at least one.

// trainGPU is one type and layout of the test: its operands, the
// product z (m×n, row-major here) and where D lives.
type trainGPU[T f8out] struct {
	t        *testing.T
	g        *gpu
	m, n, k  int
	rowMajor bool
	A, B, D  cublas.Matrix[T]
	z        []float64 // op(A)·op(B)
	bias     []float64 // by cuBLASLt row
	biasBuf  *driver.Buffer[T]
	name     string
	ran      map[cublas.Epilogue]int
}

func newTrainGPU[T f8out](t *testing.T, g *gpu, rowMajor bool, ran map[cublas.Epilogue]int) *trainGPU[T] {
	const m, n, k = 64, 48, 32
	tg := &trainGPU[T]{t: t, g: g, m: m, n: n, k: k, rowMajor: rowMajor, ran: ran,
		name: fmt.Sprintf("%T rowMajor=%v", *new(T), rowMajor)}
	ah, bh := make([]T, m*k), make([]T, k*n)
	for i := range ah {
		ah[i] = outOf[T](float64(i*7%5 - 2))
	}
	for i := range bh {
		bh[i] = outOf[T](float64(i*3%5 - 2))
	}
	da, db := upload(t, g, ah), upload(t, g, bh)
	dd := upload(t, g, make([]T, m*n))
	if rowMajor {
		tg.A, tg.B, tg.D = cublas.RowMajorMatrix(da, m, k), cublas.RowMajorMatrix(db, k, n), cublas.RowMajorMatrix(dd, m, n)
	} else { // B transposed: cuBLASLt's "NT", as training's weight gradients run
		tg.A, tg.B, tg.D = cublas.ColMajorMatrix(da, m, k), cublas.ColMajorMatrix(db, n, k).T(), cublas.ColMajorMatrix(dd, m, n)
	}
	tg.z = make([]float64, m*n)
	for i := range m {
		for j := range n {
			for l := range k {
				tg.z[i*n+j] += opv(ah, tg.A, i, l, outVal[T]) * opv(bh, tg.B, l, j, outVal[T])
			}
		}
	}
	M := m
	if rowMajor {
		M = n
	}
	bias := make([]T, M)
	for i := range bias {
		bias[i] = outOf[T](float64(i%4) - 1.5)
		tg.bias = append(tg.bias, float64(i%4)-1.5)
	}
	tg.biasBuf = upload(t, g, bias)
	return tg
}

// pre is the forward activations' input at (i, j): the product and the bias.
func (tg *trainGPU[T]) pre(i, j int) float64 {
	row := i
	if tg.rowMajor {
		row = j
	}
	return tg.z[i*tg.n+j] + tg.bias[row]
}

// plan makes the plan for epi, or logs cuBLASLt's refusal and returns nil.
func (tg *trainGPU[T]) plan(epi cublas.Epilogue) *cublas.MatmulPlan[T, T, T] {
	p, err := cublas.NewMatmulPlan(tg.g.h, tg.A, tg.B, tg.D, &cublas.MatmulOptions{Epilogue: epi})
	if errors.Is(err, cublas.ErrNotSupported) {
		tg.t.Logf("%s: cuBLASLt offers no algorithm for epilogue %d: %v", tg.name, epi, err)
		return nil
	}
	require.NoError(tg.t, err, "%s epilogue %d", tg.name, epi)
	tg.t.Cleanup(func() { assert.NoError(tg.t, p.Close()) })
	return p
}

// check compares D with want(i, j) within tol(i, j).
func (tg *trainGPU[T]) check(what string, want, tol func(i, j int) float64) {
	got := download(tg.t, tg.g, tg.D.Buf)
	bad := 0
	for i := range tg.m {
		for j := range tg.n {
			w, gv := want(i, j), outVal(got[idx(tg.D, i, j)])
			if !(math.Abs(gv-w) <= tol(i, j)) && bad < 3 {
				tg.t.Errorf("%s %s: D[%d,%d] = %v, want %v (tolerance %v)", tg.name, what, i, j, gv, w, tol(i, j))
				bad++
			}
		}
	}
}

// checkVec compares a vector with want within tol.
func (tg *trainGPU[T]) checkVec(what string, got []T, want, tol []float64) {
	for i := range want {
		if gv := outVal(got[i]); !(math.Abs(gv-want[i]) <= tol[i]) {
			tg.t.Errorf("%s %s[%d] = %v, want %v (tolerance %v)", tg.name, what, i, gv, want[i], tol[i])
			return
		}
	}
}

func (tg *trainGPU[T]) half() bool { _, h := any(*new(T)).(cublas.Half); return h }

func (tg *trainGPU[T]) run() {
	t, g, m, n := tg.t, tg.g, tg.m, tg.n
	zero := func(int, int) float64 { return 0 }
	rel := func(r float64, want func(i, j int) float64) func(i, j int) float64 {
		return func(i, j int) float64 { return r * math.Max(1, math.Abs(want(i, j))) }
	}
	M, N := m, n
	if tg.rowMajor {
		M, N = n, m
	}
	gradTol := 0.0
	if tg.half() {
		gradTol = 1e-3
	}
	// ReLU forward, storing the mask; then its gradients, reading it.
	if p := tg.plan(cublas.EpilogueReLUAuxBias); p != nil {
		mask := upload(t, g, make([]byte, p.AuxLD()/8*N))
		require.NoError(t, p.RunWith(1, tg.A, tg.B, 0, tg.D, tg.D, cublas.MatmulExtras[T]{Bias: tg.biasBuf, Mask: mask}))
		tg.check("ReLUAuxBias", func(i, j int) float64 { return math.Max(tg.pre(i, j), 0) }, zero)
		tg.ran[cublas.EpilogueReLUAuxBias]++
		for _, epi := range []cublas.Epilogue{cublas.EpilogueDReLU, cublas.EpilogueDReLUBGrad} {
			q := tg.plan(epi)
			if q == nil {
				continue
			}
			var grad *driver.Buffer[T]
			if epi == cublas.EpilogueDReLUBGrad {
				grad = upload(t, g, make([]T, M))
			}
			require.NoError(t, q.RunWith(1, tg.A, tg.B, 0, tg.D, tg.D, cublas.MatmulExtras[T]{Bias: grad, Mask: mask}))
			want := func(i, j int) float64 {
				if tg.pre(i, j) > 0 {
					return tg.z[i*n+j]
				}
				return 0
			}
			tg.check(fmt.Sprintf("epilogue %d", epi), want, zero)
			if grad != nil {
				w, tol := make([]float64, M), make([]float64, M)
				for i := range m {
					for j := range n {
						row := i
						if tg.rowMajor {
							row = j
						}
						w[row] += want(i, j)
					}
				}
				for i := range tol {
					tol[i] = gradTol * math.Abs(w[i])
				}
				tg.checkVec("DReLUBGrad's bias gradient", download(t, g, grad), w, tol)
			}
			tg.ran[epi]++
		}
	}
	if p := tg.plan(cublas.EpilogueReLUAux); p != nil {
		mask := upload(t, g, make([]byte, p.AuxLD()/8*N))
		require.NoError(t, p.RunWith(1, tg.A, tg.B, 0, tg.D, tg.D, cublas.MatmulExtras[T]{Mask: mask}))
		tg.check("ReLUAux", func(i, j int) float64 { return math.Max(tg.z[i*n+j], 0) }, zero)
		tg.ran[cublas.EpilogueReLUAux]++
	}
	// GELU forward, storing its input; then its gradients, reading it.
	geluTol := 1e-3
	if tg.half() {
		geluTol = 2e-3
	}
	for _, epi := range []cublas.Epilogue{cublas.EpilogueGELUAux, cublas.EpilogueGELUAuxBias} {
		p := tg.plan(epi)
		if p == nil {
			continue
		}
		ld := p.AuxLD()
		aux := upload(t, g, make([]T, N*ld)) // whole columns
		x := cublas.MatmulExtras[T]{Aux: aux}
		in := func(i, j int) float64 { return tg.z[i*n+j] }
		if epi == cublas.EpilogueGELUAuxBias {
			x.Bias, in = tg.biasBuf, tg.pre
		}
		require.NoError(t, p.RunWith(1, tg.A, tg.B, 0, tg.D, tg.D, x))
		want := func(i, j int) float64 { return geluRef(in(i, j)) }
		tg.check(fmt.Sprintf("epilogue %d", epi), want, rel(geluTol, want))
		got := download(t, g, aux)
		for i := range m {
			for j := range n {
				row, col := i, j
				if tg.rowMajor {
					row, col = j, i
				}
				if gv := outVal(got[row+col*ld]); gv != in(i, j) {
					t.Fatalf("%s epilogue %d: GELU's input at (%d, %d) of the auxiliary matrix = %v, want %v", tg.name, epi, row, col, gv, in(i, j))
				}
			}
		}
		tg.ran[epi]++
		if epi != cublas.EpilogueGELUAuxBias {
			continue
		}
		for _, back := range []cublas.Epilogue{cublas.EpilogueDGELU, cublas.EpilogueDGELUBGrad} {
			q := tg.plan(back)
			if q == nil {
				continue
			}
			require.Equal(t, ld, q.AuxLD())
			var grad *driver.Buffer[T]
			if back == cublas.EpilogueDGELUBGrad {
				grad = upload(t, g, make([]T, M))
			}
			require.NoError(t, q.RunWith(1, tg.A, tg.B, 0, tg.D, tg.D, cublas.MatmulExtras[T]{Bias: grad, Aux: aux}))
			want := func(i, j int) float64 { return tg.z[i*n+j] * dgeluRef(tg.pre(i, j)) }
			tol := func(i, j int) float64 { return 5e-3 * math.Max(1, math.Abs(tg.z[i*n+j])) }
			tg.check(fmt.Sprintf("epilogue %d", back), want, tol)
			if grad != nil {
				w, wt := make([]float64, M), make([]float64, M)
				for i := range m {
					for j := range n {
						row := i
						if tg.rowMajor {
							row = j
						}
						w[row] += want(i, j)
						wt[row] += tol(i, j)
					}
				}
				for i := range wt {
					wt[i] += gradTol * math.Abs(w[i])
				}
				tg.checkVec("DGELUBGrad's bias gradient", download(t, g, grad), w, wt)
			}
			tg.ran[back]++
		}
	}
	// Bias gradients of A's rows and B's columns.
	for _, epi := range []cublas.Epilogue{cublas.EpilogueBGradA, cublas.EpilogueBGradB} {
		p := tg.plan(epi)
		if p == nil {
			continue
		}
		ah, bh := download(t, g, tg.A.Buf), download(t, g, tg.B.Buf)
		r := ltRef{m: m, n: n, k: tg.k, rowMajor: tg.rowMajor, epi: epi, alpha: 1}
		r.a = func(i, l int) float64 { return opv(ah, tg.A, i, l, outVal[T]) }
		r.b = func(l, j int) float64 { return opv(bh, tg.B, l, j, outVal[T]) }
		w := r.run()
		grad := upload(t, g, make([]T, len(w.grad)))
		require.NoError(t, p.RunWith(1, tg.A, tg.B, 0, tg.D, tg.D, cublas.MatmulExtras[T]{Bias: grad}))
		tg.check(fmt.Sprintf("epilogue %d", epi), func(i, j int) float64 { return tg.z[i*n+j] }, zero)
		tol := make([]float64, len(w.grad))
		for i := range tol {
			tol[i] = gradTol * math.Abs(w.grad[i])
		}
		tg.checkVec(fmt.Sprintf("epilogue %d's bias gradient", epi), download(t, g, grad), w.grad, tol)
		tg.ran[epi]++
	}
}

// TestGPUMatmulPlanTrainingEpilogues: every training epilogue, float32
// and Half, column-major ("NT") and row-major D: forward D, GELU's
// stored input, the backward epilogues reading what the forward ones
// stored (the gradient passes where the ReLU's input was positive; DGELU
// scales by GELU's derivative there) and the bias gradients, against the
// plain-Go reference (tolerances above); each epilogue runs for at least
// one type and layout.
func TestGPUMatmulPlanTrainingEpilogues(t *testing.T) {
	g := newGPU(t, nil)
	ran := map[cublas.Epilogue]int{}
	for _, rowMajor := range []bool{false, true} {
		newTrainGPU[float32](t, g, rowMajor, ran).run()
		newTrainGPU[cublas.Half](t, g, rowMajor, ran).run()
	}
	for _, te := range trainingEpilogues {
		assert.NotZero(t, ran[te.epi], "%s ran for no type or layout (cuBLASLt refused each: see the log)", te.name)
	}
	t.Logf("runs per epilogue (of 4 types and layouts): %v", ran)
}

// TestGPUMatmulPlanReLUMaskLayout: the mask ReLUAux and ReLUAuxBias
// store is as EpilogueReLUAux documents: bit i + j·AuxLD (least
// significant first in each byte) is 1 exactly where the ReLU's input at
// (i, j) of a column-major D was zero or positive. Without the bias the
// integer products are often exactly zero, so the zero case is seen.
func TestGPUMatmulPlanReLUMaskLayout(t *testing.T) {
	g := newGPU(t, nil)
	tg := newTrainGPU[float32](t, g, false, map[cublas.Epilogue]int{})
	for _, withBias := range []bool{true, false} {
		epi, in := cublas.EpilogueReLUAux, func(i, j int) float64 { return tg.z[i*tg.n+j] }
		x := cublas.MatmulExtras[float32]{}
		if withBias {
			epi, in, x.Bias = cublas.EpilogueReLUAuxBias, tg.pre, tg.biasBuf
		}
		p := tg.plan(epi)
		require.NotNil(t, p, "float32 %v", epi)
		ld := p.AuxLD()
		x.Mask = upload(t, g, make([]byte, ld/8*tg.n))
		require.NoError(t, p.RunWith(1, tg.A, tg.B, 0, tg.D, tg.D, x))
		got := download(t, g, x.Mask)
		bad, zeros := 0, 0
		for i := range tg.m {
			for j := range tg.n {
				if in(i, j) == 0 {
					zeros++
				}
				x := i + j*ld
				if bit := got[x/8]>>(x%8)&1 == 1; bit != (in(i, j) >= 0) && bad < 3 {
					t.Errorf("%v: mask bit %d (D[%d,%d]) = %v, want %v (input %v)", epi, x, i, j, bit, !bit, in(i, j))
					bad++
				}
			}
		}
		if !withBias {
			require.NotZero(t, zeros, "the data gives no zero product: the zero case is not tested")
		}
	}
}

// TestGPUMatmulPlanTrainingCaptured: a DReLUBGrad RunWith captured into a
// graph (CaptureRelaxed) keeps its mask through Close and replays
// exactly: D and the bias gradient as the stream call gives them.
func TestGPUMatmulPlanTrainingCaptured(t *testing.T) {
	g := newGPU(t, nil)
	tg := newTrainGPU[float32](t, g, false, map[cublas.Epilogue]int{})
	fw, bw := tg.plan(cublas.EpilogueReLUAuxBias), tg.plan(cublas.EpilogueDReLUBGrad)
	require.NotNil(t, fw, "float32 ReLUAuxBias")
	require.NotNil(t, bw, "float32 DReLUBGrad")
	mask, err := driver.AllocZeroed[byte](g.s, fw.AuxLD()/8*tg.n)
	require.NoError(t, err)
	grad := upload(t, g, make([]float32, tg.m))
	require.NoError(t, fw.RunWith(1, tg.A, tg.B, 0, tg.D, tg.D, cublas.MatmulExtras[float32]{Bias: tg.biasBuf, Mask: mask}))
	gr, err := graph.Capture(g.s, graph.CaptureRelaxed, func(*driver.Stream) error {
		return bw.RunWith(1, tg.A, tg.B, 0, tg.D, tg.D, cublas.MatmulExtras[float32]{Bias: grad, Mask: mask})
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, gr.Close()) }()
	x, err := gr.Instantiate()
	require.NoError(t, err)
	defer func() { assert.NoError(t, x.Close()) }()
	require.NoError(t, mask.Close())
	want, wgrad := make([]float32, tg.m*tg.n), make([]float32, tg.m)
	for i := range tg.m {
		for j := range tg.n {
			if tg.pre(i, j) > 0 {
				want[idx(tg.D, i, j)] = float32(tg.z[i*tg.n+j])
				wgrad[i] += float32(tg.z[i*tg.n+j])
			}
		}
	}
	for range 3 {
		require.NoError(t, tg.D.Buf.Memset32(g.s, 0x7fc00000))
		require.NoError(t, grad.Memset32(g.s, 0x7fc00000))
		require.NoError(t, x.Launch(g.s))
		assert.Equal(t, want, download(t, g, tg.D.Buf), "D")
		assert.Equal(t, wgrad, download(t, g, grad), "the bias gradient")
	}
}

// backwardBeta runs DReLU and DGELU with alpha 1, beta 1 and a C apart
// from D (small integers, in D's layout), reading a mask and GELU's input
// made here (every bit pattern; halves in [-1.5, 1.5]), against ltRef: D
// = mask ? z + C : 0 exactly, and (z + C)·GELU'(aux) within
// 5e-3·max(1, |z + C|); C is only read.
func (tg *trainGPU[T]) backwardBeta() {
	t, g, m, n := tg.t, tg.g, tg.m, tg.n
	N := n // D's columns as cuBLASLt sees them
	if tg.rowMajor {
		N = m
	}
	ch := make([]T, m*n)
	for i := range ch {
		ch[i] = outOf[T](float64(i*5%7 - 3))
	}
	C := tg.D
	C.Buf = upload(t, g, ch)
	ah, bh := download(t, g, tg.A.Buf), download(t, g, tg.B.Buf)
	for _, epi := range []cublas.Epilogue{cublas.EpilogueDReLU, cublas.EpilogueDGELU} {
		p := tg.plan(epi)
		if p == nil {
			continue
		}
		ld := p.AuxLD()
		r := ltRef{m: m, n: n, k: tg.k, rowMajor: tg.rowMajor, ld: ld, epi: epi, alpha: 1, beta: 1,
			a: func(i, l int) float64 { return opv(ah, tg.A, i, l, outVal[T]) },
			b: func(l, j int) float64 { return opv(bh, tg.B, l, j, outVal[T]) },
			c: func(i, j int) float64 { return outVal(ch[idx(C, i, j)]) }}
		var x cublas.MatmulExtras[T]
		tol := func(int, int) float64 { return 0 }
		if epi == cublas.EpilogueDReLU {
			mask := make([]byte, ld/8*N)
			for i := range mask {
				mask[i] = byte(i*37 + 11)
			}
			r.maskIn, x.Mask = mask, upload(t, g, mask)
		} else {
			aux := make([]T, N*ld)
			for i := range aux {
				aux[i] = outOf[T](float64(i%7-3) * 0.5)
			}
			r.auxIn = func(i int) float64 { return outVal(aux[i]) }
			x.Aux = upload(t, g, aux)
			tol = func(i, j int) float64 { return 5e-3 * math.Max(1, math.Abs(tg.z[i*n+j]+r.c(i, j))) }
		}
		require.NoError(t, tg.D.Buf.Memset8(g.s, 0xff), "%s epilogue %d", tg.name, epi) // NaN: D must be written whole
		require.NoError(t, p.RunWith(1, tg.A, tg.B, 1, C, tg.D, x), "%s epilogue %d", tg.name, epi)
		w := r.run()
		tg.check(fmt.Sprintf("epilogue %d, beta 1, C apart", epi), func(i, j int) float64 { return w.d[i*n+j] }, tol)
		assert.Equal(t, ch, download(t, g, C.Buf), "%s epilogue %d: C is only read", tg.name, epi)
		tg.ran[epi]++
	}
}

// TestGPUMatmulPlanTrainingBackwardBeta: DReLU and DGELU with beta 1 and
// a C apart from D (see backwardBeta), float32 and Half, column-major
// ("NT") and row-major D; each runs for at least one type and layout.
func TestGPUMatmulPlanTrainingBackwardBeta(t *testing.T) {
	g := newGPU(t, nil)
	ran := map[cublas.Epilogue]int{}
	for _, rowMajor := range []bool{false, true} {
		newTrainGPU[float32](t, g, rowMajor, ran).backwardBeta()
		newTrainGPU[cublas.Half](t, g, rowMajor, ran).backwardBeta()
	}
	assert.NotZero(t, ran[cublas.EpilogueDReLU], "DReLU ran for no type or layout (cuBLASLt refused each: see the log)")
	assert.NotZero(t, ran[cublas.EpilogueDGELU], "DGELU ran for no type or layout (cuBLASLt refused each: see the log)")
	t.Logf("runs per epilogue (of 4 types and layouts): %v", ran)
}
