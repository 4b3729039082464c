package main

// FP8 outputs: MatmulPlans whose D is of 8-bit floats (Float8E4M3,
// Float8E5M2), scaled by D's scale, rounded saturating, with D's amax
// (MatmulOptions.AmaxD, MatmulScales.AmaxD); and the rules the docs give
// for them. op(A) has three nonzeros per row, so |A·B| ≤ 3·ra·rb stays
// small, and every scale is a power of two: each expected 8-bit value is
// exact (checked here in plain Go before it is compared), and the
// tolerance is 0 except for GELU, whose line states its own.

import (
	"errors"
	"fmt"
	"math"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

type f8 interface {
	cublas.Float8E4M3 | cublas.Float8E5M2
}

func to8[T f8](x float32) T {
	var z T
	switch p := any(&z).(type) {
	case *cublas.Float8E4M3:
		*p = cublas.Float8E4M3Of(x)
	case *cublas.Float8E5M2:
		*p = cublas.Float8E5M2Of(x)
	}
	return z
}

func from8[T f8](x T) float32 {
	switch v := any(x).(type) {
	case cublas.Float8E4M3:
		return v.Float32()
	case cublas.Float8E5M2:
		return v.Float32()
	}
	return 0
}

// f8Max is T's largest finite value, its mantissa bits and its smallest
// positive (subnormal) value.
func f8Max[T f8]() (top float32, mant int, sub float64) {
	var z T
	if _, ok := any(z).(cublas.Float8E4M3); ok {
		return 448, 3, 0x1p-9
	}
	return 57344, 2, 0x1p-16
}

func f8Name[T f8]() string {
	var z T
	if _, ok := any(z).(cublas.Float8E4M3); ok {
		return "E4M3"
	}
	return "E5M2"
}

// f8Data is op(A), M×K with nonzeros (−ra…ra) only where k ≡ i mod 16,
// and op(B), K×N with values −rb…rb.
func f8Data(ra, rb, seed int) (opA, opB hm[float32]) {
	opA, opB = hm[float32]{fM, fK, make([]float32, fM*fK)}, hm[float32]{fK, fN, make([]float32, fK*fN)}
	for i := range fM {
		for k := range fK {
			if k%16 == i%16 {
				opA.v[i*fK+k] = float32((i*7+k*3+seed)%(2*ra+1) - ra)
			}
		}
	}
	for k := range fK {
		for j := range fN {
			opB.v[k*fN+j] = float32((k*3+j*7+k*j+seed*2)%(2*rb+1) - rb)
		}
	}
	return opA, opB
}

// f8TN is the "TN" pair the docs prescribe for op(A) and op(B) in layout l.
func f8TN(opA, opB hm[float32], l cublas.Layout) (A, B opnd) {
	if l == cublas.RowMajor {
		return opnd{opA, cublas.NoTrans}, opnd{opB.op(cublas.Trans), cublas.Trans}
	}
	return opnd{opA.op(cublas.Trans), cublas.Trans}, opnd{opB, cublas.NoTrans}
}

func conv8[T f8](v []float32) []T {
	out := make([]T, len(v))
	for i, x := range v {
		out[i] = to8[T](x)
	}
	return out
}

func on8[T f8](b *driver.Buffer[T], o opnd, l cublas.Layout) cublas.Matrix[T] {
	return withOp(view(b, o.m.r, o.m.c, l), o.op)
}

// f8Scales are one Run's alpha and scale factors; a scale of 0 is left nil
// (a scale of 1, says MatmulScales).
type f8Scales struct{ alpha, a, b, d float32 }

func (s f8Scales) String() string {
	f := func(x float32) string {
		if x == 0 {
			return "nil"
		}
		return fmt.Sprint(x)
	}
	return fmt.Sprintf("alpha=%g a=%s b=%s d=%s", s.alpha, f(s.a), f(s.b), f(s.d))
}

func orOne(x float32) float32 {
	if x == 0 {
		return 1
	}
	return x
}

// want8 is D = q(d·epi(alpha·a·b·P)) (q rounds to T, saturating) as an
// M×N matrix, and the amax, max|epi(…)| before d. For ReLU and None every
// value must be exact in T (an error otherwise: the test's data is wrong).
func want8[T f8](P hm[float32], s f8Scales, epi cublas.Epilogue) (hm[float32], float32, error) {
	top, _, _ := f8Max[T]()
	w, amax := hm[float32]{P.r, P.c, make([]float32, len(P.v))}, float32(0)
	k := s.alpha * orOne(s.a) * orOne(s.b)
	for i, p := range P.v {
		r := k * p
		switch epi {
		case cublas.EpilogueReLU:
			r = max(0, r)
		case cublas.EpilogueGELU:
			r = float32(gelu(float64(r)))
		}
		amax = max(amax, float32(math.Abs(float64(r))))
		x := min(top, max(-top, orOne(s.d)*r))
		if epi != cublas.EpilogueGELU && from8(to8[T](x)) != x {
			return w, 0, fmt.Errorf("test data: %v is not exact in %s", x, f8Name[T]())
		}
		w.v[i] = x
	}
	return w, amax, nil
}

// f8Plan is one FP8-output plan to check.
type f8Plan struct {
	lIn, lD cublas.Layout // the layout of A and B, and of D
	ra, rb  int           // the ranges of op(A) and op(B)
	epi     cublas.Epilogue
	ldD     int  // D's leading dimension (0: packed); the padding must stay untouched
	noAmax  bool // a plan without MatmulOptions.AmaxD
	viaRun  bool // Run instead of RunWith (scales all nil)
	amaxAt  int  // the amax a Slice at this element of a 4-float buffer
	sat     bool // each Run's D must saturate some elements, not all
}

// saturated is an error unless some but not all of w are ±T's largest.
func saturated[T f8](w hm[float32]) error {
	top, _, _ := f8Max[T]()
	n := 0
	for _, x := range w.v {
		if x == top || x == -top {
			n++
		}
	}
	if n == 0 || n == len(w.v) {
		return fmt.Errorf("test data: %d of %d elements saturate, want some", n, len(w.v))
	}
	return nil
}

// f8OutRuns makes one plan and runs it once per element of runs (the same
// plan and buffers, other scales each time), checking D (reset to NaN
// before each Run) and the amax (reset to −1) after each.
func f8OutRuns[TA, TB, TD f8](e *env, c f8Plan, runs ...f8Scales) (err error) {
	opA, opB := f8Data(c.ra, c.rb, 11+int(c.lIn)+3*int(c.lD))
	A, B := f8TN(opA, opB, c.lIn)
	P := matmul(opA, opB)
	rows, ld := fM, c.ldD // D is stored as rows lines of ld elements
	if c.lD == cublas.ColMajor {
		rows = fN
	}
	if ld == 0 {
		ld = len(P.v) / rows
	}
	nan := to8[TD](float32(math.NaN()))
	sentinel := make([]TD, rows*ld)
	for i := range sentinel {
		sentinel[i] = nan
	}
	a := &arena{e: e}
	defer func() { err = errors.Join(err, a.close()) }()
	dA, dB, dD := upload(a, conv8[TA](A.m.stored(c.lIn))), upload(a, conv8[TB](B.m.stored(c.lIn))), upload(a, sentinel)
	sa, sb, sd, amaxAll := upload(a, []float32{1}), upload(a, []float32{1}), upload(a, []float32{1}), upload(a, make([]float32, 4))
	if a.err != nil {
		return a.err
	}
	amax, err := amaxAll.Slice(c.amaxAt, 4)
	if err != nil {
		return err
	}
	defer amax.Close()
	va, vb := on8(dA, A, c.lIn), on8(dB, B, c.lIn)
	vd := view(dD, fM, fN, c.lD)
	vd.LD = c.ldD
	p, err := cublas.NewMatmulPlan(e.h, va, vb, vd, &cublas.MatmulOptions{Epilogue: c.epi, AmaxD: !c.noAmax})
	if err != nil {
		return fmt.Errorf("NewMatmulPlan: %w", err)
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	for n, s := range runs {
		want, wantAmax, err := want8[TD](P, s, c.epi)
		if err == nil && c.sat {
			err = saturated[TD](want)
		}
		if err != nil {
			return err
		}
		x := cublas.MatmulExtras[TD]{}
		for _, f := range []struct {
			v   float32
			buf *driver.Buffer[float32]
			to  **driver.Buffer[float32]
		}{{s.a, sa, &x.Scales.A}, {s.b, sb, &x.Scales.B}, {s.d, sd, &x.Scales.D}} {
			if f.v != 0 {
				*f.to = f.buf
				if err := f.buf.CopyFromHost(e.s, []float32{f.v}); err != nil {
					return err
				}
			}
		}
		if !c.noAmax {
			x.Scales.AmaxD = amax
		}
		if err := errors.Join(dD.CopyFromHost(e.s, sentinel), amaxAll.CopyFromHost(e.s, []float32{-1, -1, -1, -1})); err != nil {
			return err
		}
		if c.viaRun {
			err = p.Run(float64(s.alpha), va, vb, 0, vd, vd, nil)
		} else {
			err = p.RunWith(float64(s.alpha), va, vb, 0, vd, vd, x)
		}
		if err != nil {
			return fmt.Errorf("run %d (%v): %w", n+1, s, err)
		}
		got, err := dD.ToHost(e.s)
		if err != nil {
			return err
		}
		g, pad := make([]float32, 0, fM*fN), 0
		for r := range rows {
			for q := range ld {
				if q < fM*fN/rows {
					g = append(g, from8(got[r*ld+q]))
				} else if got[r*ld+q] != nan {
					pad++
				}
			}
		}
		if pad > 0 {
			return fmt.Errorf("run %d (%v): %d padding elements past D's rows written", n+1, s, pad)
		}
		if c.epi == cublas.EpilogueGELU {
			err = compareStep[TD](g, want.stored(c.lD))
		} else {
			err = compare(g, want.stored(c.lD), 0)
		}
		if err != nil {
			return fmt.Errorf("run %d (%v): D: %w", n+1, s, err)
		}
		am, err := amaxAll.ToHost(e.s)
		if err != nil {
			return err
		}
		for i, v := range am {
			w, tol := float32(-1), 0.0
			if i == c.amaxAt && !c.noAmax {
				w = wantAmax
				if c.epi == cublas.EpilogueGELU {
					tol = geluTol
				}
			}
			if err := compare([]float32{v}, []float32{w}, tol); err != nil {
				return fmt.Errorf("run %d (%v): amax buffer element %d: %w", n+1, s, i, err)
			}
		}
	}
	return nil
}

// compareStep checks that each got is within one step of T (2^(e−mantissa
// bits) for |want| in [2^e, 2^(e+1))) of want.
func compareStep[T f8](got, want []float32) error {
	_, mant, sub := f8Max[T]()
	for i, w := range want {
		_, ex := math.Frexp(float64(w))
		step := math.Max(sub, math.Ldexp(1, ex-1-mant))
		if !(math.Abs(float64(got[i])-float64(w)) <= step) {
			return fmt.Errorf("element %d is %v, want %v within one %s step (%g)", i, got[i], w, f8Name[T](), step)
		}
	}
	return nil
}

// fp8OutPlans checks plans with an 8-bit D when the GPU has compute
// capability 8.9 or later.
func fp8OutPlans(e *env) {
	major, minor := e.ctx.Device().ComputeCapability()
	if major*10+minor < 89 {
		fmt.Printf("skip FP8-output MatmulPlans: compute capability %d.%d is below 8.9\n", major, minor)
		return
	}
	type (
		e4 = cublas.Float8E4M3
		e5 = cublas.Float8E5M2
	)
	rm, cm := cublas.RowMajor, cublas.ColMajor
	none, relu := cublas.EpilogueNone, cublas.EpilogueReLU
	reuse := []f8Scales{{1, 0.5, 4, 0.25}, {1, 0, 0, 0}, {2, 0.5, 1, 4}, {1, 2, 0.5, 0.125}}
	for _, l := range []cublas.Layout{rm, cm} {
		check(fmt.Sprintf("FP8 out E4M3×E4M3 → E4M3 %s %d×%d×%d, AmaxD, one plan Run 4 times with other scales (%v; %v; %v; %v), D and amax exact",
			layoutName(l), fM, fN, fK, reuse[0], reuse[1], reuse[2], reuse[3]),
			f8OutRuns[e4, e4, e4](e, f8Plan{lIn: l, lD: l, ra: 2, rb: 2, epi: none}, reuse...))
	}
	check("FP8 out E4M3 saturation: d=128 sends some |D| past 448, D = ±448 there, exact elsewhere, amax before d (row-major)",
		f8OutRuns[e4, e4, e4](e, f8Plan{lIn: rm, lD: rm, ra: 2, rb: 2, epi: none, sat: true}, f8Scales{1, 0, 0, 128}, f8Scales{-1, 0.5, 2, 128}))
	check("FP8 out E4M3 ReLU col-major, a=0.5 b=2 d=8: negatives 0, amax after ReLU, exact",
		f8OutRuns[e4, e4, e4](e, f8Plan{lIn: cm, lD: cm, ra: 2, rb: 2, epi: relu}, f8Scales{1, 0.5, 2, 8}))
	check("FP8 out E4M3 ReLU row-major, alpha=−1 (ReLU keeps the other sign), d=4, exact",
		f8OutRuns[e4, e4, e4](e, f8Plan{lIn: rm, lD: rm, ra: 2, rb: 2, epi: relu}, f8Scales{-1, 0, 0, 4}))
	check("FP8 out E4M3×E5M2 → E5M2 row-major, d=2 exact",
		f8OutRuns[e4, e5, e5](e, f8Plan{lIn: rm, lD: rm, ra: 1, rb: 2, epi: none}, f8Scales{1, 0, 0, 2}))
	check("FP8 out E4M3×E5M2 → E5M2 row-major saturation: d=16384 sends some |D| past 57344, D = ±57344 there (docs: saturates, not Inf), amax before d",
		f8OutRuns[e4, e5, e5](e, f8Plan{lIn: rm, lD: rm, ra: 1, rb: 2, epi: none, sat: true}, f8Scales{1, 0.5, 2, 16384}, f8Scales{-1, 0, 0, 16384}))
	check("FP8 out E5M2×E4M3 → E5M2 col-major, a=4 b=0.25 d=0.5, exact",
		f8OutRuns[e5, e4, e5](e, f8Plan{lIn: cm, lD: cm, ra: 1, rb: 2, epi: none}, f8Scales{1, 4, 0.25, 0.5}))
	check("FP8 out E4M3×E5M2 → E4M3 col-major, d=0.5, exact",
		f8OutRuns[e4, e5, e4](e, f8Plan{lIn: cm, lD: cm, ra: 2, rb: 2, epi: none}, f8Scales{1, 0, 0, 0.5}))
	check("FP8 out E4M3 row-major D with LD 32 (16-byte multiple): D exact, the padding of each row untouched",
		f8OutRuns[e4, e4, e4](e, f8Plan{lIn: rm, lD: rm, ra: 2, rb: 2, epi: none, ldD: 32}, f8Scales{1, 0, 0, 2}))
	check("FP8 out E4M3 col-major D with LD 48: D exact, the padding of each column untouched",
		f8OutRuns[e4, e4, e4](e, f8Plan{lIn: cm, lD: cm, ra: 2, rb: 2, epi: none, ldD: 48}, f8Scales{1, 0, 0, 2}))
	check("FP8 out E4M3 amax a Slice at element 1 of a 4-float buffer: written there, elements 0, 2, 3 untouched",
		f8OutRuns[e4, e4, e4](e, f8Plan{lIn: rm, lD: rm, ra: 2, rb: 2, epi: none, amaxAt: 1}, f8Scales{1, 0.5, 0, 1}))
	check("FP8 out E4M3 plan without AmaxD: RunWith with only Scales.D (d=4), then RunWith with MatmulScales{} (nil: 1), exact",
		f8OutRuns[e4, e4, e4](e, f8Plan{lIn: rm, lD: rm, ra: 2, rb: 2, epi: none, noAmax: true}, f8Scales{1, 0, 0, 4}, f8Scales{1, 0, 0, 0}))
	check("FP8 out E4M3 plan without AmaxD through Run (docs: an FP8 plan also runs with Run, scales 1), alpha 0.5, exact",
		f8OutRuns[e4, e4, e4](e, f8Plan{lIn: cm, lD: cm, ra: 2, rb: 2, epi: none, noAmax: true, viaRun: true}, f8Scales{0.5, 0, 0, 0}))
	alternative(fmt.Sprintf("FP8 out E4M3 GELU row-major, d=4: D within one E4M3 step of 4·GELU(A·B), amax within %g relative", geluTol),
		f8OutRuns[e4, e4, e4](e, f8Plan{lIn: rm, lD: rm, ra: 2, rb: 2, epi: cublas.EpilogueGELU}, f8Scales{1, 0.5, 0, 4}))
	// Docs silent: row-major A and Bᵀ (cuBLASLt's TN) with a column-major D.
	err := f8OutRuns[e4, e4, e4](e, f8Plan{lIn: rm, lD: cm, ra: 2, rb: 2, epi: none}, f8Scales{1, 0, 0, 2})
	if errors.Is(err, cublas.ErrShape) || errors.Is(err, cublas.ErrNotSupported) {
		ok("FP8 out E4M3 row-major A, Bᵀ with a col-major D: REFUSED (docs silent on mixed layouts): " + err.Error())
	} else {
		check("FP8 out E4M3 row-major A, Bᵀ with a col-major D (docs silent on mixed layouts): accepted, exact", err)
	}
	check("FP8 out E4M3 RunWith, then A, B, the three scales and the plan closed at once: D and amax exact", f8OutHeld(e))
	f8OutGraph(e)
	f8OutMisuse(e)
}

// f8OutHeld queues a 2048³ SGEMM and then an FP8-output RunWith behind it,
// and closes A, B, the three scales and the plan as soon as RunWith has
// returned (the docs: work a Run queued keeps its buffers).
func f8OutHeld(e *env) (err error) {
	type e4 = cublas.Float8E4M3
	const big = 2048
	l := cublas.RowMajor
	opA, opB := f8Data(2, 2, 40)
	A, B := f8TN(opA, opB, l)
	s := f8Scales{1, 0.5, 4, 0.25}
	want, wantAmax, err := want8[e4](matmul(opA, opB), s, cublas.EpilogueNone)
	if err != nil {
		return err
	}
	a := &arena{e: e}
	defer func() { err = errors.Join(err, a.close()) }()
	dD, amax := upload(a, make([]e4, fM*fN)), upload(a, []float32{-1})
	g1, g2, g3 := upload(a, make([]float32, big*big)), upload(a, make([]float32, big*big)), upload(a, make([]float32, big*big))
	if a.err != nil {
		return a.err
	}
	cl := &arena{e: e} // closed right after RunWith
	dA, dB := upload(cl, conv8[e4](A.m.stored(l))), upload(cl, conv8[e4](B.m.stored(l)))
	sa, sb, sd := upload(cl, []float32{s.a}), upload(cl, []float32{s.b}), upload(cl, []float32{s.d})
	if cl.err != nil {
		return cl.close()
	}
	va, vb, vd := on8(dA, A, l), on8(dB, B, l), cublas.RowMajorMatrix(dD, fM, fN)
	p, err := cublas.NewMatmulPlan(e.h, va, vb, vd, &cublas.MatmulOptions{AmaxD: true})
	if err != nil {
		return errors.Join(fmt.Errorf("NewMatmulPlan: %w", err), cl.close())
	}
	gv := func(b *driver.Buffer[float32]) cublas.Matrix[float32] { return cublas.RowMajorMatrix(b, big, big) }
	err = cublas.Gemm(e.h, 1, gv(g1), gv(g2), 0, gv(g3))
	if err == nil {
		err = p.RunWith(float64(s.alpha), va, vb, 0, vd, vd, cublas.MatmulExtras[e4]{Scales: cublas.MatmulScales{A: sa, B: sb, D: sd, AmaxD: amax}})
	}
	if err := errors.Join(err, cl.close(), p.Close()); err != nil {
		return err
	}
	got, err := dD.ToHost(e.s)
	if err != nil {
		return err
	}
	g := make([]float32, len(got))
	for i, v := range got {
		g[i] = from8(v)
	}
	if err := compare(g, want.stored(l), 0); err != nil {
		return fmt.Errorf("result D: %w", err)
	}
	am, err := amax.ToHost(e.s)
	if err != nil {
		return err
	}
	return compare(am, []float32{wantAmax}, 0)
}

// f8OutGraph captures an FP8-output RunWith, closes the plan, A, B and
// a's and b's scales, and replays it with D's scale changed between
// replays (the docs: scales are read when the matmul runs).
func f8OutGraph(e *env) {
	const what = "graph: FP8-out E4M3 col-major RunWith (a=0.5 b=4, D's scale, AmaxD) captured; plan, A, B, a's and b's scales closed; replayed with d = 1, 0.25, 64 (some saturate) set between replays"
	type e4 = cublas.Float8E4M3
	l := cublas.ColMajor
	opA, opB := f8Data(2, 2, 50)
	A, B := f8TN(opA, opB, l)
	P := matmul(opA, opB)
	nanD := make([]e4, fM*fN)
	for i := range nanD {
		nanD[i] = to8[e4](float32(math.NaN()))
	}
	a := &arena{e: e}
	defer func() {
		if err := a.close(); err != nil {
			fail(what+" buffers", "%v", err)
		}
	}()
	dD, sd, amax := upload(a, nanD), upload(a, []float32{1}), upload(a, []float32{-1})
	if a.err != nil {
		fail(what, "%v", a.err)
		return
	}
	cl := &arena{e: e} // closed right after the capture
	dA, dB := upload(cl, conv8[e4](A.m.stored(l))), upload(cl, conv8[e4](B.m.stored(l)))
	sa, sb := upload(cl, []float32{0.5}), upload(cl, []float32{4})
	if cl.err != nil {
		fail(what, "%v", cl.close())
		return
	}
	va, vb, vd := on8(dA, A, l), on8(dB, B, l), cublas.ColMajorMatrix(dD, fM, fN)
	p, err := cublas.NewMatmulPlan(e.h, va, vb, vd, &cublas.MatmulOptions{AmaxD: true})
	if err != nil {
		fail(what, "NewMatmulPlan: %v", errors.Join(err, cl.close()))
		return
	}
	g, err := graph.Capture(e.s, graph.CaptureGlobal, func(cs *driver.Stream) error {
		return p.RunWith(1, va, vb, 0, vd, vd, cublas.MatmulExtras[e4]{Scales: cublas.MatmulScales{A: sa, B: sb, D: sd, AmaxD: amax}})
	})
	if err = errors.Join(err, p.Close(), cl.close()); err != nil {
		if g != nil {
			g.Close()
		}
		fail(what, "capture: %v", err)
		return
	}
	exe, err := g.Instantiate()
	if err = errors.Join(err, g.Close()); err != nil {
		fail(what, "instantiate: %v", err)
		return
	}
	defer exe.Close()
	for _, d := range []float32{1, 0.25, 64} {
		want, wantAmax, err := want8[e4](P, f8Scales{1, 0.5, 4, d}, cublas.EpilogueNone)
		if err == nil && d == 64 {
			err = saturated[e4](want)
		}
		if err == nil {
			err = errors.Join(sd.CopyFromHost(e.s, []float32{d}), amax.CopyFromHost(e.s, []float32{-1}), dD.CopyFromHost(e.s, nanD))
		}
		if err == nil {
			err = exe.Launch(e.s)
		}
		var got []e4
		var am []float32
		if err == nil {
			got, err = dD.ToHost(e.s)
		}
		if err == nil {
			am, err = amax.ToHost(e.s)
		}
		if err == nil {
			g := make([]float32, len(got))
			for i, v := range got {
				g[i] = from8(v)
			}
			err = errors.Join(compare(g, want.stored(l), 0), compare(am, []float32{wantAmax}, 0))
		}
		if err = errors.Join(err, exe.Err()); err != nil {
			fail(what, "replay with d=%g: %v", d, err)
			return
		}
	}
	ok(what + ": D and amax exact each time")
}
