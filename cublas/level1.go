package cublas

import (
	"unsafe"

	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
)

type (
	vec32 = func(hnd, int32, uintptr, int32, uintptr, int32) error          // copy, swap
	vec64 = func(hnd, int64, uintptr, int64, uintptr, int64) error          // their _64
	ax32  = func(hnd, int32, uintptr, uintptr, int32, uintptr, int32) error // axpy
	ax64  = func(hnd, int64, uintptr, uintptr, int64, uintptr, int64) error // its _64
	red32 = func(hnd, int32, uintptr, int32, uintptr) error                 // nrm2, asum, iamax
	red64 = func(hnd, int64, uintptr, int64, uintptr) error                 // their _64
	dot32 = func(hnd, int32, uintptr, int32, uintptr, int32, uintptr) error // dot
	dot64 = func(hnd, int64, uintptr, int64, uintptr, int64, uintptr) error // its _64
	sc32  = func(hnd, int32, uintptr, uintptr, int32) error                 // scal
	sc64  = func(hnd, int64, uintptr, uintptr, int64) error                 // its _64
)

var (
	axpy32  = [4]ax32{cublasraw.Saxpy, cublasraw.Daxpy, cublasraw.Caxpy, cublasraw.Zaxpy}
	axpy64  = [4]ax64{cublasraw.Saxpy_64, cublasraw.Daxpy_64, cublasraw.Caxpy_64, cublasraw.Zaxpy_64}
	scal32  = [4]sc32{cublasraw.Sscal, cublasraw.Dscal, cublasraw.Cscal, cublasraw.Zscal}
	scal64  = [4]sc64{cublasraw.Sscal_64, cublasraw.Dscal_64, cublasraw.Cscal_64, cublasraw.Zscal_64}
	copy32  = [4]vec32{cublasraw.Scopy, cublasraw.Dcopy, cublasraw.Ccopy, cublasraw.Zcopy}
	copy64  = [4]vec64{cublasraw.Scopy_64, cublasraw.Dcopy_64, cublasraw.Ccopy_64, cublasraw.Zcopy_64}
	swap32  = [4]vec32{cublasraw.Sswap, cublasraw.Dswap, cublasraw.Cswap, cublasraw.Zswap}
	swap64  = [4]vec64{cublasraw.Sswap_64, cublasraw.Dswap_64, cublasraw.Cswap_64, cublasraw.Zswap_64}
	dots32  = [6]dot32{cublasraw.Sdot, cublasraw.Ddot, cublasraw.Cdotu, cublasraw.Zdotu, cublasraw.Cdotc, cublasraw.Zdotc}
	dots64  = [6]dot64{cublasraw.Sdot_64, cublasraw.Ddot_64, cublasraw.Cdotu_64, cublasraw.Zdotu_64, cublasraw.Cdotc_64, cublasraw.Zdotc_64}
	nrm232  = [4]red32{cublasraw.Snrm2, cublasraw.Dnrm2, cublasraw.Scnrm2, cublasraw.Dznrm2}
	nrm264  = [4]red64{cublasraw.Snrm2_64, cublasraw.Dnrm2_64, cublasraw.Scnrm2_64, cublasraw.Dznrm2_64}
	asum32  = [4]red32{cublasraw.Sasum, cublasraw.Dasum, cublasraw.Scasum, cublasraw.Dzasum}
	asum64  = [4]red64{cublasraw.Sasum_64, cublasraw.Dasum_64, cublasraw.Scasum_64, cublasraw.Dzasum_64}
	iamax32 = [4]red32{cublasraw.Isamax, cublasraw.Idamax, cublasraw.Icamax, cublasraw.Izamax}
	iamax64 = [4]red64{cublasraw.Isamax_64, cublasraw.Idamax_64, cublasraw.Icamax_64, cublasraw.Izamax_64}
)

// Axpy computes y = alpha·x + y (cublas<t>axpy): x and y of one length;
// y is x itself or apart from it.
func Axpy[T Float](h *Handle, alpha T, x, y Vector[T]) error {
	return pairOp("Axpy", h, x, y, blasview.Axpy, func(hh cublasraw.Handle, st *handleState, k kind, a blasview.VecArgs, X, Y uintptr) error {
		var zero T
		al, _ := scalars(st, alpha, zero)
		if a.Needs64 {
			return axpy64[k](hh, a.N, al, X, a.IncX, Y, a.IncY)
		}
		return axpy32[k](hh, i32(a.N), al, X, i32(a.IncX), Y, i32(a.IncY))
	})
}

// Copy copies x into y (cublas<t>copy): one length; y is x itself or apart
// from it.
func Copy[T Float](h *Handle, x, y Vector[T]) error {
	return pairOp("Copy", h, x, y, blasview.Copy, func(hh cublasraw.Handle, _ *handleState, k kind, a blasview.VecArgs, X, Y uintptr) error {
		if a.Needs64 {
			return copy64[k](hh, a.N, X, a.IncX, Y, a.IncY)
		}
		return copy32[k](hh, i32(a.N), X, i32(a.IncX), Y, i32(a.IncY))
	})
}

// Swap exchanges x and y (cublas<t>swap): one length; y is x itself or
// apart from it.
func Swap[T Float](h *Handle, x, y Vector[T]) error {
	return pairOp("Swap", h, x, y, blasview.Swap, func(hh cublasraw.Handle, _ *handleState, k kind, a blasview.VecArgs, X, Y uintptr) error {
		if a.Needs64 {
			return swap64[k](hh, a.N, X, a.IncX, Y, a.IncY)
		}
		return swap32[k](hh, i32(a.N), X, i32(a.IncX), Y, i32(a.IncY))
	})
}

// pairOp makes a routine on two vectors x and y.
func pairOp[T Float](op string, h *Handle, x, y Vector[T], check func(x, y blasview.Vector) (blasview.VecArgs, error),
	f func(hh cublasraw.Handle, st *handleState, k kind, a blasview.VecArgs, X, Y uintptr) error) error {
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
	a, err := check(vx, vy)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	k := kindOf[T]()
	return cl.run(queued, func(hh cublasraw.Handle) error {
		return f(hh, cl.st, k, a, at[T](px, a.OffX), at[T](py, a.OffY))
	})
}

// Scal computes x = alpha·x (cublas<t>scal); x's increment must be
// positive.
func Scal[T Float](h *Handle, alpha T, x Vector[T]) error {
	const op = "Scal"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	vx, px, err := vector(&cl, "x", x)
	if err != nil {
		return cl.fail(err)
	}
	a, err := blasview.Scal(vx)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	k := kindOf[T]()
	return cl.run(queued, func(hh cublasraw.Handle) error {
		var zero T
		al, _ := scalars(cl.st, alpha, zero)
		X := at[T](px, a.OffX)
		if a.Needs64 {
			return scal64[k](hh, a.N, al, X, a.IncX)
		}
		return scal32[k](hh, i32(a.N), al, X, i32(a.IncX))
	})
}

// Dot returns x·y = Σ x_k·y_k (cublas<t>dot; for complex types the
// unconjugated dotu), waiting for the stream to compute it. So it cannot be
// captured: on a stream being captured it returns an error matching
// driver.ErrStreamCaptureUnsupported before cuBLAS is called, and the
// capture goes on (use DotTo there).
func Dot[T Float](h *Handle, x, y Vector[T]) (T, error) {
	var r T
	err := dot("Dot", h, x, y, nil, false, unsafe.Pointer(&r))
	return r, err
}

// Dotc returns xᴴ·y = Σ conj(x_k)·y_k (cublas<t>dotc); for real types it
// is Dot.
func Dotc[T Float](h *Handle, x, y Vector[T]) (T, error) {
	var r T
	err := dot("Dotc", h, x, y, nil, isComplex[T](), unsafe.Pointer(&r))
	return r, err
}

// DotTo writes x·y (as Dot) to r, in stream order: nothing waits, and it
// can be captured. r is a view of one element (r.N 1; its buffer may be
// longer; another N is ErrShape), apart from x and y in memory (ErrAlias).
func DotTo[T Float](h *Handle, x, y, r Vector[T]) error {
	return dot("DotTo", h, x, y, &r, false, nil)
}

// DotcTo writes xᴴ·y (as Dotc) to r, as DotTo.
func DotcTo[T Float](h *Handle, x, y, r Vector[T]) error {
	return dot("DotcTo", h, x, y, &r, isComplex[T](), nil)
}

// dot makes Dot and its forms: the result to host memory at out, or to r.
func dot[T Float](op string, h *Handle, x, y Vector[T], r *Vector[T], conj bool, out unsafe.Pointer) error {
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
	var vr *blasview.Vector
	var pr uintptr
	if r != nil {
		v, p, err := vector(&cl, "result", *r)
		if err != nil {
			return cl.fail(err)
		}
		vr, pr = &v, p
	}
	a, err := blasview.Dot(vx, vy, vr)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	k := int(kindOf[T]())
	if conj {
		k += 2
	}
	return cl.reduction(a, out, sizeOf[T](), at[T](pr, a.OffResult), func(hh cublasraw.Handle, res uintptr) error {
		X, Y := at[T](px, a.OffX), at[T](py, a.OffY)
		if a.Needs64 {
			return dots64[k](hh, a.N, X, a.IncX, Y, a.IncY, res)
		}
		return dots32[k](hh, i32(a.N), X, i32(a.IncX), Y, i32(a.IncY), res)
	})
}

// reduction runs a reduction f: to the device at dev when a says so (with
// the pointer mode device for the call), otherwise to the handle's host
// result, copied (size bytes) to out once cuBLAS returned it.
func (c *call) reduction(a blasview.VecArgs, out unsafe.Pointer, size uintptr, dev uintptr, f func(hh cublasraw.Handle, res uintptr) error) error {
	if a.DevResult {
		return c.run(queued, func(hh cublasraw.Handle) error {
			if err := cublasraw.SetPointerMode(hh, cublasraw.CUBLAS_POINTER_MODE_DEVICE); err != nil {
				return err
			}
			err := f(hh, dev)
			if perr := cublasraw.SetPointerMode(hh, cublasraw.CUBLAS_POINTER_MODE_HOST); err == nil {
				err = perr
			}
			return err
		})
	}
	st := c.st
	return c.run(hostResult, func(hh cublasraw.Handle) error {
		res := st.slot(slotResult)
		*(*[16]byte)(res) = [16]byte{}
		if err := f(hh, uintptr(res)); err != nil {
			return err
		}
		copy(unsafe.Slice((*byte)(out), size), unsafe.Slice((*byte)(res), size))
		return nil
	})
}

// realKind reports whether R is the real type of T's kind (float32 for
// float32 and complex64, float64 for the others).
func realKind[R Real](k kind) bool {
	return (sizeOf[R]() == 4) == (k == kS || k == kC)
}

// Nrm2 returns the Euclidean norm of x (cublas<t>nrm2), waiting for the
// stream to compute it: inside a capture it is refused as Dot is (use
// Nrm2To there). x's increment must be positive (a negative one is
// ErrShape: reference BLAS would silently return 0).
func Nrm2[T Float](h *Handle, x Vector[T]) (float64, error) {
	return realReduction("Nrm2", h, x, nrm232, nrm264)
}

// Asum returns Σ|x_k| (for complex types Σ|re|+|im|, as BLAS defines it)
// (cublas<t>asum), as Nrm2.
func Asum[T Float](h *Handle, x Vector[T]) (float64, error) {
	return realReduction("Asum", h, x, asum32, asum64)
}

// Nrm2To writes the norm of x (as Nrm2) to r, in stream order: it can be
// captured. r is one element (as DotTo's) of x's real type: float32 for
// float32 and complex64, float64 for float64 and complex128; another R is
// refused with an error matching driver.ErrInvalidArgument.
func Nrm2To[T Float, R Real](h *Handle, x Vector[T], r Vector[R]) error {
	return realReductionTo("Nrm2To", h, x, r, nrm232, nrm264)
}

// AsumTo writes Σ|x_k| (as Asum) to r, as Nrm2To.
func AsumTo[T Float, R Real](h *Handle, x Vector[T], r Vector[R]) error {
	return realReductionTo("AsumTo", h, x, r, asum32, asum64)
}

func realReduction[T Float](op string, h *Handle, x Vector[T], f32 [4]red32, f64 [4]red64) (float64, error) {
	k := kindOf[T]()
	if k == kS || k == kC {
		var r float32
		err := single(op, h, x, (*Vector[float32])(nil), unsafe.Pointer(&r), nil, f32, f64)
		return float64(r), err
	}
	var r float64
	err := single(op, h, x, (*Vector[float64])(nil), unsafe.Pointer(&r), nil, f32, f64)
	return r, err
}

func realReductionTo[T Float, R Real](op string, h *Handle, x Vector[T], r Vector[R], f32 [4]red32, f64 [4]red64) error {
	if !realKind[R](kindOf[T]()) {
		return invalid(op, "a result of %d bytes for elements of %d: it must be the elements' real type", sizeOf[R](), sizeOf[T]())
	}
	return single(op, h, x, &r, nil, nil, f32, f64)
}

// Iamax returns the index (from 0) of the first element of x with the
// largest |x_k| (for complex types |re|+|im|) (cublasI<t>amax), waiting
// for the stream: inside a capture it is refused as Dot is (use IamaxTo
// there, whose index counts from 1, as cuBLAS writes it). x's increment
// must be positive (ErrShape otherwise). For an empty x it returns -1.
func Iamax[T Float](h *Handle, x Vector[T]) (int, error) {
	var r int64
	var wide bool
	err := single("Iamax", h, x, (*Vector[int32])(nil), unsafe.Pointer(&r), &wide, iamax32, iamax64)
	if err != nil {
		return 0, err
	}
	return iamaxIndex(r, wide), nil
}

// iamaxIndex is Iamax's 0-based index from what cuBLAS wrote into the
// zeroed int64 r: an int by the 32-bit call, an int64 by the 64-bit one
// (wide).
func iamaxIndex(r int64, wide bool) int {
	// cuBLAS's index counts from 1 (0 for an empty vector). The int the
	// 32-bit call wrote is r's low half (little-endian); the 64-bit call's
	// int64 is r whole, and may lie past 2^31.
	if !wide {
		r = int64(int32(r))
	}
	return int(r) - 1
}

// IamaxTo writes the index of the largest |x_k| (as Iamax) to r, one
// int32 of device memory, in stream order: it can be captured. The index
// written counts from 1, as cuBLAS writes it (0 for an empty x). x's
// length and increment must be below 2^31.
func IamaxTo[T Float](h *Handle, x Vector[T], r Vector[int32]) error {
	return single("IamaxTo", h, x, &r, nil, nil, iamax32, iamax64)
}

// single makes a reduction of x: to the device at r, or to out; wide, if
// not nil, is set when the 64-bit call was chosen.
func single[T Float, R Element](op string, h *Handle, x Vector[T], r *Vector[R], out unsafe.Pointer, wide *bool, f32 [4]red32, f64 [4]red64) error {
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	vx, px, err := vector(&cl, "x", x)
	if err != nil {
		return cl.fail(err)
	}
	var vr *blasview.Vector
	var pr uintptr
	if r != nil {
		v, p, err := vector(&cl, "result", *r)
		if err != nil {
			return cl.fail(err)
		}
		vr, pr = &v, p
	}
	var a blasview.VecArgs
	switch op {
	case "Nrm2", "Nrm2To":
		a, err = blasview.Nrm2(vx, vr)
	case "Asum", "AsumTo":
		a, err = blasview.Asum(vx, vr)
	default:
		a, err = blasview.Iamax(vx, vr)
	}
	if err != nil {
		return cl.fail(refused(op, err))
	}
	if a.Needs64 && r != nil && op == "IamaxTo" {
		return cl.fail(invalid(op, "x: length %d or increment %d needs cuBLAS's 64-bit call, whose int64 index would not fit the int32 result", x.N, x.Inc))
	}
	if wide != nil {
		*wide = a.Needs64
	}
	k := kindOf[T]()
	size := sizeOf[R]()
	if op == "Iamax" {
		size = 8
	}
	return cl.reduction(a, out, size, at[R](pr, a.OffResult), func(hh cublasraw.Handle, res uintptr) error {
		X := at[T](px, a.OffX)
		if a.Needs64 {
			return f64[k](hh, a.N, X, a.IncX, res)
		}
		return f32[k](hh, i32(a.N), X, i32(a.IncX), res)
	})
}
