package ncclraw

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/purecuda/cuda/loader"
)

// proc is one lazily resolved NCCL entry point.
type proc struct {
	name   string
	abi    int // unused: NCCL's entry points have no ABI versions
	export string
	addr   atomic.Uintptr
}

func (p *proc) find() (uintptr, error) {
	if a := p.addr.Load(); a != 0 {
		return a, nil
	}
	lib, err := loader.Open(loader.KindNCCL)
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
	if res := Result(int32(r)); res != Success {
		return &Error{Func: p.name, Code: res}
	}
	return nil
}

// Load opens NCCL (if not yet open) and returns the path it was opened from.
func Load() (string, error) {
	lib, err := loader.Open(loader.KindNCCL)
	if err != nil {
		return "", err
	}
	return lib.Path, nil
}

// Error is a failed NCCL call: the C function and the status it returned.
// It reads "ncclCommInitRank: ncclInvalidArgument (4)". Package nccl turns
// it into its own error, with NCCL's texts, at its boundary.
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

// Error makes a Result usable as an error and as an errors.Is target:
// "ncclInvalidUsage (5)".
func (r Result) Error() string {
	return r.Name() + " (" + strconv.Itoa(int(r)) + ")"
}

// Name is the C name of r, "ncclInvalidUsage", or "ncclResult_t(99)" for a
// value nccl.h does not name.
func (r Result) Name() string {
	if s := r.String(); !strings.HasPrefix(s, "Result(") {
		return s
	}
	return "ncclResult_t(" + strconv.Itoa(int(r)) + ")"
}

// ErrNotSupported is matched by errors for NCCL functions that the loaded
// library does not export (an older NCCL).
var ErrNotSupported = errors.New("ncclraw: function not exported by this NCCL")

// SymbolError reports an NCCL function missing from the loaded library.
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

// ResolveAll resolves every NCCL function and reports each outcome. It is
// for diagnostics (tests); normal use resolves lazily.
func ResolveAll() []Resolution {
	out := make([]Resolution, 0, len(procs))
	for _, p := range procs {
		_, err := p.find()
		out = append(out, Resolution{Func: p.name, Err: err})
	}
	return out
}
