package cublas

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/ctxcall"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Epilogue is what a cuBLASLt matmul applies to its result before storing
// it (cublasLtEpilogue_t).
type Epilogue int32

// The epilogues of inference. Bias adds a vector: one element per row of
// D for a column-major D, per column of D for a row-major one (per output
// feature either way, when D holds one sample per column or per row).
// GELU is the tanh approximation cuBLASLt computes. Those of training
// (auxiliary outputs, gradients) are below.
const (
	EpilogueNone     Epilogue = 1
	EpilogueReLU     Epilogue = 2
	EpilogueBias     Epilogue = 4
	EpilogueReLUBias Epilogue = 6
	EpilogueGELU     Epilogue = 32
	EpilogueGELUBias Epilogue = 36
)

// MatmulOptions configure a MatmulPlan; the zero value (or nil) is a
// float32-accumulating matmul with no epilogue and cuBLASLt's first
// heuristic choice.
type MatmulOptions struct {
	// Compute is the compute type (0: Compute32F).
	Compute ComputeType
	// Epilogue (0: EpilogueNone).
	Epilogue Epilogue
	// AuxLD is the leading dimension of the epilogue's auxiliary matrix
	// (see EpilogueReLUAux): in bits for a ReLU mask, a multiple of 128;
	// in elements for GELU's input, a multiple of 8; at least the rows of
	// D as cuBLASLt sees it (the columns of a row-major D), at most
	// 2^31-1 (as every leading dimension). 0: the smallest allowed. Only
	// for epilogues with an auxiliary matrix: NewMatmulPlan refuses one
	// set for another epilogue, or breaking these rules, with an error
	// matching driver.ErrInvalidArgument.
	AuxLD int
	// Autotune, when above 1, times up to that many of the heuristic's
	// candidates when the plan is made (on scratch buffers of the plan's
	// shapes, on the handle's stream) and keeps the fastest. 0 or 1 takes
	// the heuristic's first. Timing waits for the stream, so it cannot be
	// captured: NewMatmulPlan fails with an error matching
	// driver.ErrStreamCaptureUnsupported if the stream is being captured,
	// or if a capture begins on it meanwhile (that capture begins once
	// the timing in progress is done, and gets none of it).
	Autotune int
	// AmaxD makes an FP8 plan whose D is of 8-bit floats write D's amax
	// at every Run (MatmulScales.AmaxD, required then). NewMatmulPlan
	// refuses it for any other plan, with an error matching
	// driver.ErrInvalidArgument.
	AmaxD bool
}

// MatmulPlan is a cuBLASLt matmul D = epilogue(alpha·op(A)·op(B) + beta·C)
// for fixed shapes, layouts, leading dimensions, element types, compute
// type and epilogue: its descriptors and its algorithm are chosen once, by
// NewMatmulPlan, and reused by every Run (cuBLASLt's heuristic costs far
// more than a small matmul). It runs on its Handle's stream, with the
// handle's workspace, and holds the handle until it is closed.
//
// A MatmulPlan is safe for concurrent use; its Runs are queued one at a
// time, like the handle's routines. Close releases it; a plan dropped
// without Close is released by a cleanup. Work a Run queued keeps its
// buffers, the workspace and the handle until the stream has passed it
// (or, captured, until the graph is gone), as the handle's routines do;
// a captured Run does not need its plan: the plan, the handle and the
// buffers may be closed once the capture is over, before the graph runs.
type MatmulPlan[TA, TB, TC Element] struct {
	obj     lifetime.Object
	st      *planState
	cleanup runtime.Cleanup
}

// planState is what Run, the destroy and the cleanup need.
type planState struct {
	hd      *Handle
	href    lifetime.Ref
	g       blasview.GemmArgs // the shapes, as the template views map them
	epi     Epilogue
	cepi    Epilogue // epi as cuBLASLt sees the problem (forCUBLAS)
	auxLD   int64    // the auxiliary matrix's leading dimension, 0 without one
	fp8     bool     // A and B are 8-bit floats
	fp8Out  bool     // and D too (C is D, its layout lcc)
	amax    bool     // Runs write D's amax (MatmulOptions.AmaxD)
	sk      int      // the scalars' kind (ComputeType.scalarKind)
	lt      cublasraw.LtHandle
	desc    cublasraw.LtMatmulDesc
	la, lb  cublasraw.LtMatrixLayout
	lc      cublasraw.LtMatrixLayout // C and D share it
	lcc     cublasraw.LtMatrixLayout // C's of an 8-bit D (see cLayout), else 0
	pref    cublasraw.LtMatmulPreference
	algo    cublasraw.LtMatmulAlgo
	wsBytes uintptr // the algorithm's workspace need (at most the handle's)
	tuned   []time.Duration

	candidates []cublasraw.LtMatmulHeuristicResult // the heuristic's, while the plan is made
}

// template maps template views of A, B and D: their buffers are not read
// (they may be nil), only their shapes, layouts, leading dimensions and
// operations. The template buffers (2^57 elements of at most 16 bytes,
// 2^61 bytes apart) hold any view that 32-bit sizes allow short of 2^57
// elements, more than any memory: a size is refused by the 32-bit limit,
// never for the template's length.
func template(a, b, d blasview.Matrix) (blasview.GemmArgs, error) {
	const far, n = 1 << 61, 1 << 57
	a.Buf = blasview.Buffer{Len: n, Addr: 0, Elem: a.Buf.Elem}
	b.Buf = blasview.Buffer{Len: n, Addr: far, Elem: b.Buf.Elem}
	d.Buf = blasview.Buffer{Len: n, Addr: 2 * far, Elem: d.Buf.Elem}
	a.Offset, b.Offset, d.Offset = 0, 0, 0
	return blasview.Gemm(a, b, d)
}

// tview is m as a template view (its buffer ignored).
func tview[T Element](m Matrix[T]) blasview.Matrix {
	return m.view(blasview.Buffer{Elem: int64(sizeOf[T]())})
}

// NewMatmulPlan makes a plan for D = epilogue(alpha·op(A)·op(B) + beta·C)
// with A, B and D shaped like the views a, b and d (their buffers are not
// used: nil is fine), C shaped like D, on h's stream. Layouts work as for
// Gemm (a row-major D computes the transposed problem). It chooses the
// algorithm (see MatmulOptions.Autotune); a combination cuBLASLt cannot do
// fails with an error matching ErrNotSupported. A and B of 8-bit floats
// make an FP8 plan, whose rules MatmulScales lists; an epilogue with an
// auxiliary matrix gets its leading dimension here (MatmulOptions.AuxLD,
// MatmulPlan.AuxLD) and needs a D that is not empty.
func NewMatmulPlan[TA, TB, TC Element](h *Handle, a Matrix[TA], b Matrix[TB], d Matrix[TC], o *MatmulOptions) (*MatmulPlan[TA, TB, TC], error) {
	const op = "NewMatmulPlan"
	var opts MatmulOptions
	if o != nil {
		opts = *o
	}
	if opts.Compute == 0 {
		opts.Compute = Compute32F
	}
	if opts.Epilogue == 0 {
		opts.Epilogue = EpilogueNone
	}
	sk := opts.Compute.scalarKind()
	if sk < 0 {
		return nil, invalid(op, "unknown compute type %d", opts.Compute)
	}
	if !opts.Epilogue.known() {
		return nil, invalid(op, "unknown epilogue %d", int32(opts.Epilogue))
	}
	if opts.Autotune < 0 {
		return nil, invalid(op, "negative Autotune %d", opts.Autotune)
	}
	if isComplex[TA]() || isComplex[TB]() || isComplex[TC]() {
		return nil, invalid(op, "complex element types: use Gemm")
	}
	g, err := template(tview(a), tview(b), tview(d))
	if err != nil {
		return nil, renamed(refused(op, err), "C", "D")
	}
	if g.Needs64 {
		return nil, invalid(op, "a size or leading dimension beyond 2^31-1")
	}
	ald, err := auxLD(op, opts.Epilogue, opts.AuxLD, g.M, g.N)
	if err != nil {
		return nil, err
	}
	if _, err := cublasraw.LoadLt(); err != nil {
		return nil, wrap(op, err)
	}
	cl, err := h.begin(op)
	if err != nil {
		return nil, err
	}
	fp8, fp8Out, err := checkFP8[TA, TB, TC](op, cl.st, g, opts)
	if err != nil {
		return nil, cl.fail(err)
	}
	st := &planState{hd: h, g: g, epi: opts.Epilogue, cepi: opts.Epilogue.forCUBLAS(g.Swapped), auxLD: ald, fp8: fp8, fp8Out: fp8Out, amax: opts.AmaxD, sk: sk}
	if h.obj.Retain() {
		st.href = lifetime.RefOf(&h.obj)
	}
	ta, tb, tc := dataType[TA](), dataType[TB](), dataType[TC]()
	if g.Swapped {
		ta, tb = tb, ta
	}
	// The heuristic takes the bias, auxiliary and scale pointers' values
	// for the alignment they promise (it reads nothing there): it sees
	// addresses in the handle's workspace (256-byte aligned) with only
	// the alignment Run requires: one element in for the bias (or its
	// gradient; 16 bytes for an FP8 plan's), 16 bytes in for the
	// auxiliary matrix, 4 for the scales and the amax.
	var stand extraPtrs
	ws := cl.st.wsPtr
	if opts.Epilogue.hasBias() || opts.Epilogue.biasGrad() {
		stand.bias = ws + sizeOf[TC]()
		if fp8 {
			stand.bias = ws + 16
		}
	}
	if ald > 0 {
		stand.aux = ws + 16
	}
	if fp8 {
		stand.sa, stand.sb = ws+4, ws+4
	}
	if fp8Out {
		stand.sd = ws + 4
	}
	if opts.AmaxD {
		stand.amax = ws + 4
	}
	err = cl.run(noWork, func(cublasraw.Handle) error { return st.build(ta, tb, tc, opts, stand) })
	if err == nil && len(st.candidates) > 1 {
		err = autotune[TA, TB, TC](st)
	}
	st.candidates = nil
	if err != nil {
		_ = st.destroy()
		return nil, err
	}
	p := &MatmulPlan[TA, TB, TC]{st: st}
	p.obj.Init(func() error {
		p.cleanup.Stop()
		return st.destroy()
	})
	p.cleanup = runtime.AddCleanup(p, func(st *planState) { release.Defer(droppedPlan{st}) }, st)
	return p, nil
}

// scaleType is the type of alpha and beta for a scalar kind.
func scaleType(sk int) cublasraw.CudaDataType {
	switch sk {
	case 0:
		return cublasraw.CUDA_R_16F
	case 2:
		return cublasraw.CUDA_R_64F
	case 3:
		return cublasraw.CUDA_R_32I
	}
	return cublasraw.CUDA_R_32F
}

// build makes the descriptors and asks the heuristic, with stand-ins for
// the bias, auxiliary and scale pointers (set back to NULL after it) and
// the matrices' alignment Run requires; the handle's lock is held and its
// context current.
func (st *planState) build(ta, tb, tc cublasraw.CudaDataType, opts MatmulOptions, stand extraPtrs) error {
	g := st.g
	if err := cublasraw.LtCreate(&st.lt); err != nil {
		return err
	}
	if err := cublasraw.LtMatmulDescCreate(&st.desc, cublasraw.ComputeType(opts.Compute), scaleType(st.sk)); err != nil {
		return err
	}
	set := func(a cublasraw.LtMatmulDescAttributes, v int32) error {
		return cublasraw.LtMatmulDescSetAttribute(st.desc, a, attr(st.hd.st, v), 4)
	}
	if err := set(cublasraw.CUBLASLT_MATMUL_DESC_TRANSA, int32(g.TransA)); err != nil {
		return err
	}
	if err := set(cublasraw.CUBLASLT_MATMUL_DESC_TRANSB, int32(g.TransB)); err != nil {
		return err
	}
	if err := set(cublasraw.CUBLASLT_MATMUL_DESC_EPILOGUE, int32(st.cepi)); err != nil {
		return err
	}
	if err := st.pointers(stand); err != nil {
		return err
	}
	ar, ac, br, bc := st.layoutDims()
	if err := cublasraw.LtMatrixLayoutCreate(&st.la, ta, uint64(ar), uint64(ac), g.LDA); err != nil {
		return err
	}
	if err := cublasraw.LtMatrixLayoutCreate(&st.lb, tb, uint64(br), uint64(bc), g.LDB); err != nil {
		return err
	}
	if err := cublasraw.LtMatrixLayoutCreate(&st.lc, tc, uint64(g.M), uint64(g.N), g.LDC); err != nil {
		return err
	}
	if st.fp8Out {
		if err := cublasraw.LtMatrixLayoutCreate(&st.lcc, cublasraw.CUDA_R_16BF, uint64(g.M), uint64(g.N), g.LDC); err != nil {
			return err
		}
	}
	if err := cublasraw.LtMatmulPreferenceCreate(&st.pref); err != nil {
		return err
	}
	ws := attr(st.hd.st, uint64(st.hd.st.wsBytes))
	if err := cublasraw.LtMatmulPreferenceSetAttribute(st.pref, cublasraw.CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws, 8); err != nil {
		return err
	}
	// Algorithms that take A, B, C and D at any 16-byte boundary (the
	// default assumes 256; a plan's elements are at most 8 bytes).
	for _, a := range []cublasraw.LtMatmulPreferenceAttributes{cublasraw.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
		cublasraw.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, cublasraw.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, cublasraw.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES} {
		if err := cublasraw.LtMatmulPreferenceSetAttribute(st.pref, a, attr(st.hd.st, uint32(matrixAlign)), 4); err != nil {
			return err
		}
	}
	want := max(1, min(opts.Autotune, 16))
	res := make([]cublasraw.LtMatmulHeuristicResult, want)
	var got int32
	if err := cublasraw.LtMatmulAlgoGetHeuristic(st.lt, st.desc, st.la, st.lb, st.cLayout(), st.lc, st.pref, int32(want), &res[0], &got); err != nil {
		return err
	}
	if got < 1 {
		return &cublasraw.Error{Func: "cublasLtMatmulAlgoGetHeuristic", Code: cublasraw.CUBLAS_STATUS_NOT_SUPPORTED}
	}
	st.candidates = res[:got]
	st.algo, st.wsBytes = res[0].Algo, res[0].WorkspaceSize
	return st.pointers(extraPtrs{})
}

// pointers sets the descriptor's bias, auxiliary, scale and amax pointers
// (and the auxiliary matrix's leading dimension), those the plan has (a
// plan without a bias leaves its pointer NULL, as the descriptor was
// made). The handle's lock is held.
func (st *planState) pointers(p extraPtrs) error {
	hs := st.hd.st
	ptr := func(a cublasraw.LtMatmulDescAttributes, p uintptr) error {
		return cublasraw.LtMatmulDescSetAttribute(st.desc, a, attr(hs, uint64(p)), 8)
	}
	if st.epi.hasBias() || st.epi.biasGrad() {
		if err := ptr(cublasraw.CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias); err != nil {
			return err
		}
	}
	if st.auxLD > 0 {
		if err := ptr(cublasraw.CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux); err != nil {
			return err
		}
		if err := cublasraw.LtMatmulDescSetAttribute(st.desc, cublasraw.CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, attr(hs, st.auxLD), 8); err != nil {
			return err
		}
	}
	return st.fp8Pointers(p)
}

// destroy frees the descriptors and lets the handle go.
func (st *planState) destroy() error {
	var err error
	if st.lt != 0 {
		err = ctxcall.Bound(st.hd.st.cuctx, func() error {
			keep := func(e error) {
				if err == nil {
					err = e
				}
			}
			if st.pref != 0 {
				keep(cublasraw.LtMatmulPreferenceDestroy(st.pref))
			}
			for _, l := range []cublasraw.LtMatrixLayout{st.la, st.lb, st.lc, st.lcc} {
				if l != 0 {
					keep(cublasraw.LtMatrixLayoutDestroy(l))
				}
			}
			if st.desc != 0 {
				keep(cublasraw.LtMatmulDescDestroy(st.desc))
			}
			keep(cublasraw.LtDestroy(st.lt))
			return err
		})
		st.lt = 0
	}
	if st.href.Valid() {
		if rerr := st.href.Release(); err == nil {
			err = rerr
		}
		st.href = lifetime.Ref{}
	}
	return wrap("MatmulPlan.Close", err)
}

// droppedPlan releases the plan of a MatmulPlan dropped without Close.
type droppedPlan struct{ st *planState }

func (d droppedPlan) Release() error {
	release.Counters.Objects.Add(-1) // the plan's lifetime Object, never released
	return lifetime.OwnerFunc(d.st.destroy).Release()
}

// Close releases the plan (see MatmulPlan). A second Close returns the
// first's result.
func (p *MatmulPlan[TA, TB, TC]) Close() error {
	if p == nil || p.st == nil {
		return invalid("MatmulPlan.Close", "nil or zero MatmulPlan")
	}
	return p.obj.Close()
}

// Tuned returns the time each candidate algorithm took when the plan was
// autotuned (in the heuristic's order; the fastest was kept; -1 for a
// candidate cuBLASLt failed to run), or nil.
func (p *MatmulPlan[TA, TB, TC]) Tuned() []time.Duration {
	if p == nil || p.st == nil {
		return nil
	}
	return append([]time.Duration(nil), p.st.tuned...)
}

// Run queues D = epilogue(alpha·op(A)·op(B) + beta·C) on the handle's
// stream. a, b, c and d must have the plan's shapes, layouts, leading
// dimensions and operations (ErrShape otherwise); C is D itself (in place:
// pass D's view as c too) or apart from it; neither C nor D may overlap A
// or B (C is only read, but the check is Gemm's, conservative). With beta
// 0, C is not read (it may hold anything, NaN included). A plan whose D
// is of 8-bit floats adds no C: beta must be 0 and c D's own view
// (driver.ErrInvalidArgument otherwise; see MatmulScales).
//
// bias is the epilogue's vector, nil for epilogues without one (a missing
// or extra bias is refused, matching driver.ErrInvalidArgument). Its first
// elements are read, one per row of a column-major D, per column of a
// row-major one; a shorter buffer is ErrOutOfBounds (use Buffer.Slice for
// part of one: the bias may start at any element, an FP8 plan's on a
// 16-byte boundary). For BGradA and BGradB it receives the bias gradient.
// Epilogues with an auxiliary matrix, FP8 plans' scale factors and D's
// amax take RunWith.
//
// Views are checked against their buffers as for Gemm, and each matrix
// must start on a 16-byte boundary: the address of its first element
// (its buffer's, which an allocation aligns and a Buffer.Slice need not,
// plus Offset elements) a multiple of 16; otherwise Run fails with an
// error naming the matrix and matching driver.ErrInvalidArgument, nothing
// queued. alpha and beta are converted to the compute type's scalar
// type. Run needs the plan's Handle open: after Handle.Close it fails
// with driver.ErrClosed, while the plan still holds the cuBLAS handle for
// its own release.
func (p *MatmulPlan[TA, TB, TC]) Run(alpha float64, a Matrix[TA], b Matrix[TB], beta float64, c, d Matrix[TC], bias *driver.Buffer[TC]) error {
	return p.run("MatmulPlan.Run", alpha, a, b, beta, c, d, MatmulExtras[TC]{Bias: bias})
}

// RunWith is Run with every operand an epilogue or an FP8 plan may take:
// the bias or bias gradient, the auxiliary matrix (a ReLU mask or GELU's
// input), the scale factors and D's amax (see MatmulExtras). Each is checked
// against its buffer, may not overlap an operand when either is written,
// and is held like A, B, C and D.
func (p *MatmulPlan[TA, TB, TC]) RunWith(alpha float64, a Matrix[TA], b Matrix[TB], beta float64, c, d Matrix[TC], x MatmulExtras[TC]) error {
	return p.run("MatmulPlan.RunWith", alpha, a, b, beta, c, d, x)
}

func (p *MatmulPlan[TA, TB, TC]) run(op string, alpha float64, a Matrix[TA], b Matrix[TB], beta float64, c, d Matrix[TC], x MatmulExtras[TC]) error {
	if p == nil || p.st == nil {
		return invalid(op, "nil or zero MatmulPlan")
	}
	if !p.obj.Acquire() {
		return fmt.Errorf("cublas: %s: the plan is closed: %w", op, driver.ErrClosed)
	}
	defer func() { _ = p.obj.Release() }()
	st := p.st
	if err := st.present(op, x.Bias != nil, x.Mask != nil, x.Aux != nil, x.Scales); err != nil {
		return err
	}
	cl, err := st.hd.begin(op)
	if err != nil {
		return err
	}
	va, vb, vc, pa, pb, pc, err := matrices(&cl, a, b, c)
	if err != nil {
		return cl.fail(err)
	}
	vd, pd, err := matrix(&cl, "D", d)
	if err != nil {
		return cl.fail(err)
	}
	gd, err := blasview.Gemm(va, vb, vd)
	if err != nil {
		return cl.fail(renamed(refused(op, err), "C", "D"))
	}
	if err := st.same(op, "D", gd); err != nil {
		return cl.fail(err)
	}
	gc, err := blasview.Gemm(va, vb, vc)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	if err := st.same(op, "C", gc); err != nil {
		return cl.fail(err)
	}
	g, esz := st.g, sizeOf[TC]()
	C, D := at[TC](pc, gc.OffC), at[TC](pd, gd.OffC)
	if err := st.fp8OutC(op, beta, C, D); err != nil {
		return cl.fail(err)
	}
	if c0, c1 := span(C, g.M, g.N, g.LDC, esz); C != D && overlaps(c0, c1, D, g, esz) {
		return cl.fail(&blasview.Error{Func: op, Operand: "C", Kind: ErrAlias, Detail: "C overlaps D in memory without being D"})
	}
	var A, B uintptr
	sa, sb := sizeOf[TA](), sizeOf[TB]()
	if gd.Swapped {
		A, B = at[TB](pb, gd.OffA), at[TA](pa, gd.OffB)
		sa, sb = sb, sa
	} else {
		A, B = at[TA](pa, gd.OffA), at[TB](pb, gd.OffB)
	}
	ar, ac, br, bc := st.layoutDims()
	a0, a1 := span(A, ar, ac, g.LDA, sa)
	b0, b1 := span(B, br, bc, g.LDB, sb)
	c0, c1 := span(C, g.M, g.N, g.LDC, esz)
	if C == D {
		c0, c1 = C, C // in place: D stands for both
	}
	d0, d1 := span(D, g.M, g.N, g.LDC, esz)
	ops := opList{ops: [10]operand{{"A", a0, a1, false}, {"B", b0, b1, false}, {"C", c0, c1, false}, {"D", d0, d1, true}}, n: 4}
	names := [4]string{"A", "B", "D", "C"}
	if gd.Swapped {
		names[0], names[1] = "B", "A"
	}
	if err := matricesAligned(op, names, [4]uintptr{A, B, D, C}); err != nil {
		return cl.fail(err)
	}
	ptrs, err := extras(&cl, st, x, &ops)
	if err != nil {
		return cl.fail(err)
	}
	if err := extraAlias(op, ops.ops[:ops.n], 4); err != nil {
		return cl.fail(err)
	}
	if gd.Swapped { // cuBLASLt's A is the caller's B
		ptrs.sa, ptrs.sb = ptrs.sb, ptrs.sa
	}
	// The descriptor's pointers are set on the host (no context needed);
	// then the push of the handle's context, cublasLtMatmul and the
	// clearing are one call into C. The plan (st.algo, which C reads) is
	// held by the caller for the call.
	err = cl.runStep(func(cublasraw.Handle) (s ccall.Step, err error) {
		if err = st.pointers(ptrs); err != nil {
			return s, err
		}
		al, be := exScalars(cl.st, st.sk, alpha, beta)
		s.Fn, err = cublasraw.LtMatmulProc()
		s.N = 16
		s.Args = [ccall.SeqArgs]uintptr{uintptr(st.lt), uintptr(st.desc), al, A, uintptr(st.la), B, uintptr(st.lb), be, st.cPtr(C), uintptr(st.cLayout()), D, uintptr(st.lc),
			uintptr(unsafe.Pointer(&st.algo)), cl.st.wsPtr, st.wsBytes, seam.Stream(cl.st.s)}
		return s, err
	}, cublasraw.LtMatmulStatus)
	runtime.KeepAlive(st)
	return err
}

// layoutDims are the rows and columns of A and B as cuBLASLt stores them.
func (st *planState) layoutDims() (ar, ac, br, bc int64) {
	g := st.g
	ar, ac = g.M, g.K
	if g.TransA != cublasraw.CUBLAS_OP_N {
		ar, ac = ac, ar
	}
	br, bc = g.K, g.N
	if g.TransB != cublasraw.CUBLAS_OP_N {
		br, bc = bc, br
	}
	return ar, ac, br, bc
}
