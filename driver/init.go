package driver

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/errs"
)

// ErrClosed is matched by errors from using an object after Close.
var ErrClosed = errors.New("use of a closed object")

// ErrNilStream is matched by the error for stream-ordered work given a nil
// stream. purecuda never falls back to the default stream silently: ask for
// it by name with (*Context).LegacyStream.
var ErrNilStream = errors.New("nil stream: stream-ordered work must name its stream (ctx.LegacyStream() is the default stream)")

// ErrInvalidArgument is matched by errors for arguments purecuda rejects
// before calling CUDA (sizes, dimensions, kernel arguments, nil objects),
// package nvrtc's included.
var ErrInvalidArgument = errors.New("invalid argument")

// ErrNoGPU is matched by every error that means this machine has no usable
// GPU: no CUDA driver library found (or PURECUDA_LIBCUDA naming something
// else), an operating system without CUDA, no CUDA device (cuInit's
// CUDA_ERROR_NO_DEVICE, or CUDA_ERROR_STUB_LIBRARY: a toolkit's stub
// libcuda found instead of the driver's), or a driver older than CUDA 12.0,
// the oldest purecuda runs on. A missing NVRTC does not match it: that is
// a missing toolkit on a machine that may well have a GPU.
var ErrNoGPU = errors.New("no usable GPU")

func init() {
	errs.InvalidArgument = ErrInvalidArgument // nvrtc's refusals wrap it
	errs.NoGPU = ErrNoGPU                     // the loader's errors match it
}

func invalid(op, format string, args ...any) error {
	return fmt.Errorf("driver: %s: %s: %w", op, fmt.Sprintf(format, args...), ErrInvalidArgument)
}

// notOpen is the error for an object that is closed, or a zero value that
// was never opened.
func notOpen(op, what string) error {
	return fmt.Errorf("driver: %s: %s is closed (or a zero value, not made by this package): %w", op, what, ErrClosed)
}

// minDriverVersion is the oldest driver purecuda runs on: CUDA 12.0 (R525).
const minDriverVersion = 12000

var initOnce = sync.OnceValue(func() error {
	path, version, err := cu.Load()
	if err != nil {
		return fmt.Errorf("driver: cannot load the CUDA driver: %w", loadError(err))
	}
	return initDriver(path, version, cu.Init)
})

// loadError is cu.Load's error, marked ErrNoGPU where it comes from the
// toolkit's stub libcuda (its cuDriverGetVersion may already refuse). A
// library that was not found matches ErrNoGPU by itself.
func loadError(err error) error {
	if errors.Is(err, ErrStubLibrary) && !errors.Is(err, ErrNoGPU) {
		return fmt.Errorf("%w: %w", ErrNoGPU, err)
	}
	return err
}

// initDriver checks the loaded driver's version and calls cuInit; an error
// that means no usable GPU matches ErrNoGPU.
func initDriver(path string, version int, cuInit func(uint32) error) error {
	if version < minDriverVersion {
		return fmt.Errorf("driver: %s implements CUDA %s; purecuda needs CUDA %s (driver R525) or newer: %w",
			path, cu.FormatVersion(version), cu.FormatVersion(minDriverVersion), ErrNoGPU)
	}
	err := cuInit(0)
	if errors.Is(err, ErrNoDevice) || errors.Is(err, ErrStubLibrary) {
		return fmt.Errorf("driver: %w: %w", ErrNoGPU, err)
	}
	return err
}

// Init loads the CUDA driver library and initialises it (cuInit). It is
// idempotent and every other entry point calls it. When the machine has no
// usable GPU its error matches ErrNoGPU; when no driver library was found it
// also says where the loader looked (and matches loader.ErrNotFound).
func Init() error { return initOnce() }

// Version returns the CUDA version the driver implements, e.g. 13, 0 for
// CUDA 13.0 (cuDriverGetVersion, which reports 13000), in the same form as
// nvrtc.Version.
func Version() (major, minor int, err error) {
	if err := Init(); err != nil {
		return 0, 0, err
	}
	_, v, err := cu.Load()
	if err != nil {
		return 0, 0, err
	}
	return v / 1000, v % 1000 / 10, nil
}

// LibraryPath is where the driver library was opened from.
func LibraryPath() (string, error) {
	p, _, err := cu.Load()
	return p, loadError(err)
}

// cstring returns a NUL-terminated copy of s; a string with a NUL byte in
// it would be cut short by C, so it is refused.
func cstring(op, what, s string) (*byte, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, invalid(op, "%s %q contains a NUL byte", what, s)
	}
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0], nil
}

// gostring reads a NUL-terminated C string from a byte buffer.
func gostring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// bound runs f with the OS thread locked and c current on it: the current
// CUDA context is per OS thread, and goroutines move between threads. The
// caller holds a reference on c (see Context.with, the verb every method
// uses).
//
// It pushes c and pops it again, with defer, so that not even a panic in f
// leaves c current (cuCtxSetCurrent(NULL) pops, and needs no out-parameter,
// which would cost an allocation). A context left current would outlive its
// use: once destroyed, CUDA keeps it current on every thread that had it,
// and calls there fail with CUDA_ERROR_CONTEXT_IS_DESTROYED, even calls
// that name their own stream. f must not destroy c or change the thread's
// context stack.
func bound(c *Context, f func() error) error { return boundTo(c.h, f) }

// boundTo is bound for a context known by its handle alone.
func boundTo(h cu.CUcontext, f func() error) (err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.CtxPushCurrent(h); err != nil {
		return err
	}
	defer func() {
		if perr := cu.CtxSetCurrent(0); err == nil {
			err = perr
		}
	}()
	return f()
}
