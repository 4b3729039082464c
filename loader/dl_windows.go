//go:build windows

package loader

import (
	"runtime"
	"syscall"
)

const goos, goarch = runtime.GOOS, runtime.GOARCH

// platformErr is nil: Windows has the CUDA driver.
func platformErr(string) error { return nil }

func open(path string) (uintptr, error) {
	h, err := syscall.LoadLibrary(path)
	return uintptr(h), err
}

func lookup(h uintptr, name string) (uintptr, error) {
	return syscall.GetProcAddress(syscall.Handle(h), name)
}

func closeLib(h uintptr) { _ = syscall.FreeLibrary(syscall.Handle(h)) }
