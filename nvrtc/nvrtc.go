package nvrtc

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/purecuda/cuda/internal/errs"
	"github.com/purecuda/cuda/internal/rtc"
)

// NVRTC statuses that callers test for with errors.Is.
const (
	// ErrCompilation is matched by the error of a program that does not
	// compile (NVRTC_ERROR_COMPILATION).
	ErrCompilation Status = 6
	// ErrInvalidOption is matched when NVRTC rejects an option
	// (NVRTC_ERROR_INVALID_OPTION).
	ErrInvalidOption Status = 5
	// ErrInvalidInput is matched when NVRTC rejects its input, such as a
	// bad name expression (NVRTC_ERROR_INVALID_INPUT).
	ErrInvalidInput Status = 3
	// ErrNameExpression is matched when a name expression is not valid
	// (NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID).
	ErrNameExpression Status = 10
)

// ErrBadOptions is matched by errors in Options that are caught before NVRTC
// runs.
var ErrBadOptions = errors.New("nvrtc: bad options")

// The raw table builds its errors with this package's type (see
// rtc.ErrorType): the type is defined here, once, and go doc shows it.
func init() {
	rtc.SetErrorType(func(fn string, code rtc.Result) error { return &Error{Func: fn, Code: Status(code)} })
}

// Status is an NVRTC status code (the C enum nvrtcResult). Every Status is
// an error and an errors.Is target.
type Status int32

// String is the status's C name, e.g. "NVRTC_ERROR_COMPILATION", or
// "nvrtcResult(99)" for a value nvrtc.h does not name.
func (s Status) String() string {
	if name := rtc.Result(s).String(); !strings.HasPrefix(name, "Result(") {
		return name
	}
	return "nvrtcResult(" + strconv.Itoa(int(s)) + ")"
}

// Message is a short lower-case description, e.g. "compilation".
func (s Status) Message() string { return rtc.Result(s).Message() }

// Error reads "NVRTC_ERROR_COMPILATION (6): compilation".
func (s Status) Error() string { return s.String() + " (" + strconv.Itoa(int(s)) + "): " + s.Message() }

// Error is a failed NVRTC call: the C function and the status it returned.
// It reads "nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6): compilation".
// errors.Is(err, ErrCompilation) matches it by Code.
type Error struct {
	Func string // the C function, e.g. "nvrtcCompileProgram"
	Code Status // what it returned
}

func (e *Error) Error() string { return e.Func + ": " + e.Code.Error() }

// Is reports whether target is e's Code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return t == e.Code
	case rtc.Result: // purecuda's own packages compare with the raw table's codes
		return Status(t) == e.Code
	}
	return false
}

// Options are the compile options. The zero value compiles for NVRTC's
// default virtual architecture with its default C++ standard.
type Options struct {
	// Arch is the target: a real architecture "sm_90" (CUBIN and PTX) or a
	// virtual one "compute_90" (PTX only). A driver.Device's Arch() is the
	// usual choice. Empty leaves NVRTC's default.
	Arch string
	// Std is the C++ dialect, e.g. "c++17".
	Std string
	// Defines become -D name or -D name=value, in name order.
	Defines map[string]string
	// IncludePaths become -I dir.
	IncludePaths []string
	// Headers are in-memory headers, name → content, for #include "name".
	// Compile adds purecuda's built-in headers (BuiltinHeaders), unless
	// Headers has one of the same name.
	Headers map[string]string
	// NameExpressions are expressions such as "my_kernel<float, 4>" whose
	// lowered (mangled) names Output.LoweredNames reports.
	NameExpressions []string
	// Debug (-G), LineInfo (-lineinfo), FastMath (-use_fast_math),
	// RelocatableDeviceCode (-rdc=true) and LTO (-dlto, producing LTO-IR).
	Debug, LineInfo, FastMath, RelocatableDeviceCode, LTO bool
	// MaxRegisters, if positive, becomes -maxrregcount=N.
	MaxRegisters int
	// Extra options, passed as they are.
	Extra []string
	// Name is the program's name in diagnostics; default "program.cu".
	Name string
}

// Args renders the options as NVRTC command-line options.
func (o Options) Args() ([]string, error) {
	var out []string
	if o.Arch != "" {
		if !(strings.HasPrefix(o.Arch, "sm_") || strings.HasPrefix(o.Arch, "compute_")) || strings.ContainsAny(o.Arch, " \t") {
			return nil, fmt.Errorf("%w: architecture %q: want sm_XX or compute_XX", ErrBadOptions, o.Arch)
		}
		out = append(out, "-arch="+o.Arch)
	}
	if o.Std != "" {
		out = append(out, "-std="+o.Std)
	}
	names := make([]string, 0, len(o.Defines))
	for n := range o.Defines {
		if n == "" || strings.ContainsAny(n, " \t=") {
			return nil, fmt.Errorf("%w: define name %q", ErrBadOptions, n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if v := o.Defines[n]; v != "" {
			out = append(out, "-D"+n+"="+v)
		} else {
			out = append(out, "-D"+n)
		}
	}
	for _, dir := range o.IncludePaths {
		if dir == "" {
			return nil, fmt.Errorf("%w: empty include path", ErrBadOptions)
		}
		out = append(out, "-I"+dir)
	}
	if o.Debug {
		out = append(out, "-G")
	}
	if o.LineInfo {
		out = append(out, "-lineinfo")
	}
	if o.FastMath {
		out = append(out, "-use_fast_math")
	}
	if o.RelocatableDeviceCode {
		out = append(out, "-rdc=true")
	}
	if o.LTO {
		out = append(out, "-dlto")
	}
	if o.MaxRegisters < 0 {
		return nil, fmt.Errorf("%w: MaxRegisters %d", ErrBadOptions, o.MaxRegisters)
	}
	if o.MaxRegisters > 0 {
		out = append(out, fmt.Sprintf("-maxrregcount=%d", o.MaxRegisters))
	}
	out = append(out, o.Extra...)
	for _, a := range out {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("%w: option %q contains a NUL byte (%w)", ErrBadOptions, a, errs.InvalidArgument)
		}
	}
	return out, nil
}

// noNUL refuses strings that C would cut short at an embedded NUL byte;
// the error matches ErrBadOptions and driver.ErrInvalidArgument.
func noNUL(what string, ss ...string) error {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("%w: %s %.40q contains a NUL byte (%w)", ErrBadOptions, what, s, errs.InvalidArgument)
		}
	}
	return nil
}

// Output is what Compile produces: the compiled program and NVRTC's log.
type Output struct {
	PTX   []byte // PTX text (nil with LTO)
	CUBIN []byte // for a real sm_XX target (nil otherwise)
	LTOIR []byte // with Options.LTO
	// Log is NVRTC's log: warnings, even when compilation succeeded.
	Log string
	// LoweredNames maps each name expression to its mangled name.
	LoweredNames map[string]string
}

// Image is what to load into a module: the CUBIN when there is one, else
// the PTX.
func (r *Output) Image() []byte {
	if len(r.CUBIN) > 0 {
		return r.CUBIN
	}
	return r.PTX
}

// CompileError is a program that did not compile; Log is NVRTC's log, with
// the line of each error.
type CompileError struct {
	Err error
	Log string
}

func (e *CompileError) Error() string {
	return "nvrtc: " + e.Err.Error() + "\n" + strings.TrimRight(e.Log, "\n")
}

// Unwrap returns NVRTC's error, so errors.Is(err, ErrCompilation) works.
func (e *CompileError) Unwrap() error { return e.Err }

type cstrings struct {
	bufs [][]byte
	ptrs []*byte
}

func (c *cstrings) add(s string) *byte {
	b := append([]byte(s), 0)
	c.bufs = append(c.bufs, b)
	c.ptrs = append(c.ptrs, &b[0])
	return &b[0]
}

func (c *cstrings) array(from int) **byte {
	if from >= len(c.ptrs) {
		return nil
	}
	return &c.ptrs[from]
}

// Compile compiles CUDA C++ source. A program that does not compile is a
// *CompileError matching ErrCompilation, with NVRTC's log.
func Compile(source string, opts Options) (res *Output, err error) {
	args, err := opts.Args()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(source) == "" {
		return nil, fmt.Errorf("%w: empty source", ErrBadOptions)
	}
	if err := noNUL("source", source); err != nil {
		return nil, err
	}
	if err := noNUL("program name", opts.Name); err != nil {
		return nil, err
	}
	if err := noNUL("name expression", opts.NameExpressions...); err != nil {
		return nil, err
	}
	for n, c := range opts.Headers {
		if err := noNUL("header", n, c); err != nil {
			return nil, err
		}
	}
	name := opts.Name
	if name == "" {
		name = "program.cu"
	}
	var keep cstrings
	src := keep.add(source)
	pname := keep.add(name)
	hnames, hbodies := programHeaders(opts.Headers) // the built-in headers too
	contents := make([]*byte, 0, len(hnames))
	includes := make([]*byte, 0, len(hnames))
	for i, n := range hnames {
		contents = append(contents, keep.add(hbodies[i]))
		includes = append(includes, keep.add(n))
	}
	var hc, hi **byte
	if len(hnames) > 0 {
		hc, hi = &contents[0], &includes[0]
	}
	var prog rtc.Program
	if err := rtc.CreateProgram(&prog, src, pname, int32(len(hnames)), hc, hi); err != nil {
		return nil, err
	}
	defer func() {
		if derr := rtc.DestroyProgram(&prog); derr != nil && err == nil {
			err = derr
		}
	}()
	for _, expr := range opts.NameExpressions {
		if err := rtc.AddNameExpression(prog, keep.add(expr)); err != nil {
			return nil, fmt.Errorf("nvrtc: name expression %q: %w", expr, err)
		}
	}
	first := len(keep.ptrs)
	for _, a := range args {
		keep.add(a)
	}
	compileErr := rtc.CompileProgram(prog, int32(len(args)), keep.array(first))
	log, logErr := programLog(prog)
	if compileErr != nil {
		if logErr != nil {
			log = "(log unavailable: " + logErr.Error() + ")"
		}
		return nil, &CompileError{Err: compileErr, Log: log}
	}
	res = &Output{Log: log}
	if opts.LTO {
		if res.LTOIR, err = fetch(prog, rtc.GetLTOIRSize, rtc.GetLTOIR); err != nil {
			return nil, err
		}
	} else {
		if res.PTX, err = fetch(prog, rtc.GetPTXSize, rtc.GetPTX); err != nil {
			return nil, err
		}
		res.PTX = trimNUL(res.PTX)
		if strings.HasPrefix(opts.Arch, "sm_") {
			if res.CUBIN, err = fetch(prog, rtc.GetCUBINSize, rtc.GetCUBIN); err != nil {
				return nil, err
			}
		}
	}
	if len(opts.NameExpressions) > 0 {
		res.LoweredNames = make(map[string]string, len(opts.NameExpressions))
		for _, expr := range opts.NameExpressions {
			var lowered *byte
			if err := rtc.GetLoweredName(prog, keep.add(expr), &lowered); err != nil {
				return nil, fmt.Errorf("nvrtc: lowered name of %q: %w", expr, err)
			}
			res.LoweredNames[expr] = goString(lowered)
		}
	}
	return res, nil
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// goString copies a NUL-terminated C string owned by NVRTC.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

func fetch(prog rtc.Program, size func(rtc.Program, *uintptr) error, get func(rtc.Program, *byte) error) ([]byte, error) {
	var n uintptr
	if err := size(prog, &n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	buf := make([]byte, n)
	if err := get(prog, &buf[0]); err != nil {
		return nil, err
	}
	return buf, nil
}

func programLog(prog rtc.Program) (string, error) {
	b, err := fetch(prog, rtc.GetProgramLogSize, rtc.GetProgramLog)
	return string(trimNUL(b)), err
}

// Version is NVRTC's version, e.g. 13, 0 (nvrtcVersion).
func Version() (major, minor int, err error) {
	var ma, mi int32
	if err := rtc.Version(&ma, &mi); err != nil {
		return 0, 0, err
	}
	return int(ma), int(mi), nil
}

// SupportedArchs lists the architectures NVRTC can target, e.g. 75, 80, …
// (nvrtcGetSupportedArchs).
func SupportedArchs() ([]int, error) {
	var n int32
	if err := rtc.GetNumSupportedArchs(&n); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	archs := make([]int32, n)
	if err := rtc.GetSupportedArchs(&archs[0]); err != nil {
		return nil, err
	}
	out := make([]int, n)
	for i, a := range archs {
		out[i] = int(a)
	}
	return out, nil
}

// LibraryPath is where NVRTC was opened from.
func LibraryPath() (string, error) { return rtc.Load() }
