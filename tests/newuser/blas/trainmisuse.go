package main

// Training epilogues misused: each must be refused with the documented
// sentinel, and nothing queued.

import (
	"errors"
	"fmt"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// refusedAlso is refused, noting in the line whether err also matches
// extra, a sentinel the docs neither promise nor exclude.
func refusedAlso(what string, err, extra error, sentinels ...error) {
	if err != nil {
		what += fmt.Sprintf(" [also %q: %v]", extra, errors.Is(err, extra))
	}
	refused(what, err, sentinels...)
}

func trainMisuse(e *env) {
	const name = "train misuse"
	inv := driver.ErrInvalidArgument
	a := &arena{e: e}
	defer func() {
		if err := a.close(); err != nil {
			fail(name+" buffers", "%v", err)
		}
	}()
	d := newTrainData(cublas.RowMajor, 100)
	sentinel := make([]float32, tB*tH)
	for i := range sentinel {
		sentinel[i] = -5
	}
	dX, dW1, dHid, db1 := upload(a, d.X.v), upload(a, d.W1.v), upload(a, sentinel), upload(a, d.b1)
	bigX := upload(a, append(append([]float32(nil), d.X.v...), 0, 0, 0, 0))
	dY, dW2 := upload(a, d.dY.v), upload(a, d.W2.v)
	both := upload(a, make([]float32, tB*tH+tH)) // a D and a bias gradient overlapping it
	scale := upload(a, []float32{1})
	if a.err != nil {
		fail(name, "%v", a.err)
		return
	}
	rm := cublas.RowMajorMatrix[float32]
	vX, vW1t, vHid := rm(dX, tB, tI), rm(dW1, tH, tI).T(), rm(dHid, tB, tH)
	p, err := cublas.NewMatmulPlan(e.h, vX, vW1t, vHid, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAuxBias})
	if err != nil {
		fail(name+": plan", "%v", err)
		return
	}
	defer p.Close()
	need := p.AuxLD() * tB / 8 // AuxLD bits by N = 8 columns (the rows of the row-major D)
	mask, short, wide := upload(a, make([]byte, need)), upload(a, make([]byte, need-1)), upload(a, make([]byte, need+16))
	dAux := upload(a, make([]float32, 1024))
	if a.err != nil {
		fail(name, "%v", a.err)
		return
	}
	run := func(x cublas.MatmulExtras[float32]) error { return p.RunWith(1, vX, vW1t, 0, vHid, vHid, x) }

	refusedAlso(fmt.Sprintf("%s: ReLU mask of %d bytes, one short of AuxLD·N/8", name, need-1), run(cublas.MatmulExtras[float32]{Bias: db1, Mask: short}), cublas.ErrOutOfBounds, inv)
	if off, err := wide.Slice(8, need+8); err != nil {
		fail(name+": mask Slice", "%v", err)
	} else {
		refused(name+": ReLU mask a Slice at byte 8 (not a multiple of 16)", run(cublas.MatmulExtras[float32]{Bias: db1, Mask: off}), inv)
		off.Close()
	}
	refused(name+": ReLUAuxBias with no Mask (missing extra)", run(cublas.MatmulExtras[float32]{Bias: db1}), inv)
	refused(name+": ReLUAuxBias with no Bias (missing extra)", run(cublas.MatmulExtras[float32]{Mask: mask}), inv)
	refused(name+": Run (no mask possible) on a ReLUAuxBias plan", p.Run(1, vX, vW1t, 0, vHid, vHid, db1), inv)
	refused(name+": an Aux given to a ReLU plan (extra)", run(cublas.MatmulExtras[float32]{Bias: db1, Mask: mask, Aux: dAux}), inv)
	refused(name+": Scales given to a float32 plan (extra)", run(cublas.MatmulExtras[float32]{Bias: db1, Mask: mask, Scales: cublas.MatmulScales{A: scale}}), inv)
	off1 := cublas.Matrix[float32]{Buf: bigX, Offset: 1, Rows: tB, Cols: tI, Layout: cublas.RowMajor}
	refused(name+": A a view at Offset 1 (4 bytes past a 16-byte boundary)", p.RunWith(1, off1, vW1t, 0, vHid, vHid, cublas.MatmulExtras[float32]{Bias: db1, Mask: mask}), inv)
	check(name+": hidden unchanged after the refused Runs (nothing queued)", func() error {
		got, err := dHid.ToHost(e.s)
		if err != nil {
			return err
		}
		return compare(got, sentinel, 0)
	}())
	off4 := off1
	off4.Offset = 4
	check(name+": A a view at Offset 4 (16 bytes) accepted", p.RunWith(1, off4, vW1t, 0, vHid, vHid, cublas.MatmulExtras[float32]{Bias: db1, Mask: mask}))

	// Leading dimensions of the auxiliary matrix.
	plan := func(epi cublas.Epilogue, auxLD int, dv cublas.Matrix[float32]) (*cublas.MatmulPlan[float32, float32, float32], error) {
		return cublas.NewMatmulPlan(e.h, vX, vW1t, dv, &cublas.MatmulOptions{Epilogue: epi, AuxLD: auxLD})
	}
	for _, c := range []struct {
		what string
		epi  cublas.Epilogue
		ld   int
	}{
		{"ReLU AuxLD 1<<31 (past 2^31−1)", cublas.EpilogueReLUAux, 1 << 31},
		{"ReLU AuxLD 1<<40", cublas.EpilogueReLUAux, 1 << 40},
		{"ReLU AuxLD 100 (not a multiple of 128)", cublas.EpilogueReLUAux, 100},
		{"ReLU AuxLD −128", cublas.EpilogueReLUAux, -128},
		{"GELU AuxLD 12 (not a multiple of 8)", cublas.EpilogueGELUAux, 12},
		{"GELU AuxLD 8 (below D's 12 columns)", cublas.EpilogueGELUAux, 8},
	} {
		q, err := plan(c.epi, c.ld, vHid)
		if q != nil {
			q.Close()
		}
		refusedAlso(name+": NewMatmulPlan "+c.what, err, cublas.ErrShape, inv)
	}
	_, err = cublas.NewMatmulPlan(e.h, rm(nil, 0, tI), vW1t, rm(nil, 0, tH), &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAux})
	refused(name+": ReLUAux with an empty D (0 rows: ErrShape)", err, cublas.ErrShape, inv)
	if q, err := plan(cublas.EpilogueBias, 256, vHid); err != nil {
		ok(fmt.Sprintf("%s: AuxLD 256 on EpilogueBias (no auxiliary matrix; docs say only for those) refused: %v", name, err))
	} else {
		ok(fmt.Sprintf("%s: AuxLD 256 on EpilogueBias (no auxiliary matrix) ACCEPTED, AuxLD() = %d", name, q.AuxLD()))
		q.Close()
	}
	if q, err := plan(cublas.EpilogueReLUAuxBias, 1024, vHid); err != nil {
		fail(name+": AuxLD 1024 plan", "%v", err)
	} else {
		refusedAlso(fmt.Sprintf("%s: AuxLD 1024 plan given a mask sized for AuxLD %d (%d bytes, needs %d)", name, p.AuxLD(), need, 1024*tB/8),
			q.RunWith(1, vX, vW1t, 0, vHid, vHid, cublas.MatmulExtras[float32]{Bias: db1, Mask: mask}), cublas.ErrOutOfBounds, inv)
		q.Close()
	}

	// Backward: a bias gradient missing, or overlapping D.
	vY, vW2 := rm(dY, tB, tO), rm(dW2, tO, tH)
	q, err := cublas.NewMatmulPlan(e.h, vY, vW2, vHid, &cublas.MatmulOptions{Epilogue: cublas.EpilogueDReLUBGrad})
	if err != nil {
		fail(name+": DReLUBGrad plan", "%v", err)
		return
	}
	defer q.Close()
	refused(name+": DReLUBGrad with no bias-gradient buffer (missing extra)", q.RunWith(1, vY, vW2, 0, vHid, vHid, cublas.MatmulExtras[float32]{Mask: mask}), inv)
	refused(name+": DReLUBGrad with no Mask (missing extra)", q.RunWith(1, vY, vW2, 0, vHid, vHid, cublas.MatmulExtras[float32]{Bias: db1}), inv)
	g, err := both.Slice(tB*tH-4, tB*tH-4+tH)
	if err != nil {
		fail(name+": Slice", "%v", err)
		return
	}
	defer g.Close()
	vBoth := rm(both, tB, tH)
	refused(name+": DReLUBGrad bias gradient overlapping D's last 4 elements (ErrAlias)", q.RunWith(1, vY, vW2, 0, vBoth, vBoth, cublas.MatmulExtras[float32]{Bias: g, Mask: mask}), cublas.ErrAlias, inv)
	refused(name+": DReLUBGrad with C apart from D but overlapping it (ErrAlias)",
		q.RunWith(1, vY, vW2, 0, cublas.Matrix[float32]{Buf: both, Offset: 4, Rows: tB, Cols: tH, Layout: cublas.RowMajor}, vBoth, cublas.MatmulExtras[float32]{Bias: db1, Mask: mask}), cublas.ErrAlias, inv)
}
