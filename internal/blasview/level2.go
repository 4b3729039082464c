package blasview

import "github.com/purecuda/cuda/internal/cublasraw"

// Uplo names the triangle of a triangular or symmetric view that the call
// reads (or, for Syrk, writes), in the view's own (i, j) terms.
type Uplo uint8

// The triangles.
const (
	Lower Uplo = iota
	Upper
)

// Side says on which side of the other operand a triangular or symmetric
// matrix multiplies.
type Side uint8

// The sides: op(A)·X (Left) or X·op(A) (Right).
const (
	Left Side = iota
	Right
)

// Diag says whether a triangular view's diagonal is read (NonUnit) or taken
// as all ones (Unit).
type Diag uint8

// The diagonals.
const (
	NonUnit Diag = iota
	Unit
)

// rawUplo is u for the stored matrix of a view of layout l: the transpose
// identity turns a row-major view's lower triangle into its storage's upper.
func rawUplo(u Uplo, l Layout) cublasraw.FillMode {
	if (u == Upper) != (l == RowMajor) {
		return cublasraw.CUBLAS_FILL_MODE_UPPER
	}
	return cublasraw.CUBLAS_FILL_MODE_LOWER
}

func rawDiag(d Diag) cublasraw.DiagType {
	if d == Unit {
		return cublasraw.CUBLAS_DIAG_UNIT
	}
	return cublasraw.CUBLAS_DIAG_NON_UNIT
}

// rawSide is s for an equation solved on the stored matrices of a result
// of layout l: transposing the equation moves A to the other side.
func rawSide(s Side, l Layout) cublasraw.SideMode {
	if (s == Right) != (l == RowMajor) {
		return cublasraw.CUBLAS_SIDE_RIGHT
	}
	return cublasraw.CUBLAS_SIDE_LEFT
}

func checkEnums(fn string, uplo Uplo, side Side, diag Diag) *Error {
	switch {
	case uplo > Upper:
		return refuse(ErrShape, fn, "A", "unknown triangle %d", uplo)
	case side > Right:
		return refuse(ErrShape, fn, "A", "unknown side %d", side)
	case diag > Unit:
		return refuse(ErrShape, fn, "A", "unknown diagonal %d", diag)
	}
	return nil
}

// GemvArgs are the arguments of cublas<t>gemv, in its order: M and N are
// the stored (column-major) matrix's rows and columns.
type GemvArgs struct {
	Trans      cublasraw.Operation
	M, N       int64
	LDA, OffA  int64
	OffX, IncX int64
	OffY, IncY int64
	Needs64    bool
}

// Gemv checks y = alpha·op(A)·x + beta·y and maps it to cublas<t>gemv:
// x has op(A)'s columns, y its rows (ErrShape). A row-major A is its
// column-major storage transposed, so its operation is transposed (a
// conjugate transpose of a row-major A is refused: ErrShape). Increments
// may be negative, as BLAS defines (see Vector). y must not overlap A or x
// (ErrAlias).
func Gemv(a Matrix, x, y Vector) (GemvArgs, error) {
	const fn = "Gemv"
	va, err := checkMatrix(fn, "A", &a)
	if err != nil {
		return GemvArgs{}, err
	}
	vx, err := checkVector(fn, "x", x, false)
	if err != nil {
		return GemvArgs{}, err
	}
	vy, err := checkVector(fn, "y", y, false)
	if err != nil {
		return GemvArgs{}, err
	}
	rows, cols := opDims(&a)
	if x.N != cols {
		return GemvArgs{}, refuse(ErrShape, fn, "x", "length %d, but op(A) has %d columns", x.N, cols)
	}
	if y.N != rows {
		return GemvArgs{}, refuse(ErrShape, fn, "y", "length %d, but op(A) has %d rows", y.N, rows)
	}
	if overlaps(vy.sp, va.sp) {
		return GemvArgs{}, refuse(ErrAlias, fn, "y", "y overlaps A in memory")
	}
	if overlaps(vy.sp, vx.sp) {
		return GemvArgs{}, refuse(ErrAlias, fn, "y", "y overlaps x in memory")
	}
	op, err := mapOp(fn, "A", &a, ColMajor)
	if err != nil {
		return GemvArgs{}, err
	}
	m, n := a.Stored()
	return GemvArgs{
		Trans: op.raw(), M: m, N: n, LDA: a.LD, OffA: va.off,
		OffX: vx.off, IncX: x.Inc, OffY: vy.off, IncY: y.Inc,
		Needs64: va.big || vx.big || vy.big,
	}, nil
}

// GerArgs are the arguments of cublas<t>ger (geru, gerc), in its order.
// When Swapped, cuBLAS's x is the caller's y and its y the caller's x.
type GerArgs struct {
	M, N       int64
	OffX, IncX int64
	OffY, IncY int64
	LDA, OffA  int64
	Swapped    bool
	Needs64    bool
}

// Ger checks A += alpha·x·yᵀ (conj: A += alpha·x·yᴴ, gerc) and maps it to
// cublas<t>ger: A is m×n with no operation, x has m elements, y n
// (ErrShape). A row-major A is its storage transposed: Aᵀ += alpha·y·xᵀ,
// so x and y swap (Swapped) and m and n too. With conj, a row-major A
// would need the conjugate on the other vector: refused (ErrShape). A
// must not overlap x or y (ErrAlias).
func Ger(a Matrix, x, y Vector, conj bool) (GerArgs, error) {
	const fn = "Ger"
	va, err := checkMatrix(fn, "A", &a)
	if err != nil {
		return GerArgs{}, err
	}
	vx, err := checkVector(fn, "x", x, false)
	if err != nil {
		return GerArgs{}, err
	}
	vy, err := checkVector(fn, "y", y, false)
	if err != nil {
		return GerArgs{}, err
	}
	if a.Op != NoTrans {
		return GerArgs{}, refuse(ErrShape, fn, "A", "the updated matrix takes no operation (have %d)", a.Op)
	}
	if x.N != a.Rows {
		return GerArgs{}, refuse(ErrShape, fn, "x", "length %d, but A has %d rows", x.N, a.Rows)
	}
	if y.N != a.Cols {
		return GerArgs{}, refuse(ErrShape, fn, "y", "length %d, but A has %d columns", y.N, a.Cols)
	}
	if overlaps(va.sp, vx.sp) {
		return GerArgs{}, refuse(ErrAlias, fn, "A", "A overlaps x in memory")
	}
	if overlaps(va.sp, vy.sp) {
		return GerArgs{}, refuse(ErrAlias, fn, "A", "A overlaps y in memory")
	}
	g := GerArgs{LDA: a.LD, OffA: va.off, Needs64: va.big || vx.big || vy.big}
	if a.Layout == ColMajor {
		g.M, g.N = a.Rows, a.Cols
		g.OffX, g.IncX, g.OffY, g.IncY = vx.off, x.Inc, vy.off, y.Inc
		return g, nil
	}
	if conj {
		return GerArgs{}, refuse(ErrShape, fn, "A", "a row-major A with a conjugated y cannot be expressed (cuBLAS conjugates only its second vector): use a column-major A")
	}
	g.Swapped = true
	g.M, g.N = a.Cols, a.Rows
	g.OffX, g.IncX, g.OffY, g.IncY = vy.off, y.Inc, vx.off, x.Inc
	return g, nil
}

// TrsvArgs are the arguments of cublas<t>trsv, in its order.
type TrsvArgs struct {
	Uplo       cublasraw.FillMode
	Trans      cublasraw.Operation
	Diag       cublasraw.DiagType
	N          int64
	LDA, OffA  int64
	OffX, IncX int64
	Needs64    bool
}

// Trsv checks op(A)·x = b, x overwriting b, for cublas<t>trsv: A is square
// n×n (ErrShape), triangular in uplo (read only there, but the bounds of
// the whole square are checked: they are the triangle's, whose first and
// last elements are the square's), x has n elements. A row-major A is its
// storage transposed: its triangle and operation flip (a conjugate
// transpose is refused). x must not overlap A (ErrAlias).
func Trsv(a Matrix, uplo Uplo, diag Diag, x Vector) (TrsvArgs, error) {
	const fn = "Trsv"
	if err := checkEnums(fn, uplo, Left, diag); err != nil {
		return TrsvArgs{}, err
	}
	va, err := checkMatrix(fn, "A", &a)
	if err != nil {
		return TrsvArgs{}, err
	}
	vx, err := checkVector(fn, "x", x, false)
	if err != nil {
		return TrsvArgs{}, err
	}
	if a.Rows != a.Cols {
		return TrsvArgs{}, refuse(ErrShape, fn, "A", "%d×%d is not square", a.Rows, a.Cols)
	}
	if x.N != a.Rows {
		return TrsvArgs{}, refuse(ErrShape, fn, "x", "length %d, but A is %d×%d", x.N, a.Rows, a.Cols)
	}
	if overlaps(vx.sp, va.sp) {
		return TrsvArgs{}, refuse(ErrAlias, fn, "x", "x overlaps A in memory")
	}
	op, err := mapOp(fn, "A", &a, ColMajor)
	if err != nil {
		return TrsvArgs{}, err
	}
	return TrsvArgs{
		Uplo: rawUplo(uplo, a.Layout), Trans: op.raw(), Diag: rawDiag(diag),
		N: a.Rows, LDA: a.LD, OffA: va.off, OffX: vx.off, IncX: x.Inc,
		Needs64: va.big || vx.big,
	}, nil
}
