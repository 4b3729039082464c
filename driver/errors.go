package driver

import (
	"errors"
	"fmt"

	"github.com/purecuda/cuda/internal/cu"
)

// The raw table builds its errors with driver's types, so that every failed
// call returns a *Error or *SymbolError (see cu.ErrorTypes): the types are
// defined here, once, and go doc shows them.
func init() {
	cu.SetErrorTypes(cu.ErrorTypes{Call: newError, Symbol: newSymbolError})
}

func newError(fn string, code cu.CUresult) error { return &Error{Func: fn, Code: Status(code)} }

func newSymbolError(e *cu.SymbolError) error {
	return &SymbolError{Func: e.Func, ABI: e.ABI, Driver: e.Driver, Reason: e.Reason}
}

// Status is a CUDA driver status code (the C enum CUresult). Every Status is
// an error and an errors.Is target: the Err… constants name them all.
type Status int32

// String is the status's C name, e.g. "CUDA_ERROR_OUT_OF_MEMORY".
func (s Status) String() string { return cu.CUresult(s).String() }

// Message is a short lower-case description, e.g. "out of memory".
func (s Status) Message() string { return cu.CUresult(s).Message() }

// Error reads "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
func (s Status) Error() string { return cu.CUresult(s).Error() }

// Error is a failed driver call: the C function's name and the status it
// returned. Its message reads
//
//	cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory
//
// and is built from generated tables, so it needs no driver to format.
// errors.Is(err, ErrOutOfMemory) matches it by Code; errors.As gives the
// fields.
type Error struct {
	Func string // the C function, e.g. "cuMemAlloc"
	Code Status // what it returned
}

func (e *Error) Error() string { return e.Func + ": " + e.Code.Error() }

// Is reports whether target is e's Code (any Status, such as
// ErrOutOfMemory), or ErrNotSupported when the code is
// CUDA_ERROR_NOT_SUPPORTED.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return t == e.Code
	case cu.CUresult: // purecuda's own packages compare with the raw table's codes
		return Status(t) == e.Code
	}
	return isNotSupportedTarget(target) && e.Code == ErrCUDANotSupported
}

// SymbolError reports a driver function that this driver cannot provide: it
// names the function, the ABI version the binding needs and the driver's
// version. It matches ErrNotSupported.
type SymbolError struct {
	Func   string // the C function, e.g. "cuGraphAddNode"
	ABI    int    // the ABI version the binding needs, e.g. 12030
	Driver int    // the driver's CUDA version, e.g. 12020; 0 if unknown
	Reason string // why it did not resolve
}

func (e *SymbolError) Error() string {
	return fmt.Sprintf("%s: not available (needs driver API %s, driver is %s): %s",
		e.Func, cu.FormatVersion(e.ABI), cu.FormatVersion(e.Driver), e.Reason)
}

// Is matches ErrNotSupported.
func (e *SymbolError) Is(target error) bool { return isNotSupportedTarget(target) }

// ErrNotSupported is matched by errors for driver functions that the loaded
// driver does not provide (*SymbolError), and by CUDA_ERROR_NOT_SUPPORTED
// results (ErrCUDANotSupported).
var ErrNotSupported = errors.New("cuda: function not supported by this driver")

func isNotSupportedTarget(target error) bool {
	return target == ErrNotSupported || target == cu.ErrNotSupported
}
