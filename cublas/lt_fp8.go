package cublas

import (
	"fmt"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
)

// MatmulScales are the scale factors of an FP8 plan's Run, each the first
// element of a float32 buffer in device memory, read when the matmul
// runs, and the amax it writes: D = d·epilogue(alpha·a·b·op(A)·op(B) +
// beta·C) with a, b and d the values of the scales A, B and D (nil: 1),
// d only for an 8-bit D (whose beta is 0).
//
// A MatmulPlan whose A and B are Float8E4M3 or Float8E5M2 multiplies
// 8-bit floats on the tensor cores of GPUs of compute capability 8.9 and
// later, as cuBLASLt allows:
//
//   - A and B: E4M3 by E4M3, E4M3 by E5M2 or E5M2 by E4M3 (not E5M2 by
//     E5M2); D (and C, of D's type) Half, BFloat16 or float32, or D of
//     8-bit floats (an FP8 output): Float8E4M3, or Float8E5M2 where A or
//     B is Float8E5M2;
//   - an 8-bit D adds no C: cuBLASLt pairs an 8-bit D with a 16-bit C,
//     which a plan's C, of D's type, cannot be. Its Runs take beta 0 and
//     as c a view that starts where d does (d itself; C is not read), and
//     scale D (MatmulScales.D) before rounding to D's type, to nearest
//     even, saturating at the type's largest finite value (±448 for E4M3,
//     ±57344 for E5M2: unlike Float8E5M2Of, which overflows to ±Inf);
//     made with MatmulOptions.AmaxD, they also write D's amax
//     (MatmulScales.AmaxD);
//   - the compute type Compute32F (the default), alpha and beta float32;
//   - cuBLASLt's A transposed and its B not ("TN"): with column-major
//     views, A is the T() of a column-major K×M matrix and B a K×N one;
//     with row-major views (D too), A is an M×K matrix and B the T() of a
//     row-major N×K one. The rule is on the problem cuBLASLt sees, so
//     mixed layouts that map to it (row-major A and B, as above, with a
//     column-major D) are accepted too;
//   - M, N and K multiples of 16 (M and N not 0 with MatmulOptions.AmaxD:
//     an empty D's amax would never be written), and leading dimensions
//     that are multiples of 16 bytes (16 elements of 8-bit floats, 8 of
//     Half or BFloat16, 4 of float32); each matrix starts on a 16-byte
//     boundary, as in every plan;
//   - the epilogues None, ReLU and GELU, and those with a bias for a Half
//     or BFloat16 D (the bias of D's type); an 8-bit D takes no bias.
//
// NewMatmulPlan refuses anything else before cuBLASLt is called (ErrShape
// for the layouts and sizes, driver.ErrInvalidArgument for the rest), and
// a device of compute capability below 8.9 (driver.Device's
// ComputeCapability) with an error matching ErrNotSupported. A Run
// refuses a scale or an amax its plan does not take, a missing amax where
// the plan writes one, and beta other than 0 or a c other than D for an
// 8-bit D, with an error matching driver.ErrInvalidArgument.
type MatmulScales struct {
	// A and B scale the products; nil is a scale of 1, so an FP8 plan
	// also runs with the zero MatmulScales (and with Run). Each is one
	// float32 of device memory, read when the matmul runs.
	A, B *driver.Buffer[float32]
	// D scales the result into an 8-bit D: D is the result (after the
	// epilogue) times d, rounded to D's type. nil is a scale of 1. Only
	// for plans whose D is of 8-bit floats. Any element of a buffer may
	// be a scale (Buffer.Slice).
	D *driver.Buffer[float32]
	// AmaxD receives, when the matmul runs, the largest absolute value of
	// the result (after the epilogue, before D's scale) in its first
	// element, overwritten (what it held does not matter). It is required
	// by plans made with MatmulOptions.AmaxD, and refused by the others.
	// It may not overlap any other operand.
	AmaxD *driver.Buffer[float32]
}

// isE5M2 reports whether T is Float8E5M2.
func isE5M2[T Element]() bool {
	_, ok := any(*new(T)).(Float8E5M2)
	return ok
}

// isFP8 reports whether T is an 8-bit float.
func isFP8[T Element]() bool {
	var z T
	switch any(z).(type) {
	case Float8E4M3, Float8E5M2:
		return true
	}
	return false
}

// checkFP8 refuses what cuBLASLt refuses of an FP8 matmul, before it is
// called, and reports whether the plan is one (A and B 8-bit floats) and
// whether its D is of 8-bit floats too.
func checkFP8[TA, TB, TC Element](op string, hs *handleState, g blasview.GemmArgs, opts MatmulOptions) (fp8, out bool, err error) {
	fa, fb, out := isFP8[TA](), isFP8[TB](), isFP8[TC]()
	var ztc TC
	if !fa && !fb {
		if out {
			return false, false, invalid(op, "D of 8-bit floats: FP8 plans have A and B of 8-bit floats")
		}
		if opts.AmaxD {
			return false, false, invalid(op, "AmaxD: D's amax is for FP8 plans whose D is of 8-bit floats")
		}
		return false, false, nil
	}
	a5, b5 := isE5M2[TA](), isE5M2[TB]()
	switch any(ztc).(type) {
	case Half, BFloat16, float32, Float8E4M3, Float8E5M2:
	default:
		return true, out, invalid(op, "D of %T in an FP8 plan: D is Half, BFloat16, float32 or of 8-bit floats", ztc)
	}
	switch {
	case fa != fb:
		return true, out, invalid(op, "A of %T and B of %T: an FP8 plan has both of 8-bit floats", *new(TA), *new(TB))
	case a5 && b5:
		return true, out, invalid(op, "A and B both Float8E5M2: cuBLASLt multiplies E4M3 by E4M3 or E5M2, or E5M2 by E4M3")
	case isE5M2[TC]() && !a5 && !b5:
		return true, out, invalid(op, "D of Float8E5M2 from E4M3 by E4M3: cuBLASLt gives an E5M2 D only where A or B is E5M2")
	case opts.AmaxD && !out:
		return true, out, invalid(op, "AmaxD with a D of %T: D's amax is for a D of 8-bit floats", ztc)
	case opts.Compute != Compute32F:
		return true, out, invalid(op, "compute type %d in an FP8 plan: FP8 computes in Compute32F", opts.Compute)
	}
	switch opts.Epilogue {
	case EpilogueNone, EpilogueReLU, EpilogueGELU:
	case EpilogueBias, EpilogueReLUBias, EpilogueGELUBias:
		if out {
			return true, out, invalid(op, "the epilogue %v with a D of %T: an 8-bit D takes no bias", opts.Epilogue, ztc)
		}
		if _, f32 := any(ztc).(float32); f32 {
			return true, out, invalid(op, "the epilogue %v of an FP8 plan with a float32 D: cuBLASLt's bias there is BFloat16, not D's type; use a Half or BFloat16 D", opts.Epilogue)
		}
	default:
		return true, out, invalid(op, "the epilogue %v in an FP8 plan: FP8 plans offer None, ReLU, GELU and their bias forms", opts.Epilogue)
	}
	if major, minor := hs.ctx.Device().ComputeCapability(); major*10+minor < 89 {
		return true, out, fmt.Errorf("cublas: %s: FP8 matmuls need a GPU of compute capability 8.9 or later; this one is %d.%d: %w", op, major, minor, ErrNotSupported)
	}
	na, nb := "A", "B" // cuBLASLt's A and B, as the caller named them
	if g.Swapped {
		na, nb = nb, na
	}
	shapeErr := func(name, format string, args ...any) error {
		return &blasview.Error{Func: op, Operand: name, Kind: ErrShape, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case g.TransA != cublasraw.CUBLAS_OP_T || g.TransB != cublasraw.CUBLAS_OP_N:
		return true, out, shapeErr(na, "FP8 needs cuBLASLt's A transposed and B not (\"TN\"): with column-major views A is the T() of a K×M matrix and B a K×N one; with row-major views, A an M×K matrix and B the T() of an N×K one")
	case g.M%16 != 0 || g.N%16 != 0:
		return true, out, shapeErr("D", "FP8 needs D's rows and columns multiples of 16; they are %d and %d (as cuBLASLt sees D)", g.M, g.N)
	case opts.AmaxD && (g.M == 0 || g.N == 0):
		return true, out, shapeErr("D", "AmaxD, and D is empty (%d×%d as cuBLASLt sees it): no matmul runs to write its amax", g.M, g.N)
	case g.K%16 != 0:
		return true, out, shapeErr(na, "FP8 needs K (the columns of op(A)) a multiple of 16; it is %d", g.K)
	case g.LDA%16 != 0:
		return true, out, shapeErr(na, "FP8 needs %s's leading dimension a multiple of 16; it is %d", na, g.LDA)
	case g.LDB%16 != 0:
		return true, out, shapeErr(nb, "FP8 needs %s's leading dimension a multiple of 16; it is %d", nb, g.LDB)
	case g.LDC*int64(sizeOf[TC]())%16 != 0:
		return true, out, shapeErr("D", "FP8 needs D's leading dimension a multiple of 16 bytes' worth of elements; it is %d", g.LDC)
	}
	return true, out, nil
}

// scalesPresent checks that a Run names scale factors and an amax only
// for a plan that takes them, and an amax for a plan that writes one.
func (st *planState) scalesPresent(op string, sc MatmulScales) error {
	switch {
	case !st.fp8 && (sc.A != nil || sc.B != nil):
		return invalid(op, "scale factors are for FP8 plans (A and B of 8-bit floats)")
	case !st.fp8Out && sc.D != nil:
		return invalid(op, "D's scale is for FP8 plans whose D is of 8-bit floats")
	case st.amax != (sc.AmaxD != nil):
		return invalid(op, "D's amax is written exactly when the plan was made with MatmulOptions.AmaxD (AmaxD nil: %v)", sc.AmaxD == nil)
	}
	return nil
}

// fp8OutC refuses, for a plan whose D is of 8-bit floats, a Run with beta
// other than 0 or a C other than D: such a plan adds no C (see
// MatmulScales).
func (st *planState) fp8OutC(op string, beta float64, c, d uintptr) error {
	if st.fp8Out && (beta != 0 || c != d) {
		return invalid(op, "an 8-bit D adds no C: beta must be 0 (it is %v) and c D's own view (cuBLASLt pairs an 8-bit D with a 16-bit C, which a plan's C, of D's type, cannot be)", beta)
	}
	return nil
}

// fp8Pointers sets the descriptor's pointers of an FP8 plan: the scales
// of A and B, and for an 8-bit D its scale and (made with AmaxD) its
// amax. The handle's lock is held.
func (st *planState) fp8Pointers(p extraPtrs) error {
	if !st.fp8 {
		return nil
	}
	hs := st.hd.st
	ptr := func(a cublasraw.LtMatmulDescAttributes, p uintptr) error {
		return cublasraw.LtMatmulDescSetAttribute(st.desc, a, attr(hs, uint64(p)), 8)
	}
	if err := ptr(cublasraw.CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p.sa); err != nil {
		return err
	}
	if err := ptr(cublasraw.CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p.sb); err != nil {
		return err
	}
	if st.fp8Out {
		if err := ptr(cublasraw.CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, p.sd); err != nil {
			return err
		}
	}
	if st.amax {
		return ptr(cublasraw.CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, p.amax)
	}
	return nil
}

// cPtr is the C cuBLASLt gets: c, but NULL for an 8-bit D (beta is 0:
// cuBLASLt refuses C at D's address with another type than D's).
func (st *planState) cPtr(c uintptr) uintptr {
	if st.fp8Out {
		return 0
	}
	return c
}

// cLayout is the layout cuBLASLt gets for C: D's, but for an 8-bit D, a
// BFloat16 one of D's shape (C is NULL, and not read).
func (st *planState) cLayout() cublasraw.LtMatrixLayout {
	if st.lcc != 0 {
		return st.lcc
	}
	return st.lc
}

// scale holds an FP8 plan's scale (or amax, out) buffer for the call and
// returns the address of its first element (0 for nil).
func scale(cl *call, name string, b *driver.Buffer[float32], out bool, ops *opList) (uintptr, error) {
	if b == nil {
		return 0, nil
	}
	buf, p, err := use(cl, name, b)
	if err != nil {
		return 0, err
	}
	if buf.Len < 1 {
		return 0, short(cl.op, name, buf.Len, 1, "float32")
	}
	ops.add(operand{name: name, lo: p, hi: p + 4, out: out})
	return p, nil
}
