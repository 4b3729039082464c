package blasview

import "github.com/purecuda/cuda/internal/cublasraw"

// TriArgs are the arguments of cublas<t>trsm and cublas<t>trmm, in their
// order; M and N are the result's stored rows and columns. Trsm uses no C:
// its LDC and OffC are 0.
type TriArgs struct {
	Side       cublasraw.SideMode
	Uplo       cublasraw.FillMode
	Trans      cublasraw.Operation
	Diag       cublasraw.DiagType
	M, N       int64
	LDA, OffA  int64
	LDB, OffB  int64
	LDC, OffC  int64
	Needs64    bool
	InPlaceTrm bool // Trmm: C is B (cuBLAS's in-place form)
}

// squareFor checks that A is the square that multiplies the m×n result r
// on side (m×m on the Left, n×n on the Right).
func squareFor(fn string, a, r Matrix, rname string, side Side) *Error {
	if a.Rows != a.Cols {
		return refuse(ErrShape, fn, "A", "%d×%d is not square", a.Rows, a.Cols)
	}
	want, dim := r.Rows, "rows"
	if side == Right {
		want, dim = r.Cols, "columns"
	}
	if a.Rows != want {
		return refuse(ErrShape, fn, "A", "%d×%d, but %s has %d %s", a.Rows, a.Cols, rname, want, dim)
	}
	return nil
}

// triangular checks and maps the A of a Trsm or Trmm whose result r has
// r's layout: side flips when r is row-major (the equation is transposed),
// A's triangle flips when A is row-major, its operation when its layout
// differs from r's.
func triangular(fn string, side Side, uplo Uplo, diag Diag, a, r Matrix, rname string) (TriArgs, view, view, *Error) {
	if err := checkEnums(fn, uplo, side, diag); err != nil {
		return TriArgs{}, view{}, view{}, err
	}
	va, err := checkMatrix(fn, "A", &a)
	if err != nil {
		return TriArgs{}, view{}, view{}, err
	}
	vr, err := checkMatrix(fn, rname, &r)
	if err != nil {
		return TriArgs{}, view{}, view{}, err
	}
	if r.Op != NoTrans {
		return TriArgs{}, view{}, view{}, refuse(ErrShape, fn, rname, "takes no operation (have %d)", r.Op)
	}
	if err := squareFor(fn, a, r, rname, side); err != nil {
		return TriArgs{}, view{}, view{}, err
	}
	op, err := mapOp(fn, "A", &a, r.Layout)
	if err != nil {
		return TriArgs{}, view{}, view{}, err
	}
	m, n := r.Stored()
	return TriArgs{
		Side: rawSide(side, r.Layout), Uplo: rawUplo(uplo, a.Layout), Trans: op.raw(), Diag: rawDiag(diag),
		M: m, N: n, LDA: a.LD, OffA: va.off, Needs64: va.big || vr.big,
	}, va, vr, nil
}

// Trsm checks op(A)·X = alpha·B (side Left) or X·op(A) = alpha·B (Right),
// X overwriting B, for cublas<t>trsm: B is m×n with no operation, A the
// m×m (Left) or n×n (Right) triangle in uplo (ErrShape). Any layouts: a
// row-major B transposes the equation (the side flips, M and N are B's
// stored dimensions), a row-major A flips its triangle, and A's operation
// is transposed when its layout differs from B's (a conjugate transpose
// then is refused). B must not overlap A (ErrAlias).
func Trsm(side Side, uplo Uplo, diag Diag, a, b Matrix) (TriArgs, error) {
	const fn = "Trsm"
	t, va, vb, err := triangular(fn, side, uplo, diag, a, b, "B")
	if err != nil {
		return TriArgs{}, err
	}
	if overlaps(vb.sp, va.sp) {
		return TriArgs{}, refuse(ErrAlias, fn, "B", "B overlaps A in memory")
	}
	t.LDB, t.OffB = b.LD, vb.off
	return t, nil
}

// Trmm checks C = alpha·op(A)·B (Left) or C = alpha·B·op(A) (Right) for
// cuBLAS's out-of-place cublas<t>trmm: B and C are m×n with no operation
// and one layout (cuBLAS cannot transpose B), A as for Trsm. C may be B
// itself, the same bytes with the same leading dimension (cuBLAS's
// in-place form, InPlaceTrm); otherwise C must not overlap B, and never A
// (ErrAlias).
func Trmm(side Side, uplo Uplo, diag Diag, a, b, c Matrix) (TriArgs, error) {
	const fn = "Trmm"
	t, va, vc, err := triangular(fn, side, uplo, diag, a, c, "C")
	if err != nil {
		return TriArgs{}, err
	}
	vb, err := checkMatrix(fn, "B", &b)
	if err != nil {
		return TriArgs{}, err
	}
	if err := sameShape(fn, b, c); err != nil {
		return TriArgs{}, err
	}
	if overlaps(vc.sp, va.sp) {
		return TriArgs{}, refuse(ErrAlias, fn, "C", "C overlaps A in memory")
	}
	inPlace := same(vb.sp, vc.sp) && b.LD == c.LD
	if !inPlace && overlaps(vc.sp, vb.sp) {
		return TriArgs{}, refuse(ErrAlias, fn, "C", "C overlaps B in memory without being B")
	}
	t.LDB, t.OffB, t.LDC, t.OffC = b.LD, vb.off, c.LD, vc.off
	t.InPlaceTrm = inPlace && !vc.empty
	t.Needs64 = t.Needs64 || vb.big
	return t, nil
}

// sameShape checks that B, an operand without operation beside the result
// C, has C's shape and layout.
func sameShape(fn string, b, c Matrix) *Error {
	switch {
	case b.Op != NoTrans:
		return refuse(ErrShape, fn, "B", "takes no operation (have %d)", b.Op)
	case b.Layout != c.Layout:
		return refuse(ErrShape, fn, "B", "B is %s but C is %s: cuBLAS cannot transpose B here", layoutName(b.Layout), layoutName(c.Layout))
	case b.Rows != c.Rows:
		return refuse(ErrShape, fn, "B", "B has %d rows, C %d", b.Rows, c.Rows)
	case b.Cols != c.Cols:
		return refuse(ErrShape, fn, "B", "B has %d columns, C %d", b.Cols, c.Cols)
	}
	return nil
}

// SymmArgs are the arguments of cublas<t>symm, in its order; M and N are
// C's stored rows and columns.
type SymmArgs struct {
	Side      cublasraw.SideMode
	Uplo      cublasraw.FillMode
	M, N      int64
	LDA, OffA int64
	LDB, OffB int64
	LDC, OffC int64
	Needs64   bool
}

// Symm checks C = alpha·A·B + beta·C (Left) or alpha·B·A + beta·C (Right)
// for cublas<t>symm: A symmetric, read in uplo, m×m or n×n for the m×n C;
// B m×n; no operations; B and C of one layout (ErrShape). A row-major C
// transposes the equation (the side flips; Aᵀ = A), a row-major A flips
// its triangle. C must not overlap A or B (ErrAlias).
func Symm(side Side, uplo Uplo, a, b, c Matrix) (SymmArgs, error) {
	const fn = "Symm"
	if err := checkEnums(fn, uplo, side, NonUnit); err != nil {
		return SymmArgs{}, err
	}
	va, err := checkMatrix(fn, "A", &a)
	if err != nil {
		return SymmArgs{}, err
	}
	vb, err := checkMatrix(fn, "B", &b)
	if err != nil {
		return SymmArgs{}, err
	}
	vc, err := checkMatrix(fn, "C", &c)
	if err != nil {
		return SymmArgs{}, err
	}
	switch {
	case a.Op != NoTrans:
		return SymmArgs{}, refuse(ErrShape, fn, "A", "a symmetric matrix takes no operation (have %d)", a.Op)
	case c.Op != NoTrans:
		return SymmArgs{}, refuse(ErrShape, fn, "C", "the result takes no operation (have %d)", c.Op)
	}
	if err := sameShape(fn, b, c); err != nil {
		return SymmArgs{}, err
	}
	if err := squareFor(fn, a, c, "C", side); err != nil {
		return SymmArgs{}, err
	}
	if overlaps(vc.sp, va.sp) {
		return SymmArgs{}, refuse(ErrAlias, fn, "C", "C overlaps A in memory")
	}
	if overlaps(vc.sp, vb.sp) {
		return SymmArgs{}, refuse(ErrAlias, fn, "C", "C overlaps B in memory")
	}
	m, n := c.Stored()
	return SymmArgs{
		Side: rawSide(side, c.Layout), Uplo: rawUplo(uplo, a.Layout), M: m, N: n,
		LDA: a.LD, OffA: va.off, LDB: b.LD, OffB: vb.off, LDC: c.LD, OffC: vc.off,
		Needs64: va.big || vb.big || vc.big,
	}, nil
}

// SyrkArgs are the arguments of cublas<t>syrk, in its order.
type SyrkArgs struct {
	Uplo      cublasraw.FillMode
	Trans     cublasraw.Operation
	N, K      int64
	LDA, OffA int64
	LDC, OffC int64
	Needs64   bool
}

// Syrk checks C = alpha·op(A)·op(A)ᵀ + beta·C for cublas<t>syrk: C is n×n
// with no operation, updated in uplo; op(A) is n×k; A's operation is
// NoTrans or Trans (a conjugate transpose is Herk's: ErrShape). A
// row-major A transposes its operation; a row-major C flips its triangle
// (C is symmetric, so the product is the same). C must not overlap A
// (ErrAlias).
func Syrk(uplo Uplo, a, c Matrix) (SyrkArgs, error) {
	const fn = "Syrk"
	if err := checkEnums(fn, uplo, Left, NonUnit); err != nil {
		return SyrkArgs{}, err
	}
	va, err := checkMatrix(fn, "A", &a)
	if err != nil {
		return SyrkArgs{}, err
	}
	vc, err := checkMatrix(fn, "C", &c)
	if err != nil {
		return SyrkArgs{}, err
	}
	switch {
	case a.Op == ConjTrans:
		return SyrkArgs{}, refuse(ErrShape, fn, "A", "Syrk takes NoTrans or Trans (a conjugate transpose is Herk's)")
	case c.Op != NoTrans:
		return SyrkArgs{}, refuse(ErrShape, fn, "C", "the result takes no operation (have %d)", c.Op)
	case c.Rows != c.Cols:
		return SyrkArgs{}, refuse(ErrShape, fn, "C", "%d×%d is not square", c.Rows, c.Cols)
	}
	n, k := opDims(&a)
	if n != c.Rows {
		return SyrkArgs{}, refuse(ErrShape, fn, "A", "op(A) has %d rows, but C is %d×%d (n)", n, c.Rows, c.Cols)
	}
	if overlaps(vc.sp, va.sp) {
		return SyrkArgs{}, refuse(ErrAlias, fn, "C", "C overlaps A in memory")
	}
	op, err := mapOp(fn, "A", &a, ColMajor)
	if err != nil {
		return SyrkArgs{}, err
	}
	return SyrkArgs{
		Uplo: rawUplo(uplo, c.Layout), Trans: op.raw(), N: n, K: k,
		LDA: a.LD, OffA: va.off, LDC: c.LD, OffC: vc.off,
		Needs64: va.big || vc.big || over32(n, k),
	}, nil
}
