package loader

import (
	"runtime"

	"github.com/ebitengine/purego"
)

const goos, goarch = runtime.GOOS, runtime.GOARCH

// platformErr is nil: Linux has the CUDA driver.
func platformErr(string) error { return nil }

func open(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

func lookup(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

func closeLib(h uintptr) { _ = purego.Dlclose(h) }
