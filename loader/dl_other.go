//go:build !linux && !windows

package loader

import (
	"errors"
	"runtime"
)

// There is no CUDA here (Open returns an *UnsupportedPlatformError before
// trying anything); these keep the package building.

var errNoLoader = errors.New("no dynamic loader support on " + runtime.GOOS)

func open(string) (uintptr, error) { return 0, errNoLoader }

func lookup(uintptr, string) (uintptr, error) { return 0, errNoLoader }

func closeLib(uintptr) {}
