package blasview

import (
	"math"
	"math/bits"

	"github.com/purecuda/cuda/internal/cublasraw"
)

// Buffer is the memory a view lies in: its length in elements and, for the
// overlap checks, where it is.
//
// Addr is the byte address of element 0 (a device address; any numbering
// common to all operands of a call works) and Elem the size of one element
// in bytes (0 counts as 1). Two views overlap when the bytes they touch
// overlap, whichever buffer objects they came from: slices of one
// allocation are compared correctly. The zero Addr puts every buffer at the
// same place, the conservative choice: views that could be distinct are
// then treated as possibly overlapping.
type Buffer struct {
	Len  int64  // elements; must be >= 0
	Addr uint64 // byte address of element 0; Addr + Len*Elem must not exceed 2^63-1
	Elem int64  // bytes per element; 0 counts as 1, negative is refused
}

// Layout is how a matrix view maps (i, j) to an element.
type Layout uint8

// The layouts. Element (i, j) of a ColMajor view is at offset + i + j*ld; of
// a RowMajor view at offset + i*ld + j.
//
// The transpose identity: a RowMajor r×c view is, element for element, the
// ColMajor c×r view with the same offset and ld, transposed. Every check
// and every cuBLAS argument is derived from that column-major "storage"
// matrix; see Stored.
const (
	ColMajor Layout = iota
	RowMajor
)

// Op is the operation applied to a matrix operand before use.
type Op uint8

// The operations: none, transpose, conjugate transpose (the same as
// transpose for real element types: the typed layer may map it so).
const (
	NoTrans Op = iota
	Trans
	ConjTrans
)

func (o Op) raw() cublasraw.Operation {
	switch o {
	case Trans:
		return cublasraw.CUBLAS_OP_T
	case ConjTrans:
		return cublasraw.CUBLAS_OP_C
	}
	return cublasraw.CUBLAS_OP_N
}

// transposed is o applied to the transpose of the matrix, as an operation
// on the matrix itself: op(Xᵀ) = o'(X). NoTrans and Trans swap; the
// conjugate transpose of a transpose is the conjugate alone, which cuBLAS
// cannot express (ok false).
func (o Op) transposed() (Op, bool) {
	switch o {
	case NoTrans:
		return Trans, true
	case Trans:
		return NoTrans, true
	}
	return 0, false
}

// Matrix is a view of a Rows×Cols matrix in Buf, in elements: element (i, j)
// is at Offset + i + j*LD (ColMajor) or Offset + i*LD + j (RowMajor). Op is
// applied to the matrix by the call (only where the call takes one).
//
// # Rules
//
// Checked for every matrix operand, in this order, each refusal naming the
// operand:
//   - Layout and Op are known values (ErrShape);
//   - Rows >= 0 and Cols >= 0 (ErrShape);
//   - LD >= max(1, stored rows): Rows for ColMajor, Cols for RowMajor
//     (ErrShape); cuBLAS requires ld >= 1 even for an empty matrix;
//   - the buffer: Len >= 0, Elem >= 0, Addr + Len*Elem within int64 (ErrShape
//     or ErrOutOfBounds);
//   - Offset >= 0 (ErrOutOfBounds);
//   - a view with no element (Rows or Cols 0) reads nothing: its Offset
//     must be <= Len (the pointer passed is at most one past the end);
//   - otherwise its last element, Offset + (storedRows-1) +
//     (storedCols-1)*LD, is < Len, computed in int64 with every product and
//     sum checked for overflow: a huge LD never wraps into acceptance
//     (ErrOutOfBounds). The first element is Offset, so every element
//     touched lies in [Offset, last] within [0, Len).
//
// Sizes and LD beyond 2^31-1 are accepted; the call's result then says
// that the _64 API (cublasSgemm_v2_64, …) is needed.
type Matrix struct {
	Buf        Buffer
	Offset     int64
	Rows, Cols int64
	LD         int64
	Layout     Layout
	Op         Op
}

// Stored is the column-major matrix that m's elements form, by the
// transpose identity: rows and columns as cuBLAS counts them for a leading
// dimension (m's Rows×Cols for ColMajor, Cols×Rows for RowMajor).
func (m Matrix) Stored() (rows, cols int64) {
	if m.Layout == RowMajor {
		return m.Cols, m.Rows
	}
	return m.Rows, m.Cols
}

// Vector is a view of N elements of Buf with increment Inc, as BLAS
// defines it: Offset is the lowest element (the pointer passed to cuBLAS),
// and the view touches Offset + k*|Inc| for k < N. For Inc > 0 element k of
// the vector is at Offset + k*Inc; for Inc < 0 the vector runs from the
// end: element k is at Offset + (N-1-k)*|Inc|.
//
// # Rules
//
// Inc != 0 (some calls need Inc > 0), N >= 0 (ErrShape); the buffer as for
// Matrix; Offset >= 0; an empty vector needs Offset <= Len; otherwise
// Offset + (N-1)*|Inc| < Len, overflow-checked (ErrOutOfBounds). N or |Inc|
// beyond 2^31-1 needs the _64 API.
type Vector struct {
	Buf    Buffer
	Offset int64
	N      int64
	Inc    int64
}

// At is the element index in Buf of element k of v (0 <= k < v.N), as
// BLAS addresses it.
func (v Vector) At(k int64) int64 {
	if v.Inc < 0 {
		return v.Offset + (v.N-1-k)*-v.Inc
	}
	return v.Offset + k*v.Inc
}

// At is the element index in Buf of element (i, j) of m, before Op.
func (m Matrix) At(i, j int64) int64 {
	if m.Layout == RowMajor {
		return m.Offset + i*m.LD + j
	}
	return m.Offset + i + j*m.LD
}

// mulOK is a*b for a, b >= 0, and whether it fits in int64 (a full
// 128-bit product: no division on the path every call takes).
func mulOK(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

// addOK is a+b for a, b >= 0, and whether it fits in int64.
func addOK(a, b int64) (int64, bool) {
	if a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

func over32(vs ...int64) bool {
	for _, v := range vs {
		if v > math.MaxInt32 || v < math.MinInt32 {
			return true
		}
	}
	return false
}

// checkBuffer validates b and returns its element size (0 taken as 1).
func checkBuffer(fn, name string, b Buffer) (int64, *Error) {
	if b.Len < 0 {
		return 0, refuse(ErrShape, fn, name, "buffer length %d is negative", b.Len)
	}
	if b.Elem < 0 {
		return 0, refuse(ErrShape, fn, name, "element size %d is negative", b.Elem)
	}
	e := max(b.Elem, 1)
	size, ok := mulOK(b.Len, e)
	if ok && b.Addr > math.MaxInt64 {
		ok = false
	}
	if ok {
		_, ok = addOK(int64(b.Addr), size)
	}
	if !ok {
		return 0, refuse(ErrOutOfBounds, fn, name, "buffer of %d elements of %d bytes at %#x overflows the address space", b.Len, e, b.Addr)
	}
	return e, nil
}

// view is a checked operand: where its pointer is, whether it touches
// anything, and the bytes it touches, for overlap checks.
type view struct {
	off   int64 // element offset of the pointer passed to cuBLAS
	empty bool
	big   bool // a size, ld or increment needs the _64 API
	sp    span
}

// checkMatrix checks a matrix operand by the rules Matrix lists, naming
// it in a refusal, and returns the view cuBLAS will address.
func checkMatrix(fn, name string, m *Matrix) (view, *Error) {
	if m.Layout > RowMajor {
		return view{}, refuse(ErrShape, fn, name, "unknown layout %d", m.Layout)
	}
	if m.Op > ConjTrans {
		return view{}, refuse(ErrShape, fn, name, "unknown operation %d", m.Op)
	}
	if m.Rows < 0 {
		return view{}, refuse(ErrShape, fn, name, "rows %d is negative", m.Rows)
	}
	if m.Cols < 0 {
		return view{}, refuse(ErrShape, fn, name, "cols %d is negative", m.Cols)
	}
	sr, sc := m.Stored()
	if m.LD < max(1, sr) {
		switch {
		case sr == 0:
			return view{}, refuse(ErrShape, fn, name, "leading dimension %d is less than 1 (cuBLAS needs ld >= 1 even for an empty matrix)", m.LD)
		case m.Layout == RowMajor:
			return view{}, refuse(ErrShape, fn, name, "leading dimension %d is less than its %d columns (row-major)", m.LD, sr)
		}
		return view{}, refuse(ErrShape, fn, name, "leading dimension %d is less than its %d rows", m.LD, sr)
	}
	e, err := checkBuffer(fn, name, m.Buf)
	if err != nil {
		return view{}, err
	}
	if m.Offset < 0 {
		return view{}, refuse(ErrOutOfBounds, fn, name, "offset %d is negative", m.Offset)
	}
	v := view{off: m.Offset, big: over32(sr, sc, m.LD)}
	if sr == 0 || sc == 0 {
		if m.Offset > m.Buf.Len {
			return view{}, refuse(ErrOutOfBounds, fn, name, "offset %d is past the end of its buffer of %d elements", m.Offset, m.Buf.Len)
		}
		v.empty = true
		return v, nil
	}
	colStart, ok := mulOK(sc-1, m.LD)
	var last int64
	if ok {
		last, ok = addOK(colStart, sr-1)
	}
	if ok {
		last, ok = addOK(last, m.Offset)
	}
	i, j := sr-1, sc-1
	if m.Layout == RowMajor {
		i, j = j, i
	}
	if !ok {
		return view{}, refuse(ErrOutOfBounds, fn, name, "its last element (%d,%d) lies beyond 2^63 elements (offset %d, leading dimension %d)", i, j, m.Offset, m.LD)
	}
	if last >= m.Buf.Len {
		return view{}, refuse(ErrOutOfBounds, fn, name, "its last element (%d,%d) at %d is past the end of its buffer of %d elements", i, j, last, m.Buf.Len)
	}
	v.sp = span{base: int64(m.Buf.Addr) + m.Offset*e, seg: sr * e, count: sc}
	if sc > 1 {
		v.sp.stride = m.LD * e // fits: (sc-1)*LD < Len
	}
	return v, nil
}

// checkVector checks a vector operand by the rules Vector lists (positive:
// the call needs Inc > 0), as checkMatrix does a matrix.
func checkVector(fn, name string, v Vector, positive bool) (view, *Error) {
	if v.Inc == 0 {
		return view{}, refuse(ErrShape, fn, name, "increment is 0")
	}
	if positive && v.Inc < 0 {
		return view{}, refuse(ErrShape, fn, name, "increment %d is negative: %s needs a positive increment", v.Inc, fn)
	}
	if v.N < 0 {
		return view{}, refuse(ErrShape, fn, name, "length %d is negative", v.N)
	}
	e, err := checkBuffer(fn, name, v.Buf)
	if err != nil {
		return view{}, err
	}
	if v.Offset < 0 {
		return view{}, refuse(ErrOutOfBounds, fn, name, "offset %d is negative", v.Offset)
	}
	inc := v.Inc
	if inc == math.MinInt64 {
		inc = math.MaxInt64 // |MinInt64| does not fit; any element past the first is out of bounds either way
	} else if inc < 0 {
		inc = -inc
	}
	out := view{off: v.Offset, big: over32(v.N, v.Inc)}
	if v.N == 0 {
		if v.Offset > v.Buf.Len {
			return view{}, refuse(ErrOutOfBounds, fn, name, "offset %d is past the end of its buffer of %d elements", v.Offset, v.Buf.Len)
		}
		out.empty = true
		return out, nil
	}
	last, ok := mulOK(v.N-1, inc)
	if ok {
		last, ok = addOK(last, v.Offset)
	}
	if !ok {
		return view{}, refuse(ErrOutOfBounds, fn, name, "its %d elements with increment %d from offset %d reach beyond 2^63 elements", v.N, v.Inc, v.Offset)
	}
	if last >= v.Buf.Len {
		return view{}, refuse(ErrOutOfBounds, fn, name, "its %d elements with increment %d from offset %d reach %d, past the end of its buffer of %d elements", v.N, v.Inc, v.Offset, last, v.Buf.Len)
	}
	out.sp = span{base: int64(v.Buf.Addr) + v.Offset*e, seg: e, stride: inc * e, count: v.N}
	if v.N == 1 {
		out.sp.stride = 0
	}
	return out, nil
}
