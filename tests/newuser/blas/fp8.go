package main

// FP8 matmul plans: Float8E4M3 inputs, float32 or Half results, A's and B's
// scale factors in device memory, and the FP8 rules the docs list.

import (
	"errors"
	"fmt"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// FP8 sizes: multiples of 16, as the docs require.
const fM, fN, fK = 32, 16, 48

type fp8Out interface{ float32 | cublas.Half }

func toOut[T fp8Out](f float32) T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = f
	case *cublas.Half:
		*p = cublas.HalfOf(f)
	}
	return z
}

func fromOut[T fp8Out](x T) float32 {
	switch v := any(x).(type) {
	case float32:
		return v
	case cublas.Half:
		return v.Float32()
	}
	return 0
}

func toE4M3(m hm[float32], l cublas.Layout) []cublas.Float8E4M3 {
	v := m.stored(l)
	out := make([]cublas.Float8E4M3, len(v))
	for i, x := range v {
		out[i] = cublas.Float8E4M3Of(x)
	}
	return out
}

// fp8Operands is the "TN" pair the docs prescribe: row-major A M×K and the
// T() of a row-major N×K B; column-major the T() of a K×M A and a K×N B.
func fp8Operands(l cublas.Layout, seed int) (A, B opnd) {
	if l == cublas.RowMajor {
		return opnd{fill[float32](fM, fK, seed), cublas.NoTrans}, opnd{fill[float32](fN, fK, seed+1), cublas.Trans}
	}
	return opnd{fill[float32](fK, fM, seed), cublas.Trans}, opnd{fill[float32](fK, fN, seed+1), cublas.NoTrans}
}

func fp8View(b *driver.Buffer[cublas.Float8E4M3], o opnd, l cublas.Layout) cublas.Matrix[cublas.Float8E4M3] {
	return withOp(view(b, o.m.r, o.m.c, l), o.op)
}

// fp8Plans checks FP8 plans when the GPU has compute capability 8.9 or
// later, and prints a skip line otherwise.
func fp8Plans(e *env) {
	major, minor := e.ctx.Device().ComputeCapability()
	if major*10+minor < 89 {
		fmt.Printf("skip FP8 MatmulPlans: compute capability %d.%d is below 8.9\n", major, minor)
		return
	}
	for _, l := range []cublas.Layout{cublas.RowMajor, cublas.ColMajor} {
		check(fmt.Sprintf("FP8 E4M3×E4M3 → float32 %s %d×%d×%d, scales a=0.5 b=4, D = 1·a·b·A·B − C in place, exact", layoutName(l), fM, fN, fK), fp8Check[float32](e, l, false))
		check(fmt.Sprintf("FP8 E4M3×E4M3 → Half %s, ReLUBias, Half bias a Slice 16 bytes into its buffer, scales a=0.5 b=4, exact", layoutName(l)), fp8Check[cublas.Half](e, l, true))
	}
	fp8Misuse(e)
}

func fp8Check[T fp8Out](e *env, l cublas.Layout, withBias bool) (err error) {
	A, B := fp8Operands(l, 70+int(l))
	C0 := fill[float32](fM, fN, 72)
	feats := fN // bias per column of a row-major D, per row of a column-major one
	if l == cublas.ColMajor {
		feats = fM
	}
	bias := make([]T, 8+feats)
	for i := range feats {
		bias[8+i] = toOut[T](float32(i%7 - 3))
	}
	c0 := make([]T, fM*fN)
	for i, x := range C0.stored(l) {
		c0[i] = toOut[T](x)
	}
	a := &arena{e: e}
	defer func() { err = errors.Join(err, a.close()) }()
	dA, dB, dD := upload(a, toE4M3(A.m, l)), upload(a, toE4M3(B.m, l)), upload(a, c0)
	sa, sb, dBiasAll := upload(a, []float32{0.5}), upload(a, []float32{4}), upload(a, bias)
	if a.err != nil {
		return a.err
	}
	va, vb, vd := fp8View(dA, A, l), fp8View(dB, B, l), view(dD, fM, fN, l)
	o := &cublas.MatmulOptions{}
	x := cublas.MatmulExtras[T]{Scales: cublas.MatmulScales{A: sa, B: sb}}
	beta := -1.0
	if withBias {
		o.Epilogue, beta = cublas.EpilogueReLUBias, 0
		dBias, err := dBiasAll.Slice(8, 8+feats)
		if err != nil {
			return err
		}
		defer dBias.Close()
		x.Bias = dBias
	}
	p, err := cublas.NewMatmulPlan(e.h, va, vb, vd, o)
	if err != nil {
		return fmt.Errorf("NewMatmulPlan: %w", err)
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	if err := p.RunWith(1, va, vb, beta, vd, vd, x); err != nil {
		return fmt.Errorf("RunWith: %w", err)
	}
	got, err := dD.ToHost(e.s)
	if err != nil {
		return err
	}
	P := product(A, B)
	want := make([]float32, fM*fN)
	for i := range fM {
		for j := range fN {
			v := 2 * P.at(i, j)
			if withBias {
				f := j
				if l == cublas.ColMajor {
					f = i
				}
				v = max(0, v+fromOut(bias[8+f]))
			} else {
				v -= C0.at(i, j)
			}
			want[i*fN+j] = v
		}
	}
	g := make([]float32, len(got))
	for i, v := range got {
		g[i] = fromOut(v)
	}
	if err := compare(g, hm[float32]{fM, fN, want}.stored(l), 0); err != nil {
		return err
	}
	if withBias {
		return nil
	}
	// MatmulScales: "nil: 1". RunWith with no scales at all, beta 0.
	err = p.RunWith(1, va, vb, 0, vd, vd, cublas.MatmulExtras[T]{})
	if err != nil {
		ok(fmt.Sprintf("FP8 %s RunWith with MatmulScales{} (doc: nil means 1) REFUSED: %v", layoutName(l), err))
		return nil
	}
	if got, err = dD.ToHost(e.s); err != nil {
		return err
	}
	for i, v := range got {
		g[i] = fromOut(v)
	}
	if err := compare(g, P.stored(l), 0); err != nil {
		return fmt.Errorf("RunWith with nil scales (1): %w", err)
	}
	ok(fmt.Sprintf("FP8 %s RunWith with MatmulScales{} accepted, D = A·B (nil scale = 1)", layoutName(l)))
	return nil
}

// fp8Misuse: FP8 rules broken, each refused before cuBLASLt.
func fp8Misuse(e *env) {
	type f8 = cublas.Float8E4M3
	inv := driver.ErrInvalidArgument
	rm := cublas.RowMajorMatrix[f8]
	d32 := cublas.RowMajorMatrix[float32](nil, fM, fN)
	_, err := cublas.NewMatmulPlan(e.h, rm(nil, 24, fK), rm(nil, fN, fK).T(), cublas.RowMajorMatrix[float32](nil, 24, fN), nil)
	refused("FP8 misuse: M = 24, not a multiple of 16 (ErrShape)", err, cublas.ErrShape, inv)
	_, err = cublas.NewMatmulPlan(e.h, rm(nil, fM, 40), rm(nil, fN, 40).T(), d32, nil)
	refused("FP8 misuse: K = 40, not a multiple of 16 (ErrShape)", err, cublas.ErrShape, inv)
	_, err = cublas.NewMatmulPlan(e.h, rm(nil, fM, fK), rm(nil, fK, fN), d32, nil)
	refused("FP8 misuse: row-major B not transposed (not TN: ErrShape)", err, cublas.ErrShape, inv)
	_, err = cublas.NewMatmulPlan(e.h, cublas.RowMajorMatrix[cublas.Float8E5M2](nil, fM, fK), cublas.RowMajorMatrix[cublas.Float8E5M2](nil, fN, fK).T(), d32, nil)
	refused("FP8 misuse: E5M2 by E5M2 (driver.ErrInvalidArgument)", err, inv)
	_, err = cublas.NewMatmulPlan(e.h, rm(nil, fM, fK), rm(nil, fN, fK).T(), d32, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUBias})
	refused("FP8 misuse: bias epilogue with a float32 D (driver.ErrInvalidArgument)", err, inv)
	_, err = cublas.NewMatmulPlan(e.h, rm(nil, fM, fK), rm(nil, fN, fK).T(), d32, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAux})
	refused("FP8 misuse: ReLUAux (an epilogue not listed for FP8)", err, inv)

	// A Half bias one element (2 bytes) past a 16-byte boundary.
	a := &arena{e: e}
	defer func() {
		if err := a.close(); err != nil {
			fail("FP8 misuse buffers", "%v", err)
		}
	}()
	A, B := fp8Operands(cublas.RowMajor, 74)
	dA, dB, dD := upload(a, toE4M3(A.m, cublas.RowMajor)), upload(a, toE4M3(B.m, cublas.RowMajor)), upload(a, make([]cublas.Half, fM*fN))
	dBias, sa := upload(a, make([]cublas.Half, 32)), upload(a, []float32{1})
	if a.err != nil {
		fail("FP8 misuse buffers", "%v", a.err)
		return
	}
	va, vb, vd := rm(dA, fM, fK), rm(dB, fN, fK).T(), cublas.RowMajorMatrix(dD, fM, fN)
	p, err := cublas.NewMatmulPlan(e.h, va, vb, vd, &cublas.MatmulOptions{Epilogue: cublas.EpilogueBias})
	if err != nil {
		fail("FP8 misuse: Half bias plan", "%v", err)
		return
	}
	defer p.Close()
	for _, c := range []struct {
		from int
		ok   bool
	}{{1, false}, {4, false}, {8, true}} {
		s, err := dBias.Slice(c.from, c.from+fN)
		if err != nil {
			fail("FP8 misuse: bias Slice", "%v", err)
			return
		}
		err = p.RunWith(1, va, vb, 0, vd, vd, cublas.MatmulExtras[cublas.Half]{Bias: s, Scales: cublas.MatmulScales{A: sa}})
		s.Close()
		if c.ok {
			check(fmt.Sprintf("FP8 Half bias Slice at element %d (16 bytes) accepted", c.from), err)
		} else {
			refused(fmt.Sprintf("FP8 misuse: Half bias Slice at element %d (%d bytes past a 16-byte boundary)", c.from, 2*c.from), err, inv)
		}
	}
	mask := upload(a, make([]byte, 256))
	if a.err == nil {
		refused("FP8 misuse: a Mask given to an FP8 plan with EpilogueBias (extra operand)",
			p.RunWith(1, va, vb, 0, vd, vd, cublas.MatmulExtras[cublas.Half]{Bias: dBias, Mask: mask}), inv)
	}
}
