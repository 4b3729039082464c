package blasview

import (
	"errors"
	"fmt"

	"github.com/purecuda/cuda/internal/errs"
)

// ErrShape is matched by refusals of a shape: a negative size, a leading
// dimension smaller than the stored rows, dimensions of two operands that do
// not agree, an increment of 0, a negative stride or batch count, an unknown
// enum value, or an operation cuBLAS cannot express for the layouts given.
var ErrShape = errors.New("invalid matrix or vector shape")

// ErrOutOfBounds is matched by refusals of a view that reaches outside its
// buffer: a negative offset, an element at or past the buffer's length, or
// an extent too large for int64 arithmetic.
var ErrOutOfBounds = errors.New("view reaches outside its buffer")

// ErrAlias is matched by refusals of an output that overlaps, in memory,
// another operand (or another batch's output) that cuBLAS reads or writes
// during the same call.
var ErrAlias = errors.New("output overlaps another operand")

// Error is a refusal: the call, the operand it names and why. Its message
// reads
//
//	cublas: Gemm: B: leading dimension 3 is less than its 4 rows
//
// It matches its Kind (ErrShape, ErrOutOfBounds or ErrAlias) and
// driver.ErrInvalidArgument with errors.Is. A caller that exposes the check
// under another name (Sgemm, GemmEx) may set Func on the value it gets: each
// call returns a fresh *Error.
type Error struct {
	Func    string // the call, e.g. "Gemm"
	Operand string // the operand, e.g. "B", "x", "C[3]"; empty for the call as a whole
	Kind    error  // ErrShape, ErrOutOfBounds or ErrAlias
	Detail  string // what is wrong, e.g. "leading dimension 3 is less than its 4 rows"
}

func (e *Error) Error() string {
	if e.Operand == "" {
		return "cublas: " + e.Func + ": " + e.Detail
	}
	return "cublas: " + e.Func + ": " + e.Operand + ": " + e.Detail
}

// Unwrap gives the Kind and driver.ErrInvalidArgument (internal/errs'
// InvalidArgument, which package driver sets to it), so that errors.Is
// matches both.
func (e *Error) Unwrap() []error { return []error{e.Kind, errs.InvalidArgument} }

func refuse(kind error, fn, operand, format string, args ...any) *Error {
	return &Error{Func: fn, Operand: operand, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}
