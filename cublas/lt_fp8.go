package cublas

import (
	"fmt"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
)

// MatmulScales are the scale factors of an FP8 plan's Run, each the first
// element of a float32 buffer in device memory, read when the matmul
// runs: D = alpha·a·b·op(A)·op(B) + beta·C with a and b the values of A
// and B (nil: 1).
//
// A MatmulPlan whose A and B are Float8E4M3 or Float8E5M2 multiplies
// 8-bit floats on the tensor cores of GPUs of compute capability 8.9 and
// later, as cuBLASLt allows:
//
//   - A and B: E4M3 by E4M3, E4M3 by E5M2 or E5M2 by E4M3 (not E5M2 by
//     E5M2); D (and C, of D's type) Half, BFloat16 or float32. FP8
//     outputs are not offered (cuBLASLt pairs an 8-bit D with a 16-bit
//     C, and a plan's C has D's type), and so neither are the scales of
//     C and D nor D's amax, which cuBLASLt computes for 8-bit outputs;
//   - the compute type Compute32F (the default), alpha and beta float32;
//   - cuBLASLt's A transposed and its B not ("TN"): with column-major
//     views, A is the T() of a column-major K×M matrix and B a K×N one;
//     with row-major views (D too), A is an M×K matrix and B the T() of a
//     row-major N×K one;
//   - M, N and K multiples of 16, and leading dimensions of 16 bytes'
//     worth of elements (each matrix starts on a 16-byte boundary, as in
//     every plan);
//   - the epilogues None, ReLU and GELU, and those with a bias for a Half
//     or BFloat16 D (the bias of D's type).
//
// NewMatmulPlan refuses anything else before cuBLASLt is called (ErrShape
// for the layouts and sizes, driver.ErrInvalidArgument for the rest), and
// a device of compute capability below 8.9 (driver.Device's
// ComputeCapability) with an error matching ErrNotSupported.
type MatmulScales struct {
	// A and B scale the products; nil is a scale of 1, so an FP8 plan
	// also runs with the zero MatmulScales (and with Run). Each is one
	// float32 of device memory, read when the matmul runs.
	A, B *driver.Buffer[float32]
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
// called, and reports whether the plan is one (A and B 8-bit floats).
func checkFP8[TA, TB, TC Element](op string, hs *handleState, g blasview.GemmArgs, opts MatmulOptions) (bool, error) {
	fa, fb := isFP8[TA](), isFP8[TB]()
	var ztc TC
	if !fa && !fb {
		if isFP8[TC]() {
			return false, invalid(op, "D of 8-bit floats: FP8 plans have A and B of 8-bit floats and D of Half, BFloat16 or float32")
		}
		return false, nil
	}
	_, b5 := any(*new(TB)).(Float8E5M2)
	_, a5 := any(*new(TA)).(Float8E5M2)
	switch any(ztc).(type) {
	case Half, BFloat16, float32:
	default:
		return true, invalid(op, "D of %T in an FP8 plan: D (and C) are Half, BFloat16 or float32 (an 8-bit D needs a C of a 16-bit type, and a MatmulPlan's C has D's type)", ztc)
	}
	switch {
	case fa != fb:
		return true, invalid(op, "A of %T and B of %T: an FP8 plan has both of 8-bit floats", *new(TA), *new(TB))
	case a5 && b5:
		return true, invalid(op, "A and B both Float8E5M2: cuBLASLt multiplies E4M3 by E4M3 or E5M2, or E5M2 by E4M3")
	case opts.Compute != Compute32F:
		return true, invalid(op, "compute type %d in an FP8 plan: FP8 computes in Compute32F", opts.Compute)
	}
	switch opts.Epilogue {
	case EpilogueNone, EpilogueReLU, EpilogueGELU:
	case EpilogueBias, EpilogueReLUBias, EpilogueGELUBias:
		if _, f32 := any(ztc).(float32); f32 {
			return true, invalid(op, "the epilogue %v of an FP8 plan with a float32 D: cuBLASLt's bias there is BFloat16, not D's type; use a Half or BFloat16 D", opts.Epilogue)
		}
	default:
		return true, invalid(op, "the epilogue %v in an FP8 plan: FP8 plans offer None, ReLU, GELU and their bias forms", opts.Epilogue)
	}
	if major, minor := hs.ctx.Device().ComputeCapability(); major*10+minor < 89 {
		return true, fmt.Errorf("cublas: %s: FP8 matmuls need a GPU of compute capability 8.9 or later; this one is %d.%d: %w", op, major, minor, ErrNotSupported)
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
		return true, shapeErr(na, "FP8 needs cuBLASLt's A transposed and B not (\"TN\"): with column-major views A is the T() of a K×M matrix and B a K×N one; with row-major views, A an M×K matrix and B the T() of an N×K one")
	case g.M%16 != 0 || g.N%16 != 0:
		return true, shapeErr("D", "FP8 needs D's rows and columns multiples of 16; they are %d and %d (as cuBLASLt sees D)", g.M, g.N)
	case g.K%16 != 0:
		return true, shapeErr(na, "FP8 needs K (the columns of op(A)) a multiple of 16; it is %d", g.K)
	case g.LDA%16 != 0:
		return true, shapeErr(na, "FP8 needs %s's leading dimension a multiple of 16; it is %d", na, g.LDA)
	case g.LDB%16 != 0:
		return true, shapeErr(nb, "FP8 needs %s's leading dimension a multiple of 16; it is %d", nb, g.LDB)
	case g.LDC*int64(sizeOf[TC]())%16 != 0:
		return true, shapeErr("D", "FP8 needs D's leading dimension a multiple of 16 bytes' worth of elements; it is %d", g.LDC)
	}
	return true, nil
}

// scalesPresent checks that a Run names scale factors only for an FP8
// plan.
func (st *planState) scalesPresent(op string, sc MatmulScales) error {
	if !st.fp8 && (sc.A != nil || sc.B != nil) {
		return invalid(op, "scale factors are for FP8 plans (A and B of 8-bit floats)")
	}
	return nil
}

// scale holds an FP8 plan's scale buffer for the call and returns the
// address of its first element (0 for nil).
func scale(cl *call, name string, b *driver.Buffer[float32], ops *opList) (uintptr, error) {
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
	ops.add(operand{name: name, lo: p, hi: p + 4})
	return p, nil
}
