package cublas

import (
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/cublasraw"
)

// ComputeType is the precision GemmEx computes in (cublasComputeType_t),
// which also fixes the type of alpha and beta in cuBLAS.
type ComputeType int32

// The compute types. cuBLAS documents which combinations of input, output
// and compute types it supports (for instance Half or BFloat16 inputs
// with a float32 or the same 16-bit output and Compute32F; int8 inputs
// with an int32 output and Compute32I); others fail with
// StatusNotSupported.
const (
	Compute16F         ComputeType = 64 // half precision throughout
	Compute16FPedantic ComputeType = 65
	Compute32F         ComputeType = 68 // float32 accumulation (tensor cores for 16-bit inputs)
	Compute32FPedantic ComputeType = 69
	Compute32FFast16F  ComputeType = 74 // float32 data, products in half precision
	Compute32FFast16BF ComputeType = 75 // float32 data, products in bfloat16
	Compute32FFastTF32 ComputeType = 77 // float32 data, products in TF32
	Compute64F         ComputeType = 70
	Compute64FPedantic ComputeType = 71
	Compute32I         ComputeType = 72 // int32 accumulation of int8 products
	Compute32IPedantic ComputeType = 73
)

// scalarKind is how cuBLAS reads alpha and beta for a compute type: 0
// half, 1 float32, 2 float64, 3 int32; -1 for an unknown compute type.
func (t ComputeType) scalarKind() int {
	switch t {
	case Compute16F, Compute16FPedantic:
		return 0
	case Compute32F, Compute32FPedantic, Compute32FFast16F, Compute32FFast16BF, Compute32FFastTF32:
		return 1
	case Compute64F, Compute64FPedantic:
		return 2
	case Compute32I, Compute32IPedantic:
		return 3
	}
	return -1
}

// exScalars stores alpha and beta in the compute type's scalar type.
func exScalars(st *handleState, kind int, alpha, beta float64) (uintptr, uintptr) {
	switch kind {
	case 0:
		return scalars(st, HalfOf(float32(alpha)), HalfOf(float32(beta)))
	case 1:
		return scalars(st, float32(alpha), float32(beta))
	case 2:
		return scalars(st, alpha, beta)
	}
	return scalars(st, int32(alpha), int32(beta))
}

// GemmEx computes C = alpha·op(A)·op(B) + beta·C (cublasGemmEx) with
// element types of its own for A, B and C and the compute type compute:
// mixed precision (Half or BFloat16 inputs with float32 accumulation on
// tensor cores, int8 inputs with int32 results, or Compute32FFastTF32 for
// float32 data). Shapes, layouts, bounds and overlaps are checked as for
// Gemm. alpha and beta are converted to the compute type's scalar type
// (Half for Compute16F, float32 for the Compute32F types, int32 for
// Compute32I). Complex element types are refused here: use Gemm. cuBLAS
// refuses Float8E4M3 and Float8E5M2 elements (StatusNotSupported, matching
// ErrNotSupported): FP8 matmuls are MatmulPlan's.
func GemmEx[TA, TB, TC Element](h *Handle, alpha float64, a Matrix[TA], b Matrix[TB], beta float64, c Matrix[TC], compute ComputeType) error {
	return gemmEx("GemmEx", h, alpha, a, 0, b, 0, beta, c, 0, 1, compute, false)
}

// GemmStridedBatchedEx is GemmStridedBatched with GemmEx's types
// (cublasGemmStridedBatchedEx).
func GemmStridedBatchedEx[TA, TB, TC Element](h *Handle, alpha float64, a Matrix[TA], strideA int, b Matrix[TB], strideB int, beta float64, c Matrix[TC], strideC int, count int, compute ComputeType) error {
	return gemmEx("GemmStridedBatchedEx", h, alpha, a, strideA, b, strideB, beta, c, strideC, count, compute, true)
}

func gemmEx[TA, TB, TC Element](op string, h *Handle, alpha float64, a Matrix[TA], strideA int, b Matrix[TB], strideB int, beta float64, c Matrix[TC], strideC, count int, compute ComputeType, batched bool) error {
	sk := compute.scalarKind()
	if sk < 0 {
		return invalid(op, "unknown compute type %d", compute)
	}
	if isComplex[TA]() || isComplex[TB]() || isComplex[TC]() {
		return invalid(op, "complex element types: use Gemm")
	}
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	va, vb, vc, pa, pb, pc, err := matrices(&cl, a, b, c)
	if err != nil {
		return cl.fail(err)
	}
	var g blasview.StridedArgs
	if batched {
		g, err = blasview.GemmStridedBatched(va, vb, vc, int64(strideA), int64(strideB), int64(strideC), int64(count))
	} else {
		g.GemmArgs, err = blasview.Gemm(va, vb, vc)
		g.Count = 1
	}
	if err != nil {
		return cl.fail(refused(op, err))
	}
	if g.Needs64 {
		return cl.fail(invalid(op, "a size, leading dimension or batch count beyond 2^31-1: GemmEx takes 32-bit sizes"))
	}
	ta, tb, tc := dataType[TA](), dataType[TB](), dataType[TC]()
	A, B := at[TA](pa, g.OffA), at[TB](pb, g.OffB)
	if g.Swapped {
		ta, tb = tb, ta
		A, B = at[TB](pb, g.OffA), at[TA](pa, g.OffB)
	}
	C := at[TC](pc, g.OffC)
	if batched {
		return cl.run(queued, func(hh cublasraw.Handle) error {
			al, be := exScalars(cl.st, sk, alpha, beta)
			return cublasraw.GemmStridedBatchedEx(hh, g.TransA, g.TransB, i32(g.M), i32(g.N), i32(g.K), al, A, ta, i32(g.LDA), g.StrideA,
				B, tb, i32(g.LDB), g.StrideB, be, C, tc, i32(g.LDC), g.StrideC, i32(g.Count), cublasraw.ComputeType(compute), cublasraw.CUBLAS_GEMM_DEFAULT)
		})
	}
	algo := cublasraw.CUBLAS_GEMM_DEFAULT
	gemmDefault := uintptr(algo) // -1, sign-extended: C reads its low 32 bits
	// One call into C: the context's push, cublasGemmEx (C's int
	// arguments are the low 32 bits of each) and the clearing.
	return cl.runStep(func(hh cublasraw.Handle) (s ccall.Step, err error) {
		al, be := exScalars(cl.st, sk, alpha, beta)
		s.Fn, err = cublasraw.GemmExProc()
		s.N = 19
		s.Args = [ccall.SeqArgs]uintptr{uintptr(hh), uintptr(g.TransA), uintptr(g.TransB), uintptr(i32(g.M)), uintptr(i32(g.N)), uintptr(i32(g.K)),
			al, A, uintptr(ta), uintptr(i32(g.LDA)), B, uintptr(tb), uintptr(i32(g.LDB)), be, C, uintptr(tc), uintptr(i32(g.LDC)),
			uintptr(cublasraw.ComputeType(compute)), gemmDefault}
		return s, err
	}, cublasraw.GemmExStatus)
}
