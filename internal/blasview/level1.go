package blasview

// VecArgs are the arguments of a level-1 call, in cuBLAS's order: n, x and
// its increment, y and its increment (where the call has y), and the
// element offset of the result in device memory (where one was given).
type VecArgs struct {
	N          int64
	OffX, IncX int64
	OffY, IncY int64
	OffResult  int64
	DevResult  bool // the result goes to device memory at OffResult
	Needs64    bool
}

// identical reports whether x and y are the same vector: the same bytes,
// element k of each at the same place.
func identical(x, y Vector, vx, vy view) bool {
	return same(vx.sp, vy.sp) && ((x.Inc > 0) == (y.Inc > 0) || x.N <= 1)
}

// pair checks two vectors of one length for a call on x and y.
func pair(fn string, x, y Vector) (VecArgs, view, view, *Error) {
	vx, err := checkVector(fn, "x", x, false)
	if err != nil {
		return VecArgs{}, view{}, view{}, err
	}
	vy, err := checkVector(fn, "y", y, false)
	if err != nil {
		return VecArgs{}, view{}, view{}, err
	}
	if x.N != y.N {
		return VecArgs{}, view{}, view{}, refuse(ErrShape, fn, "y", "length %d, but x has %d", y.N, x.N)
	}
	return VecArgs{N: x.N, OffX: vx.off, IncX: x.Inc, OffY: vy.off, IncY: y.Inc, Needs64: vx.big || vy.big}, vx, vy, nil
}

// written checks an output y against input x: y may be x itself (each
// element then depends on itself alone) or apart from it, never partly
// over it (ErrAlias).
func written(fn string, x, y Vector, vx, vy view) *Error {
	if !identical(x, y, vx, vy) && overlaps(vx.sp, vy.sp) {
		return refuse(ErrAlias, fn, "y", "y overlaps x in memory without being x")
	}
	return nil
}

// result checks a reduction's device result r (nil: the result goes to the
// host): one element, in bounds, apart from the inputs (ErrAlias).
func result(fn string, a *VecArgs, r *Vector, inputs ...view) *Error {
	if r == nil {
		return nil
	}
	rv := *r
	if rv.N != 1 {
		return refuse(ErrShape, fn, "result", "length %d: a result is one element", rv.N)
	}
	vr, err := checkVector(fn, "result", rv, false)
	if err != nil {
		return err
	}
	for _, in := range inputs {
		if overlaps(vr.sp, in.sp) {
			return refuse(ErrAlias, fn, "result", "the result overlaps an input in memory")
		}
	}
	a.OffResult, a.DevResult = vr.off, true
	return nil
}

// Axpy checks y = alpha·x + y for cublas<t>axpy: one length; increments
// nonzero, negative as BLAS defines; y is x or apart from it.
func Axpy(x, y Vector) (VecArgs, error) {
	const fn = "Axpy"
	a, vx, vy, err := pair(fn, x, y)
	if err == nil {
		err = written(fn, x, y, vx, vy)
	}
	if err != nil {
		return VecArgs{}, err
	}
	return a, nil
}

// Copy checks y = x for cublas<t>copy: as Axpy.
func Copy(x, y Vector) (VecArgs, error) {
	const fn = "Copy"
	a, vx, vy, err := pair(fn, x, y)
	if err == nil {
		err = written(fn, x, y, vx, vy)
	}
	if err != nil {
		return VecArgs{}, err
	}
	return a, nil
}

// Swap checks x, y = y, x for cublas<t>swap: as Axpy (both are written).
func Swap(x, y Vector) (VecArgs, error) {
	const fn = "Swap"
	a, vx, vy, err := pair(fn, x, y)
	if err == nil {
		err = written(fn, x, y, vx, vy)
	}
	if err != nil {
		return VecArgs{}, err
	}
	return a, nil
}

// Dot checks x·y for cublas<t>dot (dotu, dotc): one length; x and y are
// read only and may overlap; a device result r (nil: host) must be apart
// from both.
func Dot(x, y Vector, r *Vector) (VecArgs, error) {
	const fn = "Dot"
	a, vx, vy, err := pair(fn, x, y)
	if err == nil {
		err = result(fn, &a, r, vx, vy)
	}
	if err != nil {
		return VecArgs{}, err
	}
	return a, nil
}

// single checks the one vector of Scal, Nrm2, Asum and Iamax. Their
// reference BLAS versions return without work for an increment <= 0, so a
// negative one is refused rather than silently ignored (ErrShape).
func single(fn string, x Vector, r *Vector) (VecArgs, error) {
	vx, err := checkVector(fn, "x", x, true)
	if err != nil {
		return VecArgs{}, err
	}
	a := VecArgs{N: x.N, OffX: vx.off, IncX: x.Inc, Needs64: vx.big}
	if err := result(fn, &a, r, vx); err != nil {
		return VecArgs{}, err
	}
	return a, nil
}

// Scal checks x = alpha·x for cublas<t>scal: increment > 0.
func Scal(x Vector) (VecArgs, error) { return single("Scal", x, nil) }

// Nrm2 checks ‖x‖₂ for cublas<t>nrm2: increment > 0; a device result r
// (nil: host) apart from x.
func Nrm2(x Vector, r *Vector) (VecArgs, error) { return single("Nrm2", x, r) }

// Asum checks Σ|x_k| for cublas<t>asum: as Nrm2.
func Asum(x Vector, r *Vector) (VecArgs, error) { return single("Asum", x, r) }

// Iamax checks the index of the largest |x_k| for cublasI<t>amax: as Nrm2
// (cuBLAS returns a 1-based index; the result is an int, Elem 4, or an
// int64 for the _64 call).
func Iamax(x Vector, r *Vector) (VecArgs, error) { return single("Iamax", x, r) }
