package nccl

import (
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/errs"
	"github.com/purecuda/cuda/internal/ncclraw"
)

// Status is an NCCL result code (the C enum ncclResult_t). Every Status is
// an error and an errors.Is target.
type Status int32

// The NCCL results other than success, for errors.Is.
const (
	// ErrUnhandledCUDA (ncclUnhandledCudaError): a CUDA call made by NCCL
	// failed.
	ErrUnhandledCUDA Status = 1
	// ErrSystem (ncclSystemError): a system call failed: a socket, a
	// memory allocation, a file, a peer process gone.
	ErrSystem Status = 2
	// ErrInternal (ncclInternalError): NCCL's own fault or a corrupted
	// state.
	ErrInternal Status = 3
	// ErrInvalidArgument (ncclInvalidArgument): a bad argument. An
	// argument this package refuses before calling NCCL matches it too.
	ErrInvalidArgument Status = 4
	// ErrInvalidUsage (ncclInvalidUsage): a call NCCL does not allow
	// here, such as mismatched calls between ranks.
	ErrInvalidUsage Status = 5
	// ErrRemote (ncclRemoteError): a peer failed or went away (a
	// network error, a rank that exited).
	ErrRemote Status = 6
	// ErrInProgress (ncclInProgress): a non-blocking operation has not
	// finished yet.
	ErrInProgress Status = 7
)

var messages = [...]string{
	0: "no error",
	1: "unhandled CUDA error",
	2: "system error",
	3: "internal error",
	4: "invalid argument",
	5: "invalid usage",
	6: "remote error",
	7: "operation in progress",
}

// String is the status's C name, "ncclInvalidUsage", or "ncclResult_t(99)"
// for a value nccl.h does not name.
func (s Status) String() string { return ncclraw.Result(s).Name() }

// Message is a short lower-case description, "invalid usage".
func (s Status) Message() string {
	if s >= 0 && int(s) < len(messages) {
		return messages[s]
	}
	return "unknown status"
}

// Error reads "ncclInvalidUsage (5): invalid usage".
func (s Status) Error() string { return s.String() + " (" + strconv.Itoa(int(s)) + "): " + s.Message() }

// ErrNotSupported is matched by the error of every call when NCCL cannot be
// used here: libnccl was not found (the error lists every place searched,
// and matches loader.ErrNotFound), the operating system has no NCCL (NVIDIA
// ships it for Linux only), or the libnccl found lacks the function called
// (an older NCCL).
var ErrNotSupported = errors.New("nccl: not supported")

// Error is a failed NCCL call. It reads
//
//	ncclCommInitRank: ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details); last error: …
//
// errors.Is(err, ErrInvalidArgument) matches it by Code; an
// ErrInvalidArgument also matches driver.ErrInvalidArgument.
type Error struct {
	Func string // the C function, "ncclCommInitRank"
	Code Status // what it returned
	// Text is NCCL's description of Code (ncclGetErrorString), or Code's
	// Message when NCCL could not give one.
	Text string
	// Last is NCCL's message for the last error it saw (ncclGetLastError),
	// read right after the call failed: "" when it had none. It says
	// more than Text (a bad value, a peer's address), but NCCL keeps one
	// such message, so one from another goroutine's failure at the same
	// moment can take its place.
	Last string
}

func (e *Error) Error() string {
	s := e.Func + ": " + e.Code.String() + " (" + strconv.Itoa(int(e.Code)) + "): " + e.Text
	if e.Last != "" && e.Last != e.Text {
		s += "; last error: " + e.Last
	}
	return s
}

// Is reports whether target is e's Code, or driver.ErrInvalidArgument for
// ErrInvalidArgument.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return t == e.Code
	case ncclraw.Result: // purecuda's own packages compare with the raw table's codes
		return Status(t) == e.Code
	}
	return target == errs.InvalidArgument && e.Code == ErrInvalidArgument
}

// maxMessage bounds how much of a message of NCCL's is read: NCCL keeps
// its last error in a buffer of 1024 bytes, which another thread may be
// rewriting while it is read.
const maxMessage = 1024

// goString copies the NUL-terminated C string at p, at most maxMessage
// bytes of it; nil gives "".
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var n int
	for n < maxMessage && *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// newError is the *Error of fn returning code, with NCCL's texts; comm is
// the communicator the call was for (0 for none).
func newError(fn string, code Status, comm ncclraw.Comm) *Error {
	e := &Error{Func: fn, Code: code, Text: code.Message()}
	if p, err := ncclraw.GetErrorString(ncclraw.Result(code)); err == nil && p != nil {
		if s := goString(p); s != "" {
			e.Text = s
		}
	}
	if p, err := ncclraw.GetLastError(comm); err == nil {
		e.Last = goString(p)
	}
	return e
}

// wrap turns an error of the raw table into this package's: a failed call
// into *Error, a failed context switch (CUDA's error) into an error that
// keeps it (errors.Is matches driver's sentinels), anything else (no
// library, no such function) into an error matching ErrNotSupported that
// keeps the loader's or resolver's error. An
// error of this package's already (an *Error from a poll) is returned as
// it is.
// comm is the communicator the call was for (0 for none).
func wrap(err error, comm ncclraw.Comm) error {
	if err == nil {
		return nil
	}
	var ne *Error
	if errors.As(err, &ne) || errors.Is(err, ErrNotSupported) {
		return err // wrapped already (a non-blocking call's status, polled)
	}
	var re *ncclraw.Error
	if errors.As(err, &re) {
		return newError(re.Func, Status(re.Code), comm)
	}
	var de *driver.Error
	if errors.As(err, &de) {
		return fromDriver(err) // a context switch's: CUDA's error, not NCCL's
	}
	return fmt.Errorf("%w: %w", ErrNotSupported, err)
}

// argError is an argument this package refuses before calling NCCL.
type argError struct{ msg string }

func (e *argError) Error() string { return "nccl: " + e.msg }

// Is matches ErrInvalidArgument and driver.ErrInvalidArgument.
func (e *argError) Is(target error) bool {
	return target == error(ErrInvalidArgument) || target == errs.InvalidArgument
}

// invalid is an argError with a formatted message.
func invalid(format string, args ...any) error {
	return &argError{msg: fmt.Sprintf(format, args...)}
}

// fromDriver is an error of package driver's about an argument of an
// operation (a closed buffer, memory of another context), which then also
// matches this package's ErrInvalidArgument when it matches driver's.
func fromDriver(err error) error { return &driverError{err} }

type driverError struct{ err error }

func (e *driverError) Error() string { return "nccl: " + e.err.Error() }
func (e *driverError) Unwrap() error { return e.err }

// Is matches ErrInvalidArgument when the driver's error matches
// driver.ErrInvalidArgument.
func (e *driverError) Is(target error) bool {
	return target == error(ErrInvalidArgument) && errors.Is(e.err, errs.InvalidArgument)
}
