package main

// cuBLASLt for training: an MLP layer's forward pass that stores the ReLU
// mask or GELU's input, and its backward pass (the activation's gradient,
// the bias gradient, the weight gradient with its bias gradient), in both
// layouts, against plain Go. ReLU is exact; GELU's tolerances are stated
// in the check lines.

import (
	"fmt"
	"math"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// Batch, inputs, hidden units and outputs of the layer.
const tB, tI, tH, tO = 8, 5, 12, 3

const (
	geluTol  = 5e-3 // GELU(z): |got−want| ≤ geluTol·max(1, |z|)
	dgeluTol = 1e-2 // GELU'(z)·g: |got−want| ≤ dgeluTol·max(1, |g|); bias gradient: ·max(1, Σ|g|)
)

// opnd is a stored host matrix and the operation a matmul applies to it.
type opnd struct {
	m  hm[float32]
	op cublas.Op
}

func (o opnd) on(b *driver.Buffer[float32], l cublas.Layout) cublas.Matrix[float32] {
	return withOp(view(b, o.m.r, o.m.c, l), o.op)
}

func product(a, b opnd) hm[float32] { return matmul(a.m.op(a.op), b.m.op(b.op)) }

// trainData is a layer's host data oriented for layout l: row-major holds
// one sample per row (X B×I, dY B×O, hidden B×H), column-major one per
// column (X I×B, dY O×B, hidden H×B); W1 is H×I and W2 O×H either way.
type trainData struct {
	l             cublas.Layout
	X, W1, W2, dY hm[float32]
	b1            []float32
}

func newTrainData(l cublas.Layout, seed int) trainData {
	d := trainData{l: l, W1: fill[float32](tH, tI, seed+1), W2: fill[float32](tO, tH, seed+2)}
	if l == cublas.RowMajor {
		d.X, d.dY = fill[float32](tB, tI, seed), fill[float32](tB, tO, seed+3)
	} else {
		d.X, d.dY = fill[float32](tI, tB, seed), fill[float32](tO, tB, seed+3)
	}
	d.b1 = make([]float32, tH)
	for i := range d.b1 {
		d.b1[i] = float32(i%5 - 2)
	}
	return d
}

// fwd is the forward product's operands: X·W1ᵀ (row-major), W1·X (column-major).
func (d trainData) fwd() (opnd, opnd) {
	if d.l == cublas.RowMajor {
		return opnd{d.X, cublas.NoTrans}, opnd{d.W1, cublas.Trans}
	}
	return opnd{d.W1, cublas.NoTrans}, opnd{d.X, cublas.NoTrans}
}

// bwd is the hidden gradient's operands: dY·W2 (row-major), W2ᵀ·dY (column-major).
func (d trainData) bwd() (opnd, opnd) {
	if d.l == cublas.RowMajor {
		return opnd{d.dY, cublas.NoTrans}, opnd{d.W2, cublas.NoTrans}
	}
	return opnd{d.W2, cublas.Trans}, opnd{d.dY, cublas.NoTrans}
}

// feat is the hidden unit of element (i, j) of the hidden matrix: its
// column for row-major data, its row for column-major.
func (d trainData) feat(i, j int) int {
	if d.l == cublas.RowMajor {
		return j
	}
	return i
}

func layoutName(l cublas.Layout) string {
	if l == cublas.RowMajor {
		return "row-major"
	}
	return "col-major"
}

// auxIdx is where element (i, j) of D lies in the auxiliary matrix.
func auxIdx(l cublas.Layout, i, j, ld int) int {
	if l == cublas.RowMajor {
		return j + i*ld
	}
	return i + j*ld
}

// auxCols is N, the columns of D as cuBLASLt sees it.
func auxCols(l cublas.Layout, r, c int) int {
	if l == cublas.RowMajor {
		return r
	}
	return c
}

// unstored is the r×c matrix that v holds in layout l.
func unstored(v []float32, r, c int, l cublas.Layout) hm[float32] {
	m := hm[float32]{r, c, make([]float32, r*c)}
	for i := range r {
		for j := range c {
			if l == cublas.RowMajor {
				m.v[i*c+j] = v[i*c+j]
			} else {
				m.v[i*c+j] = v[i+j*r]
			}
		}
	}
	return m
}

func gelu(x float64) float64 {
	c := math.Sqrt(2 / math.Pi)
	return 0.5 * x * (1 + math.Tanh(c*(x+0.044715*x*x*x)))
}

func dgelu(x float64) float64 {
	c := math.Sqrt(2 / math.Pi)
	t := math.Tanh(c * (x + 0.044715*x*x*x))
	return 0.5*(1+t) + 0.5*x*(1-t*t)*c*(1+3*0.044715*x*x)
}

// near checks |got−want| ≤ tol·max(1, scale) element by element.
func near(got, want, scale []float32, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= tol*math.Max(1, math.Abs(float64(scale[i])))) {
			return fmt.Errorf("element %d is %v, want %v (tolerance %g·max(1, %v))", i, got[i], want[i], tol, scale[i])
		}
	}
	return nil
}

func nans(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

// trainLayer runs one layer's forward and backward passes with activation
// "relu" or "gelu" in layout l. auxLD 0 takes the plan's smallest. With
// inPlace, the backward pass first runs the epilogue without bias gradient
// at alpha 2, beta 1 on a D that holds C (in place), then the BGrad one.
func trainLayer(e *env, l cublas.Layout, act string, bias bool, auxLD int, inPlace bool) {
	name := fmt.Sprintf("train %s %s", act, layoutName(l))
	d := newTrainData(l, 60+7*int(l))
	a := &arena{e: e}
	defer func() {
		if err := a.close(); err != nil {
			fail(name+" buffers", "%v", err)
		}
	}()
	fa, fb := d.fwd()
	ba, bb := d.bwd()
	r, c := tH, tB
	if l == cublas.RowMajor {
		r, c = tB, tH
	}
	dFA, dFB, dBA, dBB := upload(a, fa.m.stored(l)), upload(a, fb.m.stored(l)), upload(a, ba.m.stored(l)), upload(a, bb.m.stored(l))
	dHid, dGrad, dBias, dDB := upload(a, nans(r*c)), upload(a, nans(r*c)), upload(a, d.b1), upload(a, nans(tH))
	if a.err != nil {
		fail(name, "%v", a.err)
		return
	}
	vHid, vGrad := view(dHid, r, c, l), view(dGrad, r, c, l)
	fwdEpi, dEpi, dbEpi := cublas.EpilogueReLUAux, cublas.EpilogueDReLU, cublas.EpilogueDReLUBGrad
	if act == "gelu" {
		fwdEpi, dEpi, dbEpi = cublas.EpilogueGELUAux, cublas.EpilogueDGELU, cublas.EpilogueDGELUBGrad
	}
	var fwdBias *driver.Buffer[float32]
	if bias {
		fwdEpi, fwdBias = cublas.EpilogueReLUAuxBias, dBias
		if act == "gelu" {
			fwdEpi = cublas.EpilogueGELUAuxBias
		}
	}

	// Forward: hidden = act(product + bias), storing the auxiliary matrix.
	pf, err := cublas.NewMatmulPlan(e.h, fa.on(dFA, l), fb.on(dFB, l), vHid, &cublas.MatmulOptions{Epilogue: fwdEpi, AuxLD: auxLD})
	if err != nil {
		fail(name+": NewMatmulPlan forward", "%v", err)
		return
	}
	defer pf.Close()
	ld := pf.AuxLD()
	if auxLD != 0 && ld != auxLD {
		fail(name+": AuxLD()", "%d, asked for %d", ld, auxLD)
	}
	x := cublas.MatmulExtras[float32]{Bias: fwdBias}
	var auxWords int
	if act == "relu" {
		x.Mask = upload(a, make([]byte, ld*auxCols(l, r, c)/8))
	} else {
		auxWords = ld * auxCols(l, r, c)
		x.Aux = upload(a, nans(auxWords))
	}
	if a.err != nil {
		fail(name, "%v", a.err)
		return
	}
	Z := product(fa, fb)
	for i := range r {
		for j := range c {
			if bias {
				Z.v[i*c+j] += d.b1[d.feat(i, j)]
			}
		}
	}
	what := fmt.Sprintf("%s: forward %d×%d, epilogue %d, AuxLD %d, hidden and %s", name, r, c, fwdEpi, ld, map[string]string{"relu": "mask bits (1 where z >= 0) exact", "gelu": fmt.Sprintf("aux = z exact, GELU(z) within %g", geluTol)}[act])
	if !step(what, func() error {
		if err := pf.RunWith(1, fa.on(dFA, l), fb.on(dFB, l), 0, vHid, vHid, x); err != nil {
			return err
		}
		got, err := dHid.ToHost(e.s)
		if err != nil {
			return err
		}
		H, zs := make([]float32, r*c), make([]float32, r*c)
		for i, z := range Z.v {
			zs[i] = z
			if act == "relu" {
				H[i] = max(0, z)
			} else {
				H[i] = float32(gelu(float64(z)))
			}
		}
		if err := near(got, hm[float32]{r, c, H}.stored(l), hm[float32]{r, c, zs}.stored(l), map[string]float64{"relu": 0, "gelu": geluTol}[act]); err != nil {
			return fmt.Errorf("hidden: %w", err)
		}
		if act == "relu" {
			mask, err := x.Mask.ToHost(e.s)
			if err != nil {
				return err
			}
			for i := range r {
				for j := range c {
					k := auxIdx(l, i, j, ld)
					if bit := mask[k/8]>>(k%8)&1 == 1; bit != (Z.at(i, j) >= 0) {
						return fmt.Errorf("mask bit of (%d, %d) (bit %d) is %v, z = %v", i, j, k, bit, Z.at(i, j))
					}
				}
			}
			return nil
		}
		aux, err := x.Aux.ToHost(e.s)
		if err != nil {
			return err
		}
		for i := range r {
			for j := range c {
				if k := auxIdx(l, i, j, ld); aux[k] != Z.at(i, j) {
					return fmt.Errorf("aux of (%d, %d) (element %d) is %v, want z = %v", i, j, k, aux[k], Z.at(i, j))
				}
			}
		}
		return nil
	}) {
		return
	}

	// Backward: dZ = act'(z)·(alpha·product + beta·C), and its bias gradient.
	P := product(ba, bb)
	deriv := func(i, j int) float32 {
		if act == "relu" {
			if Z.at(i, j) >= 0 { // the mask passes the gradient at zero
				return 1
			}
			return 0
		}
		return float32(dgelu(float64(Z.at(i, j))))
	}
	tol := map[string]float64{"relu": 0, "gelu": dgeluTol}[act]
	back := func(epi cublas.Epilogue, alpha, beta float32, C0 hm[float32]) error {
		pb, err := cublas.NewMatmulPlan(e.h, ba.on(dBA, l), bb.on(dBB, l), vGrad, &cublas.MatmulOptions{Epilogue: epi, AuxLD: auxLD})
		if err != nil {
			return fmt.Errorf("NewMatmulPlan: %w", err)
		}
		defer pb.Close()
		if pb.AuxLD() != ld {
			return fmt.Errorf("backward plan's AuxLD %d, forward's %d", pb.AuxLD(), ld)
		}
		if err := dGrad.CopyFromHost(e.s, C0.stored(l)); err != nil {
			return err
		}
		bx := cublas.MatmulExtras[float32]{Mask: x.Mask, Aux: x.Aux}
		if epi == dbEpi {
			bx.Bias = dDB
		}
		if err := pb.RunWith(float64(alpha), ba.on(dBA, l), bb.on(dBB, l), float64(beta), vGrad, vGrad, bx); err != nil {
			return fmt.Errorf("RunWith: %w", err)
		}
		got, err := dGrad.ToHost(e.s)
		if err != nil {
			return err
		}
		want, scale := make([]float32, r*c), make([]float32, r*c)
		gw, gs := make([]float32, tH), make([]float32, tH)
		for i := range r {
			for j := range c {
				g := alpha*P.at(i, j) + beta*C0.at(i, j)
				want[i*c+j], scale[i*c+j] = deriv(i, j)*g, g
				gw[d.feat(i, j)] += want[i*c+j]
				gs[d.feat(i, j)] += float32(math.Abs(float64(g)))
			}
		}
		if err := near(got, hm[float32]{r, c, want}.stored(l), hm[float32]{r, c, scale}.stored(l), tol); err != nil {
			return fmt.Errorf("dZ: %w", err)
		}
		if epi != dbEpi {
			return nil
		}
		db, err := dDB.ToHost(e.s)
		if err != nil {
			return err
		}
		if err := near(db, gw, gs, tol); err != nil {
			return fmt.Errorf("bias gradient (Σ of D per hidden unit): %w", err)
		}
		return nil
	}
	if inPlace {
		C0 := fill[float32](r, c, 33)
		if !step(fmt.Sprintf("%s: backward epilogue %d, D = act'(z)·(2·%s + 1·C), C = D in place", name, dEpi, map[bool]string{true: "dY·W2", false: "W2ᵀ·dY"}[l == cublas.RowMajor]), func() error {
			return back(dEpi, 2, 1, C0)
		}) {
			return
		}
	}
	if !step(fmt.Sprintf("%s: backward epilogue %d (BGrad), beta 0: dZ and its bias gradient, %d elements", name, dbEpi, tH), func() error {
		return back(dbEpi, 1, 0, hm[float32]{r, c, make([]float32, r*c)})
	}) {
		return
	}
	dzHost, err := dGrad.ToHost(e.s)
	if err != nil {
		fail(name, "%v", err)
		return
	}
	weightGrad(e, name, d, unstored(dzHost, r, c, l), dGrad, act == "gelu")
}

// step prints one check line for f's result and reports success.
func step(what string, f func() error) bool {
	err := f()
	check(what, err)
	return err == nil
}
