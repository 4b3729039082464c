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

// Is reports whether target is ErrSticky and s is one of the statuses it
// matches. (A Status equal to target matches it without Is.)
func (s Status) Is(target error) bool { return target == ErrSticky && s.sticky() }

// sticky reports whether s is a fault that, as CUDA documents it, leaves
// the process in an inconsistent state: every later CUDA call of the
// process, in any context, returns the same error.
func (s Status) sticky() bool {
	switch s {
	case ErrIllegalAddress, ErrLaunchTimeout, ErrAssert, ErrHardwareStackError,
		ErrIllegalInstruction, ErrMisalignedAddress, ErrInvalidAddressSpace,
		ErrInvalidPc, ErrLaunchFailed, ErrTensorMemoryLeak, ErrContained,
		ErrMpsClientTerminated, ErrExternalDevice:
		return true
	}
	return false
}

// ErrSticky is matched by every error whose status is a fault that CUDA
// cannot recover from within the process: a kernel's illegal address (700),
// launch timeout (702), device-side assert (710), hardware stack error
// (714), illegal instruction (715), misaligned address (716), invalid
// address space (717), invalid program counter (718), launch failure (719),
// tensor-memory leak (721), a contained device exception (226), an MPS
// client terminated by its server (810) and an external device's error
// (911).
//
// Such an error is not confined to the context or the stream whose work
// caused it: from then on every CUDA call of the process that runs or
// waits for work returns it again, in every context — the primary context
// and contexts created afterwards included — device memory contents are
// lost, and queued work, host functions included, never runs. The process
// must exit to use CUDA again; the usual pattern is
//
//	if errors.Is(err, driver.ErrSticky) {
//		log.Fatalf("the GPU hit an unrecoverable fault: %v", err)
//	}
//
// Closing purecuda's objects still releases what they hold.
var ErrSticky = errors.New("cuda: the GPU hit an unrecoverable fault; the process must exit to use CUDA again")

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
// ErrOutOfMemory), ErrNotSupported when the code is
// CUDA_ERROR_NOT_SUPPORTED, or ErrSticky when the code is one of the
// unrecoverable faults it lists.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return t == e.Code
	case cu.CUresult: // purecuda's own packages compare with the raw table's codes
		return Status(t) == e.Code
	}
	if target == ErrSticky {
		return e.Code.sticky()
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
