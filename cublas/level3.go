package cublas

import (
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/cublasraw"
)

// The raw functions of each level-3 routine, by kind (S, D, C, Z), with
// 32-bit and 64-bit sizes.
type (
	hnd = cublasraw.Handle
	opr = cublasraw.Operation
	sdm = cublasraw.SideMode
	flm = cublasraw.FillMode
	dgt = cublasraw.DiagType
)

var (
	gemmProc32   = [4]func() (uintptr, error){cublasraw.SgemmProc, cublasraw.DgemmProc, cublasraw.CgemmProc, cublasraw.ZgemmProc}
	gemmProc64   = [4]func() (uintptr, error){cublasraw.Sgemm_64Proc, cublasraw.Dgemm_64Proc, cublasraw.Cgemm_64Proc, cublasraw.Zgemm_64Proc}
	gemmStatus32 = [4]func(uintptr) error{cublasraw.SgemmStatus, cublasraw.DgemmStatus, cublasraw.CgemmStatus, cublasraw.ZgemmStatus}
	gemmStatus64 = [4]func(uintptr) error{cublasraw.Sgemm_64Status, cublasraw.Dgemm_64Status, cublasraw.Cgemm_64Status, cublasraw.Zgemm_64Status}
	strided32    = [4]func(hnd, opr, opr, int32, int32, int32, uintptr, uintptr, int32, int64, uintptr, int32, int64, uintptr, uintptr, int32, int64, int32) error{
		cublasraw.SgemmStridedBatched, cublasraw.DgemmStridedBatched, cublasraw.CgemmStridedBatched, cublasraw.ZgemmStridedBatched}
	strided64 = [4]func(hnd, opr, opr, int64, int64, int64, uintptr, uintptr, int64, int64, uintptr, int64, int64, uintptr, uintptr, int64, int64, int64) error{
		cublasraw.SgemmStridedBatched_64, cublasraw.DgemmStridedBatched_64, cublasraw.CgemmStridedBatched_64, cublasraw.ZgemmStridedBatched_64}
	syrk32 = [4]func(hnd, flm, opr, int32, int32, uintptr, uintptr, int32, uintptr, uintptr, int32) error{
		cublasraw.Ssyrk, cublasraw.Dsyrk, cublasraw.Csyrk, cublasraw.Zsyrk}
	syrk64 = [4]func(hnd, flm, opr, int64, int64, uintptr, uintptr, int64, uintptr, uintptr, int64) error{
		cublasraw.Ssyrk_64, cublasraw.Dsyrk_64, cublasraw.Csyrk_64, cublasraw.Zsyrk_64}
	symm32 = [4]func(hnd, sdm, flm, int32, int32, uintptr, uintptr, int32, uintptr, int32, uintptr, uintptr, int32) error{
		cublasraw.Ssymm, cublasraw.Dsymm, cublasraw.Csymm, cublasraw.Zsymm}
	symm64 = [4]func(hnd, sdm, flm, int64, int64, uintptr, uintptr, int64, uintptr, int64, uintptr, uintptr, int64) error{
		cublasraw.Ssymm_64, cublasraw.Dsymm_64, cublasraw.Csymm_64, cublasraw.Zsymm_64}
	trsm32 = [4]func(hnd, sdm, flm, opr, dgt, int32, int32, uintptr, uintptr, int32, uintptr, int32) error{
		cublasraw.Strsm, cublasraw.Dtrsm, cublasraw.Ctrsm, cublasraw.Ztrsm}
	trsm64 = [4]func(hnd, sdm, flm, opr, dgt, int64, int64, uintptr, uintptr, int64, uintptr, int64) error{
		cublasraw.Strsm_64, cublasraw.Dtrsm_64, cublasraw.Ctrsm_64, cublasraw.Ztrsm_64}
	trmm32 = [4]func(hnd, sdm, flm, opr, dgt, int32, int32, uintptr, uintptr, int32, uintptr, int32, uintptr, int32) error{
		cublasraw.Strmm, cublasraw.Dtrmm, cublasraw.Ctrmm, cublasraw.Ztrmm}
	trmm64 = [4]func(hnd, sdm, flm, opr, dgt, int64, int64, uintptr, uintptr, int64, uintptr, int64, uintptr, int64) error{
		cublasraw.Strmm_64, cublasraw.Dtrmm_64, cublasraw.Ctrmm_64, cublasraw.Ztrmm_64}
)

// Gemm computes C = alpha·op(A)·op(B) + beta·C (cublas<t>gemm), on h's
// stream: op(A) is m×k, op(B) k×n and C m×n, with any layouts (see
// Layout); C's Op must be NoTrans. C must not overlap A or B. With k = 0,
// C is only scaled by beta; with beta 0, C is not read (it may hold
// anything, NaN included).
func Gemm[T Float](h *Handle, alpha T, a, b Matrix[T], beta T, c Matrix[T]) error {
	if ok, err := gemmQuick(h, alpha, &a, &b, beta, &c); ok {
		return err
	}
	return gemmGeneral(h, alpha, a, b, beta, c)
}

// gemmGeneral is Gemm for every case (gemmQuick takes the common one).
func gemmGeneral[T Float](h *Handle, alpha T, a, b Matrix[T], beta T, c Matrix[T]) error {
	const op = "Gemm"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	va, vb, vc, pa, pb, pc, err := matrices(&cl, a, b, c)
	if err != nil {
		return cl.fail(err)
	}
	g, err := blasview.Gemm(va, vb, vc)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	if g.Swapped {
		pa, pb = pb, pa
	}
	k := kindOf[T]()
	status := gemmStatus32[k]
	if g.Needs64 {
		status = gemmStatus64[k]
	}
	// One crossing into C: the context's push, cublas<t>gemm (its 32-bit
	// or 64-bit sizes, the same integer arguments) and the clearing.
	return cl.runStep(func(hh cublasraw.Handle) (s ccall.Step, err error) {
		al, be := scalars(cl.st, alpha, beta)
		A, B, C := at[T](pa, g.OffA), at[T](pb, g.OffB), at[T](pc, g.OffC)
		if g.Needs64 {
			s.Fn, err = gemmProc64[k]()
		} else {
			s.Fn, err = gemmProc32[k]()
		}
		s.N = 14
		s.Args = [ccall.SeqArgs]uintptr{uintptr(hh), uintptr(g.TransA), uintptr(g.TransB), uintptr(g.M), uintptr(g.N), uintptr(g.K),
			al, A, uintptr(g.LDA), B, uintptr(g.LDB), be, C, uintptr(g.LDC)}
		return s, err
	}, status)
}

// GemmStridedBatched computes count products C_i = alpha·op(A_i)·op(B_i)
// + beta·C_i (cublas<t>gemmStridedBatched), where X_i is the view x with
// its Offset advanced by i·strideX elements. Every batch of every operand
// is checked against its buffer; C's batches must not overlap each other
// (strideC at least one C's span) nor A's or B's. A stride of 0 uses one A
// or B for every batch.
func GemmStridedBatched[T Float](h *Handle, alpha T, a Matrix[T], strideA int, b Matrix[T], strideB int, beta T, c Matrix[T], strideC int, count int) error {
	const op = "GemmStridedBatched"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	va, vb, vc, pa, pb, pc, err := matrices(&cl, a, b, c)
	if err != nil {
		return cl.fail(err)
	}
	g, err := blasview.GemmStridedBatched(va, vb, vc, int64(strideA), int64(strideB), int64(strideC), int64(count))
	if err != nil {
		return cl.fail(refused(op, err))
	}
	if g.Swapped {
		pa, pb = pb, pa
	}
	k := kindOf[T]()
	return cl.run(queued, func(hh cublasraw.Handle) error {
		al, be := scalars(cl.st, alpha, beta)
		A, B, C := at[T](pa, g.OffA), at[T](pb, g.OffB), at[T](pc, g.OffC)
		if g.Needs64 {
			return strided64[k](hh, g.TransA, g.TransB, g.M, g.N, g.K, al, A, g.LDA, g.StrideA, B, g.LDB, g.StrideB, be, C, g.LDC, g.StrideC, g.Count)
		}
		return strided32[k](hh, g.TransA, g.TransB, i32(g.M), i32(g.N), i32(g.K), al, A, i32(g.LDA), g.StrideA, B, i32(g.LDB), g.StrideB, be, C, i32(g.LDC), g.StrideC, i32(g.Count))
	})
}

// Syrk computes the uplo triangle of C = alpha·op(A)·op(A)ᵀ + beta·C
// (cublas<t>syrk): C is n×n, symmetric, and only its uplo triangle is
// written; op(A) is n×k, A's Op NoTrans or Trans. C must not overlap A.
func Syrk[T Float](h *Handle, uplo Uplo, alpha T, a Matrix[T], beta T, c Matrix[T]) error {
	const op = "Syrk"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	va, pa, err := matrix(&cl, "A", a)
	if err != nil {
		return cl.fail(err)
	}
	vc, pc, err := matrix(&cl, "C", c)
	if err != nil {
		return cl.fail(err)
	}
	g, err := blasview.Syrk(blasview.Uplo(uplo), va, vc)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	k := kindOf[T]()
	return cl.run(queued, func(hh cublasraw.Handle) error {
		al, be := scalars(cl.st, alpha, beta)
		A, C := at[T](pa, g.OffA), at[T](pc, g.OffC)
		if g.Needs64 {
			return syrk64[k](hh, g.Uplo, g.Trans, g.N, g.K, al, A, g.LDA, be, C, g.LDC)
		}
		return syrk32[k](hh, g.Uplo, g.Trans, i32(g.N), i32(g.K), al, A, i32(g.LDA), be, C, i32(g.LDC))
	})
}

// Symm computes C = alpha·A·B + beta·C (side Left) or alpha·B·A + beta·C
// (Right) (cublas<t>symm): A is symmetric, read in its uplo triangle,
// m×m (Left) or n×n (Right) for the m×n C; B is m×n; no operations; B and
// C of one layout. C must not overlap A or B.
func Symm[T Float](h *Handle, side Side, uplo Uplo, alpha T, a, b Matrix[T], beta T, c Matrix[T]) error {
	const op = "Symm"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	va, vb, vc, pa, pb, pc, err := matrices(&cl, a, b, c)
	if err != nil {
		return cl.fail(err)
	}
	g, err := blasview.Symm(blasview.Side(side), blasview.Uplo(uplo), va, vb, vc)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	k := kindOf[T]()
	return cl.run(queued, func(hh cublasraw.Handle) error {
		al, be := scalars(cl.st, alpha, beta)
		A, B, C := at[T](pa, g.OffA), at[T](pb, g.OffB), at[T](pc, g.OffC)
		if g.Needs64 {
			return symm64[k](hh, g.Side, g.Uplo, g.M, g.N, al, A, g.LDA, B, g.LDB, be, C, g.LDC)
		}
		return symm32[k](hh, g.Side, g.Uplo, i32(g.M), i32(g.N), al, A, i32(g.LDA), B, i32(g.LDB), be, C, i32(g.LDC))
	})
}

// Trsm solves op(A)·X = alpha·B (side Left) or X·op(A) = alpha·B (Right)
// for X, which overwrites B (cublas<t>trsm): A is triangular, read in its
// uplo triangle (its diagonal taken as ones when diag is Unit), m×m (Left)
// or n×n (Right) for the m×n B; B's Op must be NoTrans. B must not overlap
// A. A singular A is not detected: the result then holds Inf or NaN.
func Trsm[T Float](h *Handle, side Side, uplo Uplo, diag Diag, alpha T, a, b Matrix[T]) error {
	const op = "Trsm"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	va, pa, err := matrix(&cl, "A", a)
	if err != nil {
		return cl.fail(err)
	}
	vb, pb, err := matrix(&cl, "B", b)
	if err != nil {
		return cl.fail(err)
	}
	g, err := blasview.Trsm(blasview.Side(side), blasview.Uplo(uplo), blasview.Diag(diag), va, vb)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	k := kindOf[T]()
	return cl.run(queued, func(hh cublasraw.Handle) error {
		var zero T
		al, _ := scalars(cl.st, alpha, zero)
		A, B := at[T](pa, g.OffA), at[T](pb, g.OffB)
		if g.Needs64 {
			return trsm64[k](hh, g.Side, g.Uplo, g.Trans, g.Diag, g.M, g.N, al, A, g.LDA, B, g.LDB)
		}
		return trsm32[k](hh, g.Side, g.Uplo, g.Trans, g.Diag, i32(g.M), i32(g.N), al, A, i32(g.LDA), B, i32(g.LDB))
	})
}

// Trmm computes C = alpha·op(A)·B (side Left) or C = alpha·B·op(A)
// (Right) (cuBLAS's out-of-place cublas<t>trmm): A triangular as for
// Trsm; B and C m×n, no operation, one layout. C may be B itself (the
// same view: in place); otherwise C must not overlap B, and never A.
func Trmm[T Float](h *Handle, side Side, uplo Uplo, diag Diag, alpha T, a, b, c Matrix[T]) error {
	const op = "Trmm"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	va, vb, vc, pa, pb, pc, err := matrices(&cl, a, b, c)
	if err != nil {
		return cl.fail(err)
	}
	g, err := blasview.Trmm(blasview.Side(side), blasview.Uplo(uplo), blasview.Diag(diag), va, vb, vc)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	k := kindOf[T]()
	return cl.run(queued, func(hh cublasraw.Handle) error {
		var zero T
		al, _ := scalars(cl.st, alpha, zero)
		A, B, C := at[T](pa, g.OffA), at[T](pb, g.OffB), at[T](pc, g.OffC)
		if g.Needs64 {
			return trmm64[k](hh, g.Side, g.Uplo, g.Trans, g.Diag, g.M, g.N, al, A, g.LDA, B, g.LDB, C, g.LDC)
		}
		return trmm32[k](hh, g.Side, g.Uplo, g.Trans, g.Diag, i32(g.M), i32(g.N), al, A, i32(g.LDA), B, i32(g.LDB), C, i32(g.LDC))
	})
}
