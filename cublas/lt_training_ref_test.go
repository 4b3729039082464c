package cublas_test

import (
	"math"

	"github.com/purecuda/cuda/cublas"
)

// The plain-Go reference of the training epilogues (shared by the fake's
// tests and the GPU's): a matmul in the caller's terms (D m×n as the
// views give it), with the auxiliary matrix, the bias and the bias
// gradient placed as cuBLASLt places them (its D is the transpose of a
// row-major one).

// ltRef is one matmul: D = epi(alpha·op(A)·op(B) + beta·C).
type ltRef struct {
	m, n, k     int
	rowMajor    bool // D's layout
	ld          int  // the plan's AuxLD
	epi         cublas.Epilogue
	a, b, c     func(i, j int) float64 // op(A), op(B), C (nil with beta 0)
	alpha, beta float64
	bias        []float64         // the forward bias, by cuBLASLt row
	maskIn      []byte            // DReLU's mask
	auxIn       func(int) float64 // DGELU's input, by position in the auxiliary matrix
}

// ltWant is what the matmul leaves: D (m×n, row-major here), the bits of
// the mask and the elements of GELU's input it writes (by position in the
// auxiliary matrix), the bias gradient.
type ltWant struct {
	d       []float64
	bits    map[int]bool
	aux     map[int]float64
	grad    []float64
	gradAbs []float64 // Σ|term| of each gradient element, for tolerances
}

func geluRef(v float64) float64 {
	return 0.5 * v * (1 + math.Tanh(0.7978845608028654*(v+0.044715*v*v*v)))
}

func dgeluRef(a float64) float64 {
	t := math.Tanh(0.7978845608028654 * (a + 0.044715*a*a*a))
	return 0.5*(1+t) + 0.5*a*(1-t*t)*0.7978845608028654*(1+3*0.044715*a*a)
}

// pos is (i, j) of D as cuBLASLt sees it: its row and column.
func (r *ltRef) pos(i, j int) (int, int) {
	if r.rowMajor {
		return j, i
	}
	return i, j
}

// gradLen is the bias gradient's length: cuBLASLt's rows of D, but the
// caller's rows of D for BGradA and columns for BGradB.
func (r *ltRef) gradLen() int {
	switch {
	case r.epi == cublas.EpilogueBGradA:
		return r.m
	case r.epi == cublas.EpilogueBGradB:
		return r.n
	case r.rowMajor:
		return r.n
	}
	return r.m
}

func (r *ltRef) run() ltWant {
	w := ltWant{d: make([]float64, r.m*r.n), bits: map[int]bool{}, aux: map[int]float64{}}
	e := r.epi
	grad := e == cublas.EpilogueDReLUBGrad || e == cublas.EpilogueDGELUBGrad || e == cublas.EpilogueBGradA || e == cublas.EpilogueBGradB
	if grad {
		w.grad, w.gradAbs = make([]float64, r.gradLen()), make([]float64, r.gradLen())
	}
	for i := range r.m {
		for j := range r.n {
			var s float64
			for l := range r.k {
				s += r.a(i, l) * r.b(l, j)
			}
			v := r.alpha * s
			if r.beta != 0 {
				v += r.beta * r.c(i, j)
			}
			row, col := r.pos(i, j)
			x := row + col*r.ld
			switch e {
			case cublas.EpilogueBias, cublas.EpilogueReLUBias, cublas.EpilogueGELUBias, cublas.EpilogueReLUAuxBias, cublas.EpilogueGELUAuxBias:
				v += r.bias[row]
			}
			switch e {
			case cublas.EpilogueReLU, cublas.EpilogueReLUBias, cublas.EpilogueReLUAux, cublas.EpilogueReLUAuxBias:
				if e == cublas.EpilogueReLUAux || e == cublas.EpilogueReLUAuxBias {
					w.bits[x] = v >= 0 // the H200's cuBLASLt sets the bit for a zero input too
				}
				v = math.Max(v, 0)
			case cublas.EpilogueGELU, cublas.EpilogueGELUBias, cublas.EpilogueGELUAux, cublas.EpilogueGELUAuxBias:
				if e == cublas.EpilogueGELUAux || e == cublas.EpilogueGELUAuxBias {
					w.aux[x] = v
				}
				v = geluRef(v)
			case cublas.EpilogueDReLU, cublas.EpilogueDReLUBGrad:
				if r.maskIn[x/8]>>(x%8)&1 == 0 {
					v = 0
				}
			case cublas.EpilogueDGELU, cublas.EpilogueDGELUBGrad:
				v *= dgeluRef(r.auxIn(x))
			}
			w.d[i*r.n+j] = v
			if e == cublas.EpilogueDReLUBGrad || e == cublas.EpilogueDGELUBGrad {
				w.grad[row] += v
				w.gradAbs[row] += math.Abs(v)
			}
		}
	}
	for i := range w.grad {
		if e == cublas.EpilogueBGradA {
			for l := range r.k {
				w.grad[i] += r.a(i, l)
				w.gradAbs[i] += math.Abs(r.a(i, l))
			}
		}
		if e == cublas.EpilogueBGradB {
			for l := range r.k {
				w.grad[i] += r.b(l, i)
				w.gradAbs[i] += math.Abs(r.b(l, i))
			}
		}
	}
	return w
}

// trainingEpilogues are the epilogues of training, with what each takes.
var trainingEpilogues = []struct {
	epi             cublas.Epilogue
	name            string
	bias, grad      bool // a forward bias; a bias gradient
	mask, aux, back bool // a ReLU mask, GELU's input; read (backward)
}{
	{cublas.EpilogueReLUAux, "ReLUAux", false, false, true, false, false},
	{cublas.EpilogueReLUAuxBias, "ReLUAuxBias", true, false, true, false, false},
	{cublas.EpilogueDReLU, "DReLU", false, false, true, false, true},
	{cublas.EpilogueDReLUBGrad, "DReLUBGrad", false, true, true, false, true},
	{cublas.EpilogueGELUAux, "GELUAux", false, false, false, true, false},
	{cublas.EpilogueGELUAuxBias, "GELUAuxBias", true, false, false, true, false},
	{cublas.EpilogueDGELU, "DGELU", false, false, false, true, true},
	{cublas.EpilogueDGELUBGrad, "DGELUBGrad", false, true, false, true, true},
	{cublas.EpilogueBGradA, "BGradA", false, true, false, false, false},
	{cublas.EpilogueBGradB, "BGradB", false, true, false, false, false},
}
