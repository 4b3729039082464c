package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/purecuda/cuda/internal/errs"
	"github.com/purecuda/cuda/internal/loadspec"
)

// Kind names a library the loader can find.
type Kind uint8

// The libraries, with the variable that names one's full path (Kind.EnvVar).
const (
	KindDriver    Kind = iota + 1 // the CUDA driver: libcuda.so.1, nvcuda.dll (PURECUDA_LIBCUDA)
	KindNVRTC                     // NVRTC, the run-time compiler (PURECUDA_LIBNVRTC)
	KindNCCL                      // NCCL, the collectives library; Linux only (PURECUDA_LIBNCCL)
	KindCUBLAS                    // cuBLAS (PURECUDA_LIBCUBLAS)
	KindCUBLASLt                  // cuBLASLt (PURECUDA_LIBCUBLASLT)
	KindNVJitLink                 // nvJitLink, the run-time linker (PURECUDA_LIBNVJITLINK)
)

var descs = [...]*loadspec.Desc{
	KindDriver:    &loadspec.Driver,
	KindNVRTC:     &loadspec.NVRTC,
	KindNCCL:      &loadspec.NCCL,
	KindCUBLAS:    &loadspec.CUBLAS,
	KindCUBLASLt:  &loadspec.CUBLASLt,
	KindNVJitLink: &loadspec.NVJitLink,
}

func (k Kind) desc() *loadspec.Desc {
	if k == 0 || int(k) >= len(descs) {
		return nil
	}
	return descs[k]
}

// String is the library's name for messages: "CUDA driver", "NVRTC",
// "NCCL", "cuBLAS", "cuBLASLt" or "nvJitLink"; "Kind(N)" for any other value.
func (k Kind) String() string {
	if d := k.desc(); d != nil {
		return d.Name
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// EnvVar is the environment variable that names the library's full path,
// such as PURECUDA_LIBCUDA; "" for a value that is not a Kind above.
func (k Kind) EnvVar() string {
	if d := k.desc(); d != nil {
		return d.EnvVar
	}
	return ""
}

// ErrNotFound is matched (with errors.Is) by the error returned when no
// candidate for a library could be opened.
var ErrNotFound = errors.New("library not found")

// ErrWrongLibrary is matched by the error for a file that opens but is not
// the library asked for (it lacks the identifying symbol).
var ErrWrongLibrary = errors.New("not the expected library")

// ErrUnsupportedPlatform is matched by the error for a library that NVIDIA
// does not ship for this operating system: any of them outside Linux and
// Windows, NCCL on Windows. That error matches ErrNotFound too, so code
// that treats a missing library as "not here" treats these platforms the
// same way.
var ErrUnsupportedPlatform = errors.New("unsupported platform")

// UnsupportedPlatformError is the error for a library that NVIDIA ships no
// build of for this operating system. Nothing is searched there.
type UnsupportedPlatformError struct {
	Library      Kind
	GOOS, GOARCH string
}

func (e *UnsupportedPlatformError) Error() string {
	if cudaOS(e.GOOS) {
		return fmt.Sprintf("loader: %s library: unsupported platform %s/%s: NVIDIA ships it for Linux only, so nothing was searched",
			e.Library, e.GOOS, e.GOARCH)
	}
	return fmt.Sprintf("loader: %s library: unsupported platform %s/%s: CUDA runs on Linux and Windows (purecuda supports %s), so nothing was searched",
		e.Library, e.GOOS, e.GOARCH, SupportedPlatforms)
}

// Is reports whether target is ErrUnsupportedPlatform or ErrNotFound, or,
// on an operating system without CUDA, driver.ErrNoGPU.
func (e *UnsupportedPlatformError) Is(target error) bool {
	return target == ErrUnsupportedPlatform || target == ErrNotFound ||
		target == errs.NoGPU && !cudaOS(e.GOOS)
}

func cudaOS(goos string) bool { return goos == "linux" || goos == "windows" }

// SupportedPlatforms are the GOOS/GOARCH pairs purecuda is built and tested for.
const SupportedPlatforms = "linux/amd64, linux/arm64, windows/amd64"

// Attempt is one place tried and why nothing opened there.
type Attempt struct {
	Path   string // a full path, a bare name for the system's search, or a directory (pattern) looked in
	Reason string
}

// NotFoundError lists every place tried for a library, in order.
type NotFoundError struct {
	Library Kind
	EnvVar  string // the override variable
	Tried   []Attempt
}

func (e *NotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "loader: %s library not found (set %s to its full path to choose one); tried:", e.Library, e.EnvVar)
	for _, a := range e.Tried {
		fmt.Fprintf(&b, "\n\t%s: %s", a.Path, a.Reason)
	}
	return b.String()
}

// Is reports whether target is ErrNotFound; ErrWrongLibrary when a
// candidate opened but was the wrong library; or, for the CUDA driver,
// driver.ErrNoGPU.
func (e *NotFoundError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return true
	case errs.NoGPU:
		return e.Library == KindDriver
	case ErrWrongLibrary:
		for _, a := range e.Tried {
			if strings.HasPrefix(a.Reason, wrongPrefix) {
				return true
			}
		}
	}
	return false
}

const wrongPrefix = "opened, but it is not the "

// Library is an opened shared library. It stays loaded for the life of the
// process (it is never closed), and Lookup may run from many goroutines at
// once.
type Library struct {
	Kind Kind
	// Path is the candidate that opened (a full path or a bare name that the
	// system's loader resolved).
	Path string
	// Tried lists the places tried before Path, in order, and why nothing
	// opened there (read only: every caller shares it).
	Tried  []Attempt
	handle uintptr
}

// Lookup returns the address of an exported symbol.
func (l *Library) Lookup(name string) (uintptr, error) {
	if l == nil || l.handle == 0 {
		return 0, fmt.Errorf("loader: lookup of %s in a library that is not open", name)
	}
	addr, err := lookup(l.handle, name)
	if err != nil {
		return 0, fmt.Errorf("loader: %s has no symbol %s: %w", l.Path, name, err)
	}
	if addr == 0 {
		return 0, fmt.Errorf("loader: %s has no symbol %s", l.Path, name)
	}
	return addr, nil
}

// openIn searches for k in env (see the package doc for the order) and
// returns the first candidate that opens and exports k's identifying symbol.
func openIn(k Kind, env loadspec.Env) (*Library, error) {
	d := k.desc()
	if d == nil {
		return nil, fmt.Errorf("loader: Open(%v): not a library kind: %w", k, errs.InvalidArgument)
	}
	if d.Unsupported(env.GOOS) {
		return nil, &UnsupportedPlatformError{Library: k, GOOS: env.GOOS, GOARCH: env.GOARCH}
	}
	nf := &NotFoundError{Library: k, EnvVar: d.EnvVar}
	for _, c := range loadspec.Search(d, env).Candidates {
		if c.Missing != "" {
			nf.Tried = append(nf.Tried, Attempt{c.Path, c.Missing})
			continue
		}
		for _, p := range loadspec.NeedsOf(d, env, c.Path) {
			_, _ = open(p) // kept open; one that fails is named by c's own dlopen error
		}
		h, reason := try(c.Path, d)
		if h == 0 {
			nf.Tried = append(nf.Tried, Attempt{c.Path, reason})
			continue
		}
		for _, p := range loadspec.CompanionsOf(d, env, c.Path) {
			_, _ = open(p) // kept open; one that fails is NVRTC's to report when it needs it
		}
		return &Library{Kind: k, Path: c.Path, Tried: nf.Tried, handle: h}, nil
	}
	return nil, nf
}

// try opens path and checks that it is d; it returns the handle, or 0 and
// why not.
func try(path string, d *loadspec.Desc) (uintptr, string) {
	if filepath.IsAbs(path) {
		if _, err := os.Stat(path); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return 0, "no such file"
			}
			return 0, err.Error()
		}
	}
	h, err := open(path)
	if err != nil || h == 0 {
		// dlerror's text starts with the name again: "libcuda.so.1: libcuda.so.1: cannot open …"
		reason := ""
		if err != nil {
			reason = strings.TrimPrefix(err.Error(), path+": ")
		}
		if strings.TrimSpace(reason) == "" {
			reason = "cannot be opened (the dynamic loader gave no reason)"
		}
		return 0, reason
	}
	if addr, err := lookup(h, d.Probe); err != nil || addr == 0 {
		closeLib(h)
		return 0, fmt.Sprintf("%s%s library (no symbol %s)", wrongPrefix, d.Name, d.Probe)
	}
	return h, ""
}

var opened [len(descs)]func() (*Library, error)

func init() {
	for k := range opened {
		opened[k] = sync.OnceValues(func() (*Library, error) { return openIn(Kind(k), loadspec.OS()) })
	}
}

// Open finds and opens the library k once per process and returns it (or
// the same error) on every call; the package doc gives the search order.
// When nothing opens, the error is a *NotFoundError listing every place
// tried; where NVIDIA ships no build of k for this operating system, an
// *UnsupportedPlatformError (nothing is searched). A k that is none of the
// Kinds above gets an error, never a panic.
func Open(k Kind) (*Library, error) {
	if k.desc() == nil {
		return openIn(k, loadspec.Env{})
	}
	return opened[k]()
}

// Driver is Open(KindDriver): the CUDA driver library.
func Driver() (*Library, error) { return Open(KindDriver) }

// NVRTC is Open(KindNVRTC): the NVRTC library.
func NVRTC() (*Library, error) { return Open(KindNVRTC) }
