package cublas

import (
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
)

var (
	gemv32 = [4]func(hnd, opr, int32, int32, uintptr, uintptr, int32, uintptr, int32, uintptr, uintptr, int32) error{
		cublasraw.Sgemv, cublasraw.Dgemv, cublasraw.Cgemv, cublasraw.Zgemv}
	gemv64 = [4]func(hnd, opr, int64, int64, uintptr, uintptr, int64, uintptr, int64, uintptr, uintptr, int64) error{
		cublasraw.Sgemv_64, cublasraw.Dgemv_64, cublasraw.Cgemv_64, cublasraw.Zgemv_64}
	// ger: S, D, C (geru), Z (geru), then C (gerc) and Z (gerc) at 4 and 5.
	ger32 = [6]func(hnd, int32, int32, uintptr, uintptr, int32, uintptr, int32, uintptr, int32) error{
		cublasraw.Sger, cublasraw.Dger, cublasraw.Cgeru, cublasraw.Zgeru, cublasraw.Cgerc, cublasraw.Zgerc}
	ger64 = [6]func(hnd, int64, int64, uintptr, uintptr, int64, uintptr, int64, uintptr, int64) error{
		cublasraw.Sger_64, cublasraw.Dger_64, cublasraw.Cgeru_64, cublasraw.Zgeru_64, cublasraw.Cgerc_64, cublasraw.Zgerc_64}
	trsv32 = [4]func(hnd, flm, opr, dgt, int32, uintptr, int32, uintptr, int32) error{
		cublasraw.Strsv, cublasraw.Dtrsv, cublasraw.Ctrsv, cublasraw.Ztrsv}
	trsv64 = [4]func(hnd, flm, opr, dgt, int64, uintptr, int64, uintptr, int64) error{
		cublasraw.Strsv_64, cublasraw.Dtrsv_64, cublasraw.Ctrsv_64, cublasraw.Ztrsv_64}
)

// Gemv computes y = alpha·op(A)·x + beta·y (cublas<t>gemv): x has op(A)'s
// columns, y its rows. y must not overlap A or x. With beta 0, y is not
// read.
func Gemv[T Float](h *Handle, alpha T, a Matrix[T], x Vector[T], beta T, y Vector[T]) error {
	const op = "Gemv"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	va, pa, err := matrix(&cl, "A", a)
	if err != nil {
		return cl.fail(err)
	}
	vx, px, err := vector(&cl, "x", x)
	if err != nil {
		return cl.fail(err)
	}
	vy, py, err := vector(&cl, "y", y)
	if err != nil {
		return cl.fail(err)
	}
	g, err := blasview.Gemv(va, vx, vy)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	k := kindOf[T]()
	return cl.run(queued, func(hh cublasraw.Handle) error {
		al, be := scalars(cl.st, alpha, beta)
		A, X, Y := at[T](pa, g.OffA), at[T](px, g.OffX), at[T](py, g.OffY)
		if g.Needs64 {
			return gemv64[k](hh, g.Trans, g.M, g.N, al, A, g.LDA, X, g.IncX, be, Y, g.IncY)
		}
		return gemv32[k](hh, g.Trans, i32(g.M), i32(g.N), al, A, i32(g.LDA), X, i32(g.IncX), be, Y, i32(g.IncY))
	})
}

// Ger computes A += alpha·x·yᵀ (cublas<t>ger; for complex types the
// unconjugated geru): A is m×n with no operation, x has m elements, y n.
// A must not overlap x or y.
func Ger[T Float](h *Handle, alpha T, x, y Vector[T], a Matrix[T]) error {
	return ger("Ger", h, alpha, x, y, a, false)
}

// Gerc computes A += alpha·x·yᴴ (cublas<t>gerc); for real types it is Ger.
// A row-major A would need the conjugate on x, which cuBLAS lacks: refused
// (ErrShape) for complex types.
func Gerc[T Float](h *Handle, alpha T, x, y Vector[T], a Matrix[T]) error {
	return ger("Gerc", h, alpha, x, y, a, isComplex[T]())
}

func ger[T Float](op string, h *Handle, alpha T, x, y Vector[T], a Matrix[T], conj bool) error {
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	vx, px, err := vector(&cl, "x", x)
	if err != nil {
		return cl.fail(err)
	}
	vy, py, err := vector(&cl, "y", y)
	if err != nil {
		return cl.fail(err)
	}
	va, pa, err := matrix(&cl, "A", a)
	if err != nil {
		return cl.fail(err)
	}
	g, err := blasview.Ger(va, vx, vy, conj)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	if g.Swapped {
		px, py = py, px
	}
	k := int(kindOf[T]())
	if conj {
		k += 2 // C and Z gerc
	}
	return cl.run(queued, func(hh cublasraw.Handle) error {
		var zero T
		al, _ := scalars(cl.st, alpha, zero)
		X, Y, A := at[T](px, g.OffX), at[T](py, g.OffY), at[T](pa, g.OffA)
		if g.Needs64 {
			return ger64[k](hh, g.M, g.N, al, X, g.IncX, Y, g.IncY, A, g.LDA)
		}
		return ger32[k](hh, i32(g.M), i32(g.N), al, X, i32(g.IncX), Y, i32(g.IncY), A, i32(g.LDA))
	})
}

// Trsv solves op(A)·x = b for x, which overwrites b (cublas<t>trsv): A is
// n×n triangular, read in its uplo triangle (diagonal ones when diag is
// Unit); x has n elements and must not overlap A.
func Trsv[T Float](h *Handle, uplo Uplo, diag Diag, a Matrix[T], x Vector[T]) error {
	const op = "Trsv"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	va, pa, err := matrix(&cl, "A", a)
	if err != nil {
		return cl.fail(err)
	}
	vx, px, err := vector(&cl, "x", x)
	if err != nil {
		return cl.fail(err)
	}
	g, err := blasview.Trsv(va, blasview.Uplo(uplo), blasview.Diag(diag), vx)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	k := kindOf[T]()
	return cl.run(queued, func(hh cublasraw.Handle) error {
		A, X := at[T](pa, g.OffA), at[T](px, g.OffX)
		if g.Needs64 {
			return trsv64[k](hh, g.Uplo, g.Trans, g.Diag, g.N, A, g.LDA, X, g.IncX)
		}
		return trsv32[k](hh, g.Uplo, g.Trans, g.Diag, i32(g.N), A, i32(g.LDA), X, i32(g.IncX))
	})
}
