//go:build !linux && !windows

package loader

import (
	"errors"
	"runtime"
)

const goos, goarch = runtime.GOOS, runtime.GOARCH

// platformErr says that there is no CUDA driver to look for: NVIDIA ships
// libcuda for Linux and Windows only (macOS lost CUDA with 10.2).
func platformErr(kind string) error {
	return &UnsupportedPlatformError{Library: kind, GOOS: goos, GOARCH: goarch}
}

var errNoLoader = errors.New("no dynamic loader support on " + goos)

func open(string) (uintptr, error) { return 0, errNoLoader }

func lookup(uintptr, string) (uintptr, error) { return 0, errNoLoader }

func closeLib(uintptr) {}
