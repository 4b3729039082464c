// Package blasview is the part of purecuda's cuBLAS binding that needs no
// GPU: it checks typed matrix and vector views over buffers and turns them
// into the exact arguments of the column-major cuBLAS calls, refusing
// anything that could make cuBLAS touch memory outside the buffers, or
// write memory another operand of the same call reads.
//
// # Views
//
// A Matrix is Rows×Cols elements of a Buffer at Offset, with leading
// dimension LD, in ColMajor or RowMajor layout, with an operation (Op) the
// call applies; a Vector is N elements from Offset with increment Inc, as
// BLAS defines it (negative increments run from the end). Offsets, leading
// dimensions and strides count elements. Matrix and Vector list the rules
// each view must satisfy; every call checks all its operands before
// anything else and its refusal (an *Error) names the call, the operand
// and the dimension.
//
// # Row-major views: the transpose identity
//
// A RowMajor r×c view with leading dimension ld is, element for element,
// the ColMajor c×r view with the same ld, transposed: element (i, j) is at
// offset + i*ld + j either way. cuBLAS is column-major, so each call is
// solved on those column-major "stored" matrices:
//   - an operand whose layout differs from the result's has its operation
//     transposed (NoTrans and Trans swap; a conjugate transpose would need
//     a conjugate alone, which cuBLAS lacks, and is refused);
//   - a row-major result transposes the whole equation: Gemm computes Cᵀ =
//     op(B)ᵀ·op(A)ᵀ with A and B swapped, Trsm, Trmm and Symm move A to the
//     other side, Ger swaps x and y;
//   - a row-major triangular or symmetric view's triangle flips (its lower
//     triangle is its storage's upper).
//
// # Bounds
//
// Every extent is computed in int64 with each product and sum checked: a
// leading dimension, stride or increment so large that the arithmetic would
// wrap is refused (ErrOutOfBounds), never accepted. Zero-sized views touch
// nothing and are accepted (their offset at most the buffer's length,
// their ld still >= 1, as cuBLAS requires). Sizes beyond 2^31-1 are
// accepted and reported (Needs64): the _64 entry points take them.
//
// # Aliasing
//
// An output must not share bytes with another operand of the call (and a
// batched call's outputs not with each other's or any batch's inputs):
// ErrAlias. Overlap is decided on byte addresses (Buffer.Addr, Elem), so
// slices of one allocation are compared correctly: exactly when the two
// views have the same stride (same leading dimension and element size, or
// one of them contiguous), conservatively (first-to-last intervals)
// otherwise. Level-1 outputs may be their input itself (y = x exactly).
//
// # Errors
//
// Refusals are *Error values matching ErrShape, ErrOutOfBounds or ErrAlias
// and driver.ErrInvalidArgument. Nothing here panics, whatever the input.
package blasview
