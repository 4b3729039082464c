package cublas

import (
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/blasview"
)

// Layout is how a matrix view maps element (i, j) to an element of its
// buffer.
type Layout uint8

// The layouts. Element (i, j) of a ColMajor view is at Offset + i + j*LD,
// of a RowMajor view at Offset + i*LD + j.
//
// cuBLAS is column-major. A RowMajor r×c view is, element for element, the
// ColMajor c×r view with the same offset and leading dimension,
// transposed (the transpose identity), so every routine takes row-major
// operands without a copy: an operand whose layout differs from the
// result's has its operation transposed, and a row-major result
// transposes the whole equation (Gemm computes Cᵀ = op(B)ᵀ·op(A)ᵀ). The
// results are the same as for the column-major views of the same
// matrices; only a conjugate-transposed operand whose layout differs from
// the result's cannot be expressed (cuBLAS has no conjugate without a
// transpose) and is refused.
const (
	ColMajor Layout = iota
	RowMajor
)

// Op is the operation a routine applies to a matrix operand.
type Op uint8

// The operations. For real element types ConjTrans is Trans.
const (
	NoTrans   Op = iota // op(A) = A
	Trans               // op(A) = Aᵀ
	ConjTrans           // op(A) = Aᴴ
)

// Uplo names the triangle of a triangular or symmetric matrix that a
// routine reads (Syrk: writes), in the view's own (i, j) terms.
type Uplo uint8

// The triangles.
const (
	Lower Uplo = iota // i >= j
	Upper             // i <= j
)

// Side says on which side a triangular or symmetric matrix multiplies.
type Side uint8

// The sides.
const (
	Left  Side = iota // op(A)·X
	Right             // X·op(A)
)

// Diag says whether a triangular matrix's diagonal is read (NonUnit) or
// taken as all ones (Unit).
type Diag uint8

// The diagonals.
const (
	NonUnit Diag = iota
	Unit
)

// Matrix is a view of a Rows×Cols matrix in Buf, counted in elements:
// element (i, j) is at Offset + i + j*LD (ColMajor) or Offset + i*LD + j
// (RowMajor). Rows and Cols are the matrix as stored, before Op, the
// operation the routine applies to it (only where the routine takes one;
// a result's must be NoTrans, ErrShape otherwise): the k×m row-major
// RowMajorMatrix(b, k, m).T() is the m×k operand Aᵀ.
//
// LD 0 means the matrix is packed: LD is then Rows (ColMajor) or Cols
// (RowMajor). Otherwise LD must be at least that.
//
// Every routine checks each view against its buffer before cuBLAS sees it:
// the first and last elements the view reaches lie in the buffer, the
// dimensions agree with the other operands, and an output does not overlap
// another operand in memory (slices of one allocation included). A
// refusal matches ErrShape, ErrOutOfBounds or ErrAlias (and
// driver.ErrInvalidArgument) and names the routine, the operand and the
// dimension; nothing is queued.
type Matrix[T Element] struct {
	Buf        *driver.Buffer[T]
	Offset     int
	Rows, Cols int
	LD         int
	Layout     Layout
	Op         Op
}

// ColMajorMatrix is the packed column-major rows×cols matrix at the start
// of b.
func ColMajorMatrix[T Element](b *driver.Buffer[T], rows, cols int) Matrix[T] {
	return Matrix[T]{Buf: b, Rows: rows, Cols: cols, Layout: ColMajor}
}

// RowMajorMatrix is the packed row-major rows×cols matrix at the start of
// b: how a Go program usually stores a matrix ([]T with element (i, j) at
// i*cols + j).
func RowMajorMatrix[T Element](b *driver.Buffer[T], rows, cols int) Matrix[T] {
	return Matrix[T]{Buf: b, Rows: rows, Cols: cols, Layout: RowMajor}
}

// T is m with its operation transposed (NoTrans and Trans swap;
// ConjTrans becomes NoTrans).
func (m Matrix[T]) T() Matrix[T] {
	if m.Op == NoTrans {
		m.Op = Trans
	} else {
		m.Op = NoTrans
	}
	return m
}

// H is m conjugate-transposed (m.Op ConjTrans); for a matrix with an
// operation already, its operation removed.
func (m Matrix[T]) H() Matrix[T] {
	if m.Op == NoTrans {
		m.Op = ConjTrans
	} else {
		m.Op = NoTrans
	}
	return m
}

// Sub is the rows×cols block of m whose element (0, 0) is m's element (i,
// j), before m's operation, with m's leading dimension (made explicit),
// layout and operation. It computes only the view; the routine that uses
// it checks it.
func (m Matrix[T]) Sub(i, j, rows, cols int) Matrix[T] {
	m.LD = m.ld()
	if m.Layout == RowMajor {
		m.Offset += i*m.LD + j
	} else {
		m.Offset += i + j*m.LD
	}
	m.Rows, m.Cols = rows, cols
	return m
}

// ld is m's leading dimension, LD 0 made explicit.
func (m Matrix[T]) ld() int {
	if m.LD != 0 {
		return m.LD
	}
	stored := m.Rows
	if m.Layout == RowMajor {
		stored = m.Cols
	}
	return max(stored, 1)
}

// view is m for the checks, in buf.
func (m Matrix[T]) view(buf blasview.Buffer) blasview.Matrix {
	op := blasview.Op(m.Op)
	if op == blasview.ConjTrans && !isComplex[T]() {
		op = blasview.Trans
	}
	return blasview.Matrix{
		Buf: buf, Offset: int64(m.Offset), Rows: int64(m.Rows), Cols: int64(m.Cols),
		LD: int64(m.ld()), Layout: blasview.Layout(m.Layout), Op: op,
	}
}

// Vector is a view of N elements of Buf with increment Inc, as BLAS
// defines it: element k is at Offset + k*Inc for Inc > 0; for Inc < 0 the
// vector runs from the end, element k at Offset + (N-1-k)*|Inc| (Offset is
// always the lowest element). Inc 0 means 1 (so the zero value's
// increment is 1, never refused). It is checked like a Matrix.
type Vector[T Element] struct {
	Buf    *driver.Buffer[T]
	Offset int
	N      int
	Inc    int
}

// VectorOf is the whole of b as a vector, increment 1.
func VectorOf[T Element](b *driver.Buffer[T]) Vector[T] {
	return Vector[T]{Buf: b, N: b.Len(), Inc: 1}
}

// view is v for the checks, in buf.
func (v Vector[T]) view(buf blasview.Buffer) blasview.Vector {
	inc := int64(v.Inc)
	if inc == 0 {
		inc = 1
	}
	return blasview.Vector{Buf: buf, Offset: int64(v.Offset), N: int64(v.N), Inc: inc}
}
