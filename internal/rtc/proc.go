package rtc

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/purecuda/cuda/loader"
)

// proc is one lazily resolved NVRTC entry point.
type proc struct {
	name   string
	abi    int // unused: NVRTC has no ABI versions
	export string
	addr   atomic.Uintptr
}

func (p *proc) find() (uintptr, error) {
	if a := p.addr.Load(); a != 0 {
		return a, nil
	}
	lib, err := loader.NVRTC()
	if err != nil {
		return 0, err
	}
	fn, err := lib.Lookup(p.export)
	if err != nil {
		return 0, &SymbolError{Func: p.name, Path: lib.Path, Err: err}
	}
	p.addr.Store(fn)
	return fn, nil
}

func (p *proc) check(r uintptr) error {
	if res := Result(int32(r)); res != NVRTC_SUCCESS {
		return callError(p.name, res)
	}
	return nil
}

// Load opens NVRTC (if not yet open) and returns the path it was opened from.
func Load() (string, error) {
	lib, err := loader.NVRTC()
	if err != nil {
		return "", err
	}
	return lib.Path, nil
}

// ErrorType is the constructor of the errors this table returns for failed
// calls. The public error type belongs to package nvrtc, where go doc shows
// it; nvrtc installs its constructor with SetErrorType when it is
// initialised, so every failed call returns a *nvrtc.Error. Without nvrtc
// (this package's own tests) the default builds *Error.
type ErrorType func(fn string, code Result) error

var errorType atomic.Pointer[ErrorType]

// SetErrorType installs the error constructor (see ErrorType). Package
// nvrtc calls it from its init; nothing else should.
func SetErrorType(t ErrorType) { errorType.Store(&t) }

// callError is the error of a call to fn that returned code.
func callError(fn string, code Result) error {
	if t := errorType.Load(); t != nil && *t != nil {
		return (*t)(fn, code)
	}
	return &Error{Func: fn, Code: code}
}

// Error is a failed NVRTC call: the C function and the status it returned
// (the default of ErrorType). It reads "nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6): compilation".
type Error struct {
	Func string
	Code Result
}

func (e *Error) Error() string { return e.Func + ": " + e.Code.Error() }

// Is reports whether target is the Result e carries.
func (e *Error) Is(target error) bool {
	c, ok := target.(Result)
	return ok && c == e.Code
}

// Error makes a Result usable as an error and as an errors.Is target.
func (r Result) Error() string {
	return r.String() + " (" + strconv.Itoa(int(r)) + "): " + r.Message()
}

// Message is a short lower-case description derived from the status name.
func (r Result) Message() string {
	name := r.String()
	switch {
	case strings.HasPrefix(name, "Result("):
		return "unknown status"
	case r == NVRTC_SUCCESS:
		return "no error"
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "NVRTC_ERROR_")), "_", " ")
}

// ErrNotSupported is matched by errors for NVRTC functions that the loaded
// library does not export (an older NVRTC).
var ErrNotSupported = errors.New("nvrtc: function not supported by this NVRTC")

// SymbolError reports an NVRTC function missing from the loaded library.
type SymbolError struct {
	Func, Path string
	Err        error
}

func (e *SymbolError) Error() string {
	return e.Func + ": not exported by " + e.Path + ": " + e.Err.Error()
}

// Is matches ErrNotSupported.
func (e *SymbolError) Is(target error) bool { return target == ErrNotSupported }

// Unwrap returns the lookup error.
func (e *SymbolError) Unwrap() error { return e.Err }

// Resolution is the outcome of resolving one entry point.
type Resolution struct {
	Func string
	Err  error
}

// ResolveAll resolves every NVRTC function and reports each outcome.
func ResolveAll() []Resolution {
	out := make([]Resolution, 0, len(procs))
	for _, p := range procs {
		_, err := p.find()
		out = append(out, Resolution{Func: p.name, Err: err})
	}
	return out
}
