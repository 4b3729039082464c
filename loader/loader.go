package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ErrNotFound is matched (with errors.Is) by the error returned when no
// candidate for a library could be opened.
var ErrNotFound = errors.New("library not found")

// ErrWrongLibrary is matched by the error for a file that opens but is not
// the library asked for (it lacks the identifying symbol).
var ErrWrongLibrary = errors.New("not the expected library")

// ErrUnsupportedPlatform is matched by the error from Driver and NVRTC on an
// operating system that has no CUDA driver (anything but Linux and Windows).
// That error matches ErrNotFound too, so code that treats a missing driver as
// "no GPU here" treats these platforms the same way.
var ErrUnsupportedPlatform = errors.New("unsupported platform")

// UnsupportedPlatformError is the error from Driver and NVRTC on an
// operating system that NVIDIA ships no CUDA driver for. Nothing is searched
// there.
type UnsupportedPlatformError struct {
	Library      string // "CUDA driver" or "NVRTC"
	GOOS, GOARCH string
}

func (e *UnsupportedPlatformError) Error() string {
	return fmt.Sprintf("loader: %s library: unsupported platform %s/%s: CUDA runs on Linux and Windows (purecuda supports %s), so nothing was searched",
		e.Library, e.GOOS, e.GOARCH, SupportedPlatforms)
}

// Is reports whether target is ErrUnsupportedPlatform or ErrNotFound.
func (e *UnsupportedPlatformError) Is(target error) bool {
	return target == ErrUnsupportedPlatform || target == ErrNotFound
}

// SupportedPlatforms are the GOOS/GOARCH pairs purecuda is built and tested for.
const SupportedPlatforms = "linux/amd64, linux/arm64, windows/amd64"

// Attempt is one candidate tried and why it failed.
type Attempt struct {
	Path   string
	Reason string
}

// NotFoundError lists every candidate tried for a library.
type NotFoundError struct {
	Library string // "CUDA driver" or "NVRTC"
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

// Is reports whether target is ErrNotFound, or ErrWrongLibrary when the only
// candidate was an override that opened but was the wrong library.
func (e *NotFoundError) Is(target error) bool {
	if target == ErrNotFound {
		return true
	}
	if target == ErrWrongLibrary {
		for _, a := range e.Tried {
			if strings.HasPrefix(a.Reason, wrongPrefix) {
				return true
			}
		}
	}
	return false
}

const wrongPrefix = "opened, but it is not the "

// Library is an opened shared library. It is never closed (the process
// keeps it loaded), and Lookup may run from many goroutines at once.
type Library struct {
	// Kind is "CUDA driver" or "NVRTC".
	Kind string
	// Path is the candidate that opened (a full path or a bare name that the
	// system's loader resolved).
	Path   string
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

// Spec describes a library to find.
type Spec struct {
	Kind       string   // for messages: "CUDA driver", "NVRTC"
	EnvVar     string   // full-path override
	Candidates []string // tried in order when EnvVar is empty
	Probe      string   // a symbol every real copy exports
}

// Open tries the override, or else each candidate, and returns the first that
// opens and exports spec.Probe.
func Open(spec Spec, getenv func(string) string) (*Library, error) {
	cands := spec.Candidates
	if p := getenv(spec.EnvVar); p != "" {
		cands = []string{p}
	}
	nf := &NotFoundError{Library: spec.Kind, EnvVar: spec.EnvVar}
	for _, c := range cands {
		if filepath.IsAbs(c) {
			if _, err := os.Stat(c); err != nil {
				reason := err.Error()
				if errors.Is(err, os.ErrNotExist) {
					reason = "no such file"
				}
				nf.Tried = append(nf.Tried, Attempt{c, reason})
				continue
			}
		}
		h, err := open(c)
		if err != nil {
			// dlerror's text starts with the name again: "libcuda.so.1: libcuda.so.1: cannot open …"
			reason := strings.TrimPrefix(err.Error(), c+": ")
			if strings.TrimSpace(reason) == "" {
				reason = "cannot be opened (the dynamic loader gave no reason)"
			}
			nf.Tried = append(nf.Tried, Attempt{c, reason})
			continue
		}
		if addr, err := lookup(h, spec.Probe); err != nil || addr == 0 {
			closeLib(h)
			nf.Tried = append(nf.Tried, Attempt{c, fmt.Sprintf("%s%s library (no symbol %s)", wrongPrefix, spec.Kind, spec.Probe)})
			continue
		}
		return &Library{Kind: spec.Kind, Path: c, handle: h}, nil
	}
	return nil, nf
}

// DriverSpec is the search for the CUDA driver library on goos/goarch.
func DriverSpec(goos string) Spec {
	s := Spec{Kind: "CUDA driver", EnvVar: "PURECUDA_LIBCUDA", Probe: "cuInit"}
	if goos == "windows" {
		s.Candidates = []string{"nvcuda.dll"}
		return s
	}
	s.Candidates = []string{
		"libcuda.so.1",
		"libcuda.so",
		"/usr/lib/wsl/lib/libcuda.so.1",
		"/usr/local/nvidia/lib64/libcuda.so.1",
	}
	return s
}

// NVRTCSpec is the search for NVRTC on goos/goarch with the given environment.
func NVRTCSpec(goos, goarch string, getenv func(string) string) Spec {
	s := Spec{Kind: "NVRTC", EnvVar: "PURECUDA_LIBNVRTC", Probe: "nvrtcVersion"}
	if goos == "windows" {
		names := []string{"nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll"}
		if p := getenv("CUDA_PATH"); p != "" {
			for _, sub := range []string{`bin\x64`, `bin`} {
				for _, n := range names {
					s.Candidates = append(s.Candidates, p+`\`+sub+`\`+n)
				}
			}
		}
		s.Candidates = append(s.Candidates, names...)
		return s
	}
	names := []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}
	var dirs []string
	for _, env := range []string{"CUDA_PATH", "CUDA_HOME"} {
		if p := getenv(env); p != "" {
			dirs = append(dirs, filepath.Join(p, "lib64"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64")
	switch goarch {
	case "amd64":
		dirs = append(dirs, "/usr/local/cuda/targets/x86_64-linux/lib")
	case "arm64":
		dirs = append(dirs, "/usr/local/cuda/targets/sbsa-linux/lib", "/usr/local/cuda/targets/aarch64-linux/lib")
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if d = filepath.Clean(d); seen[d] {
			continue // CUDA_PATH and CUDA_HOME are often both /usr/local/cuda
		}
		seen[d] = true
		for _, n := range names {
			s.Candidates = append(s.Candidates, filepath.Join(d, n))
		}
	}
	s.Candidates = append(s.Candidates, names...)
	return s
}

var (
	driverOnce = sync.OnceValues(func() (*Library, error) {
		if err := platformErr("CUDA driver"); err != nil {
			return nil, err
		}
		return Open(DriverSpec(goos), os.Getenv)
	})
	nvrtcOnce = sync.OnceValues(func() (*Library, error) {
		if err := platformErr("NVRTC"); err != nil {
			return nil, err
		}
		return Open(NVRTCSpec(goos, goarch, os.Getenv), os.Getenv)
	})
)

// Driver opens the CUDA driver library once per process and returns it (or
// the same error) on every call. On an operating system other than Linux and
// Windows it searches nothing and returns an *UnsupportedPlatformError.
func Driver() (*Library, error) { return driverOnce() }

// NVRTC opens NVRTC once per process and returns it (or the same error) on
// every call. On an operating system other than Linux and Windows it searches
// nothing and returns an *UnsupportedPlatformError.
func NVRTC() (*Library, error) { return nvrtcOnce() }
