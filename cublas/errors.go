package cublas

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/errs"
	"github.com/purecuda/cuda/loader"
)

// Status is a cuBLAS status code (the C enum cublasStatus_t). Every Status
// is an error and an errors.Is target.
type Status int32

// The cuBLAS statuses other than success, for errors.Is.
const (
	// StatusNotInitialized (CUBLAS_STATUS_NOT_INITIALIZED): the library or
	// the handle was not initialised.
	StatusNotInitialized Status = 1
	// StatusAllocFailed (CUBLAS_STATUS_ALLOC_FAILED): cuBLAS could not
	// allocate memory.
	StatusAllocFailed Status = 3
	// StatusInvalidValue (CUBLAS_STATUS_INVALID_VALUE): cuBLAS refused an
	// argument. It also matches driver.ErrInvalidArgument.
	StatusInvalidValue Status = 7
	// StatusArchMismatch (CUBLAS_STATUS_ARCH_MISMATCH): the device lacks
	// a feature the call needs.
	StatusArchMismatch Status = 8
	// StatusMappingError (CUBLAS_STATUS_MAPPING_ERROR): access to GPU
	// memory failed.
	StatusMappingError Status = 11
	// StatusExecutionFailed (CUBLAS_STATUS_EXECUTION_FAILED): the GPU
	// program failed to launch or run.
	StatusExecutionFailed Status = 13
	// StatusInternalError (CUBLAS_STATUS_INTERNAL_ERROR): an internal
	// cuBLAS operation failed.
	StatusInternalError Status = 14
	// StatusNotSupported (CUBLAS_STATUS_NOT_SUPPORTED): the combination of
	// types, compute type or sizes is not supported. It also matches
	// ErrNotSupported.
	StatusNotSupported Status = 15
	// StatusLicenseError (CUBLAS_STATUS_LICENSE_ERROR).
	StatusLicenseError Status = 16
)

var messages = map[Status]string{
	0:  "success",
	1:  "the library was not initialized",
	3:  "the resource allocation failed",
	7:  "an invalid numeric value was used as an argument",
	8:  "an absent device architectural feature is required",
	11: "an access to GPU memory space failed",
	13: "the GPU program failed to execute",
	14: "an internal operation failed",
	15: "the functionality requested is not supported",
	16: "error detected trying to check the license",
}

// String is the status's C name, "CUBLAS_STATUS_INVALID_VALUE", or
// "cublasStatus_t(99)" for a value the header does not name.
func (s Status) String() string { return cublasraw.Status(s).Name() }

// Error reads "CUBLAS_STATUS_INVALID_VALUE (7): an invalid numeric value
// was used as an argument".
func (s Status) Error() string {
	m, ok := messages[s]
	if !ok {
		m = "unknown status"
	}
	return s.String() + " (" + strconv.Itoa(int(s)) + "): " + m
}

// Is makes StatusInvalidValue match driver.ErrInvalidArgument and
// StatusNotSupported match ErrNotSupported.
func (s Status) Is(target error) bool {
	switch s {
	case StatusInvalidValue:
		return target == errs.InvalidArgument
	case StatusNotSupported:
		return target == ErrNotSupported
	}
	return false
}

// ErrNotSupported is matched when cuBLAS cannot do what was asked here:
// libcublas was not found (the error lists every place searched and
// matches loader.ErrNotFound), the cuBLAS found lacks the function (an
// older version), or cuBLAS reports the request unsupported
// (StatusNotSupported).
var ErrNotSupported = errors.New("cublas: not supported")

// The refusals of operands, checked before cuBLAS is called; each also
// matches driver.ErrInvalidArgument, and its message names the call, the
// operand and the dimension.
var (
	// ErrShape: a negative size, a leading dimension smaller than the
	// stored rows, dimensions of two operands that do not agree, a negative
	// increment where the routine needs a positive one (Scal, Nrm2, Asum,
	// Iamax), a negative stride or batch count, a result (C, y) given an
	// operation, an unknown enum value, or an operation cuBLAS cannot
	// express for the layouts given.
	ErrShape = blasview.ErrShape
	// ErrOutOfBounds: a view that reaches outside its buffer (a negative
	// offset, an element at or past the buffer's length, an extent too
	// large for int64 arithmetic).
	ErrOutOfBounds = blasview.ErrOutOfBounds
	// ErrAlias: an output that overlaps, in memory, another operand that
	// cuBLAS reads or writes during the same call.
	ErrAlias = blasview.ErrAlias
)

// Error is a failed cuBLAS call. It reads
//
//	cublas: Gemm: cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE (7): an invalid numeric value was used as an argument
//
// errors.Is matches its Status (StatusInvalidValue also matches
// driver.ErrInvalidArgument, StatusNotSupported ErrNotSupported).
type Error struct {
	Op     string // the method or function of this package, "Gemm"
	Func   string // the C function, "cublasSgemm_v2"
	Status Status
}

func (e *Error) Error() string { return "cublas: " + e.Op + ": " + e.Func + ": " + e.Status.Error() }

// Unwrap returns the Status.
func (e *Error) Unwrap() error { return e.Status }

// wrap turns an error of the raw table into this package's: a cuBLAS
// status into an *Error, a missing function or library into one matching
// ErrNotSupported; a driver error (from a context switch) passes through.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *cublasraw.Error
	if errors.As(err, &ce) {
		return &Error{Op: op, Func: ce.Func, Status: Status(ce.Code)}
	}
	if errors.Is(err, cublasraw.ErrNotSupported) {
		return fmt.Errorf("cublas: %s: %w: %w", op, ErrNotSupported, err)
	}
	if errors.Is(err, loader.ErrNotFound) {
		return fmt.Errorf("cublas: %s: %w: %w%s", op, ErrNotSupported, err, installHint)
	}
	return fmt.Errorf("cublas: %s: %w", op, err)
}

// installHint follows the loader's error when no cuBLAS was found.
const installHint = " (install it with the CUDA toolkit, e.g. apt install libcublas-13-0, or pip install nvidia-cublas; or set PURECUDA_LIBCUBLAS to its path)"

// invalid is a refusal of an argument before cuBLAS is called.
func invalid(op, format string, args ...any) error {
	return fmt.Errorf("cublas: %s: %s: %w", op, fmt.Sprintf(format, args...), errs.InvalidArgument)
}

// refused names op on a check's refusal.
func refused(op string, err error) error {
	var be *blasview.Error
	if errors.As(err, &be) {
		be.Func = op
		return be
	}
	return err
}
