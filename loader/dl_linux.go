package loader

import (
	"runtime"

	"github.com/ebitengine/purego"
)

// open and lookup keep the goroutine on one OS thread for the call:
// purego reads dlerror after dlopen or dlsym in a second C call, and
// dlerror's message belongs to the thread that failed (on another thread
// it is empty, and the search report would give no reason).
func open(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

func lookup(h uintptr, name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlsym(h, name)
}

func closeLib(h uintptr) { _ = purego.Dlclose(h) }
