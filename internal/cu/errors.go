package cu

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// ErrorTypes are the constructors of the errors this table returns. The
// public error types belong to package driver, where go doc shows them;
// driver installs its constructors with SetErrorTypes when it is
// initialised, so from then on every failed call in the process (through
// driver or not) returns a *driver.Error or *driver.SymbolError, and there
// is one error type per kind, defined once. Without driver (this package's
// own tests) the defaults build *Error and *SymbolError.
type ErrorTypes struct {
	Call   func(fn string, code CUresult) error // a call that returned code
	Symbol func(e *SymbolError) error           // an entry point that did not resolve
}

var errorTypes atomic.Pointer[ErrorTypes]

// SetErrorTypes installs the error constructors (see ErrorTypes). Package
// driver calls it from its init; nothing else should.
func SetErrorTypes(t ErrorTypes) { errorTypes.Store(&t) }

// callError is the error of a call to fn that returned code.
func callError(fn string, code CUresult) error {
	if t := errorTypes.Load(); t != nil && t.Call != nil {
		return t.Call(fn, code)
	}
	return &Error{Func: fn, Code: code}
}

// symbolError is the error of an entry point that did not resolve.
func symbolError(e *SymbolError) error {
	if t := errorTypes.Load(); t != nil && t.Symbol != nil {
		return t.Symbol(e)
	}
	return e
}

// Error is a failed driver call: the C function and the status it returned,
// the default of ErrorTypes.Call.
//
// Its message reads "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2): out of
// memory", built from the generated tables, so it needs no driver.
type Error struct {
	Func string
	Code CUresult
}

func (e *Error) Error() string { return e.Func + ": " + e.Code.Error() }

// Is reports whether target is the CUresult e carries, so that
// errors.Is(err, cu.CUDA_ERROR_OUT_OF_MEMORY) works; CUDA_ERROR_NOT_SUPPORTED
// also matches ErrNotSupported.
func (e *Error) Is(target error) bool {
	if target == ErrNotSupported {
		return e.Code == CUDA_ERROR_NOT_SUPPORTED
	}
	c, ok := target.(CUresult)
	return ok && c == e.Code
}

// Error makes a CUresult usable as an error and as an errors.Is target. It
// reads "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
func (r CUresult) Error() string {
	return r.String() + " (" + strconv.Itoa(int(r)) + "): " + r.Message()
}

// Message is a short lower-case description derived from the status name.
func (r CUresult) Message() string {
	name := r.String()
	if strings.HasPrefix(name, "CUresult(") {
		return "unknown status"
	}
	if r == CUDA_SUCCESS {
		return "no error"
	}
	name = strings.TrimPrefix(name, "CUDA_ERROR_")
	return strings.ReplaceAll(strings.ToLower(name), "_", " ")
}

// ErrNotSupported is matched by errors for entry points that this driver
// does not provide (too old, or the function was removed).
var ErrNotSupported = errors.New("cuda: function not supported by this driver")

// SymbolError reports a driver entry point that could not be resolved (the
// default of ErrorTypes.Symbol).
type SymbolError struct {
	Func   string // C name
	ABI    int    // ABI version the binding needs
	Driver int    // driver's CUDA version, 0 if unknown
	Reason string
}

func (e *SymbolError) Error() string {
	return fmt.Sprintf("%s: not available (needs driver API %s, driver is %s): %s",
		e.Func, FormatVersion(e.ABI), FormatVersion(e.Driver), e.Reason)
}

// Is matches ErrNotSupported.
func (e *SymbolError) Is(target error) bool { return target == ErrNotSupported }

// FormatVersion writes a CUDA version number (12030) as "12.3".
func FormatVersion(v int) string {
	if v <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}
