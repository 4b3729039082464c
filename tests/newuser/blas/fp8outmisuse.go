package main

// FP8 outputs broken: the plans and Runs the docs say are refused, each
// with the sentinels they name, and nothing queued by a refused Run.

import (
	"errors"
	"fmt"
	"math"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// planErr is NewMatmulPlan's error (a plan made anyway is closed).
func planErr[TA, TB, TD cublas.Element](e *env, a cublas.Matrix[TA], b cublas.Matrix[TB], d cublas.Matrix[TD], o *cublas.MatmulOptions) error {
	p, err := cublas.NewMatmulPlan(e.h, a, b, d, o)
	if p != nil {
		p.Close()
	}
	return err
}

func f8OutMisuse(e *env) {
	type (
		e4 = cublas.Float8E4M3
		e5 = cublas.Float8E5M2
	)
	const name = "FP8-out misuse"
	inv := driver.ErrInvalidArgument
	r4, r5 := cublas.RowMajorMatrix[e4], cublas.RowMajorMatrix[e5]
	A4, B4, D4 := r4(nil, fM, fK), r4(nil, fN, fK).T(), r4(nil, fM, fN)
	A5, B5, D5 := r5(nil, fM, fK), r5(nil, fN, fK).T(), r5(nil, fM, fN)
	amax := &cublas.MatmulOptions{AmaxD: true}

	// NewMatmulPlan.
	refused(name+": E4M3×E4M3 → E5M2 D (E5M2 only where A or B is E5M2)", planErr(e, A4, B4, D5, nil), inv)
	refused(name+": E5M2×E5M2 → E5M2 D", planErr(e, A5, B5, D5, nil), inv)
	refused(name+": E5M2×E5M2 → E4M3 D", planErr(e, A5, B5, D4, nil), inv)
	for _, epi := range []cublas.Epilogue{cublas.EpilogueBias, cublas.EpilogueReLUBias, cublas.EpilogueGELUBias, cublas.EpilogueReLUAux, cublas.EpilogueBGradB} {
		refused(fmt.Sprintf("%s: E4M3 D with Epilogue%v (an 8-bit D takes no bias; not a listed epilogue)", name, epi),
			planErr(e, A4, B4, D4, &cublas.MatmulOptions{Epilogue: epi}), inv)
	}
	refused(name+": AmaxD with a Half D (FP8 inputs, not an 8-bit D)", planErr(e, A4, B4, cublas.RowMajorMatrix[cublas.Half](nil, fM, fN), amax), inv)
	refused(name+": AmaxD on a float32 plan", planErr(e, cublas.RowMajorMatrix[float32](nil, fM, fK), cublas.RowMajorMatrix[float32](nil, fK, fN), cublas.RowMajorMatrix[float32](nil, fM, fN), amax), inv)
	refused(name+": AmaxD with M = 0 (empty D: ErrShape)", planErr(e, r4(nil, 0, fK), B4, r4(nil, 0, fN), amax), cublas.ErrShape, inv)
	refused(name+": AmaxD with N = 0 (empty D: ErrShape)", planErr(e, A4, r4(nil, 0, fK).T(), r4(nil, fM, 0), amax), cublas.ErrShape, inv)
	refused(name+": E4M3 D, row-major B not transposed (not TN: ErrShape)", planErr(e, A4, r4(nil, fK, fN), D4, amax), cublas.ErrShape, inv)
	refused(name+": E4M3 D, N = 24 (not a multiple of 16: ErrShape)", planErr(e, A4, r4(nil, 24, fK).T(), r4(nil, fM, 24), amax), cublas.ErrShape, inv)
	wide := D4
	wide.LD = 24
	refusedAlso(name+": E4M3 D with LD 24 (24 bytes, not 16 bytes' worth)", planErr(e, A4, B4, wide, amax), cublas.ErrShape, inv)
	refused(name+": E4M3 D with Compute16F (Compute32F only)", planErr(e, A4, B4, D4, &cublas.MatmulOptions{Compute: cublas.Compute16F, AmaxD: true}), inv)

	// Run and RunWith on real buffers.
	a := &arena{e: e}
	defer func() {
		if err := a.close(); err != nil {
			fail(name+" buffers", "%v", err)
		}
	}()
	nan := to8[e4](float32(math.NaN()))
	sentinel := make([]e4, fM*fN+16)
	for i := range sentinel {
		sentinel[i] = nan
	}
	opA, opB := f8Data(2, 2, 60)
	A, B := f8TN(opA, opB, cublas.RowMajor)
	dA, dB, dD, dC := upload(a, conv8[e4](A.m.v)), upload(a, conv8[e4](B.m.v)), upload(a, sentinel), upload(a, make([]e4, fM*fN))
	sa, sd, am, bias := upload(a, []float32{1}), upload(a, []float32{1}), upload(a, []float32{-1}), upload(a, make([]e4, 64))
	dH := upload(a, make([]cublas.Half, fM*fN))
	closedAmax, closedD := upload(a, []float32{-1}), upload(a, []float32{1})
	if a.err != nil {
		fail(name, "%v", a.err)
		return
	}
	if err := errors.Join(closedAmax.Close(), closedD.Close()); err != nil {
		fail(name, "%v", err)
		return
	}
	va, vb, vd, vc := r4(dA, fM, fK), r4(dB, fN, fK).T(), r4(dD, fM, fN), r4(dC, fM, fN)
	p, err := cublas.NewMatmulPlan(e.h, va, vb, vd, amax)
	if err != nil {
		fail(name+": AmaxD plan", "%v", err)
		return
	}
	defer p.Close()
	full := cublas.MatmulScales{A: sa, D: sd, AmaxD: am}
	with := func(beta float64, c, d cublas.Matrix[e4], s cublas.MatmulScales, b *driver.Buffer[e4]) error {
		return p.RunWith(1, va, vb, beta, c, d, cublas.MatmulExtras[e4]{Scales: s, Bias: b})
	}
	refused(name+": RunWith beta 1, c D's view (8-bit D: beta 0)", with(1, vd, vd, full, nil), inv)
	refused(name+": RunWith beta 0, c another buffer's view (8-bit D: c must be D)", with(0, vc, vd, full, nil), inv)
	refused(name+": RunWith beta 1, c another buffer's view", with(1, vc, vd, full, nil), inv)
	refused(name+": RunWith without MatmulScales.AmaxD on an AmaxD plan (missing amax)", with(0, vd, vd, cublas.MatmulScales{A: sa, D: sd}, nil), inv)
	refused(name+": Run (no amax possible) on an AmaxD plan", p.Run(1, va, vb, 0, vd, vd, nil), inv)
	bv, err := bias.Slice(0, fN)
	if err == nil {
		defer bv.Close()
		refused(name+": a Bias given to an 8-bit-D plan (extra)", with(0, vd, vd, full, bv), inv)
	} else {
		fail(name+": bias Slice", "%v", err)
	}
	refused(name+": AmaxD the same buffer as Scales.D (ErrAlias)", with(0, vd, vd, cublas.MatmulScales{A: sa, D: sd, AmaxD: sd}, nil), cublas.ErrAlias, inv)
	refused(name+": AmaxD the same buffer as Scales.A (ErrAlias)", with(0, vd, vd, cublas.MatmulScales{A: sa, D: sd, AmaxD: sa}, nil), cublas.ErrAlias, inv)
	refused(name+": AmaxD a closed buffer (driver.ErrClosed)", with(0, vd, vd, cublas.MatmulScales{A: sa, D: sd, AmaxD: closedAmax}, nil), driver.ErrClosed)
	refused(name+": Scales.D a closed buffer (driver.ErrClosed)", with(0, vd, vd, cublas.MatmulScales{A: sa, D: closedD, AmaxD: am}, nil), driver.ErrClosed)
	off := vd
	off.Offset = 8
	refused(name+": D a view at Offset 8 (8 bytes past a 16-byte boundary)", with(0, off, off, full, nil), inv)
	check(name+": D and the amax unchanged after the refused Runs (nothing queued)", func() error {
		got, err := dD.ToHost(e.s)
		if err != nil {
			return err
		}
		for i, v := range got {
			if v != nan {
				return fmt.Errorf("element %d of D is %#x, was NaN (%#x)", i, uint8(v), uint8(nan))
			}
		}
		m, err := am.ToHost(e.s)
		if err != nil {
			return err
		}
		return compare(m, []float32{-1}, 0)
	}())
	off.Offset = 16
	check(name+": D a view at Offset 16 (16 bytes) accepted", with(0, off, off, full, nil))

	// A plan without AmaxD, and an FP8 plan with a Half D.
	q, err := cublas.NewMatmulPlan(e.h, va, vb, vd, nil)
	if err != nil {
		fail(name+": plan without AmaxD", "%v", err)
		return
	}
	defer q.Close()
	refused(name+": MatmulScales.AmaxD given to a plan made without AmaxD", q.RunWith(1, va, vb, 0, vd, vd, cublas.MatmulExtras[e4]{Scales: cublas.MatmulScales{AmaxD: am}}), inv)
	if bv != nil {
		refused(name+": Run's bias given to an 8-bit-D plan without AmaxD", q.Run(1, va, vb, 0, vd, vd, bv), inv)
	}
	vh := cublas.RowMajorMatrix(dH, fM, fN)
	h, err := cublas.NewMatmulPlan(e.h, va, vb, vh, nil)
	if err != nil {
		fail(name+": FP8 plan with a Half D", "%v", err)
		return
	}
	defer h.Close()
	refused(name+": Scales.D given to an FP8 plan with a Half D (only for an 8-bit D)", h.RunWith(1, va, vb, 0, vh, vh, cublas.MatmulExtras[cublas.Half]{Scales: cublas.MatmulScales{D: sd}}), inv)
	refused(name+": Scales.AmaxD given to an FP8 plan with a Half D", h.RunWith(1, va, vb, 0, vh, vh, cublas.MatmulExtras[cublas.Half]{Scales: cublas.MatmulScales{AmaxD: am}}), inv)
}
