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

func init() { errs.InvalidArgument = ErrInvalidArgument } // nvrtc's refusals wrap it

func invalid(op, format string, args ...any) error {
	return fmt.Errorf("driver: %s: %s: %w", op, fmt.Sprintf(format, args...), ErrInvalidArgument)
}

// notOpen is the error for an object that is closed, or a zero value that
// was never opened.
func notOpen(op, what string) error {
	return fmt.Errorf("driver: %s: %s is closed (or a zero value, not made by this package): %w", op, what, ErrClosed)
}

var initOnce = sync.OnceValue(func() error {
	if _, _, err := cu.Load(); err != nil {
		return fmt.Errorf("driver: cannot load the CUDA driver: %w", err)
	}
	return cu.Init(0)
})

// Init loads the CUDA driver library and initialises it (cuInit). It is
// idempotent and every other entry point calls it; its error says where the
// loader looked when no driver was found (errors.Is(err, loader.ErrNotFound)).
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
	return p, err
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
