//go:build windows

package loader

import "syscall"

func open(path string) (uintptr, error) {
	h, err := syscall.LoadLibrary(path)
	return uintptr(h), err
}

func lookup(h uintptr, name string) (uintptr, error) {
	return syscall.GetProcAddress(syscall.Handle(h), name)
}

func closeLib(h uintptr) { _ = syscall.FreeLibrary(syscall.Handle(h)) }
