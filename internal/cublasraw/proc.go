package cublasraw

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/purecuda/cuda/loader"
)

// proc is one lazily resolved entry point of cuBLAS, or of cuBLASLt when
// lt is set.
type proc struct {
	name   string
	abi    int // unused: cuBLAS's entry points have no ABI versions
	export string
	lt     bool
	addr   atomic.Uintptr
}

func (p *proc) kind() loader.Kind {
	if p.lt {
		return loader.KindCUBLASLt
	}
	return loader.KindCUBLAS
}

func (p *proc) find() (uintptr, error) {
	if a := p.addr.Load(); a != 0 {
		return a, nil
	}
	lib, err := loader.Open(p.kind())
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
	if s := Status(int32(r)); s != CUBLAS_STATUS_SUCCESS {
		return &Error{Func: p.name, Code: s}
	}
	return nil
}

// Load opens cuBLAS (if not yet open) and returns the path it was opened from.
func Load() (string, error) { return load(loader.KindCUBLAS) }

// LoadLt opens cuBLASLt (if not yet open) and returns the path it was opened from.
func LoadLt() (string, error) { return load(loader.KindCUBLASLt) }

func load(k loader.Kind) (string, error) {
	lib, err := loader.Open(k)
	if err != nil {
		return "", err
	}
	return lib.Path, nil
}

// Error is a failed cuBLAS or cuBLASLt call: the C function and the status
// it returned. It reads "cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE (7)".
type Error struct {
	Func string
	Code Status
}

func (e *Error) Error() string { return e.Func + ": " + e.Code.Error() }

// Is reports whether target is the Status e carries.
func (e *Error) Is(target error) bool {
	c, ok := target.(Status)
	return ok && c == e.Code
}

// Error makes a Status usable as an error and as an errors.Is target:
// "CUBLAS_STATUS_INVALID_VALUE (7)".
func (s Status) Error() string {
	return s.Name() + " (" + strconv.Itoa(int(s)) + ")"
}

// Name is the C name of s, "CUBLAS_STATUS_INVALID_VALUE", or
// "cublasStatus_t(99)" for a value cublas_api.h does not name.
func (s Status) Name() string {
	if n := s.String(); !strings.HasPrefix(n, "Status(") {
		return n
	}
	return "cublasStatus_t(" + strconv.Itoa(int(s)) + ")"
}

// ErrNotSupported is matched by errors for functions that the loaded
// cuBLAS or cuBLASLt does not export (an older version).
var ErrNotSupported = errors.New("cublasraw: function not exported by this cuBLAS")

// SymbolError reports a function missing from the loaded library.
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
	Lt   bool // a cuBLASLt function
	Err  error
}

// ResolveAll resolves every cuBLAS and cuBLASLt function and reports each
// outcome. It is for diagnostics (tests); normal use resolves lazily.
func ResolveAll() []Resolution {
	out := make([]Resolution, 0, len(procs)+len(ltProcs))
	for _, table := range [][]*proc{procs, ltProcs} {
		for _, p := range table {
			_, err := p.find()
			out = append(out, Resolution{Func: p.name, Lt: p.lt, Err: err})
		}
	}
	return out
}

// Counts reports how many entry points each table holds: cuBLAS's and
// cuBLASLt's.
func Counts() (cublas, lt int) { return len(procs), len(ltProcs) }
