// Package trampoline holds purecuda's C-callable trampolines and the handle
// map behind them.
//
// purego.NewCallback allows about 2000 callbacks per process and never frees
// them, so purecuda makes exactly one trampoline per C callback signature, once,
// and passes CUDA an integer id as userData, never a Go pointer. The id names
// an entry in a handle map; the trampoline looks it up and runs it.
//
// A callback runs on a thread CUDA owns. Go code run there must not call CUDA
// (CUDA forbids it) and must not let a panic escape into C: the trampoline
// recovers every panic and hands it to the entry's OnPanic.
//
// This package sits below driver (streams need host functions); the lifetime
// layer builds its owner tables on the same handle map.
package trampoline

import (
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/ebitengine/purego"
)

// Entry is a Go function registered for C to call.
type Entry struct {
	// Fn is the function to run.
	Fn func()
	// Once removes the entry after its first run (stream host functions).
	// Otherwise it stays until Unregister (graph host nodes).
	Once bool
	// OnPanic receives a recovered panic (the value and the stack), if set.
	OnPanic func(p any, stack []byte)
}

var table = struct {
	sync.Mutex
	next uintptr
	m    map[uintptr]*Entry
}{m: map[uintptr]*Entry{}}

// Register stores e and returns the id to pass as userData.
func Register(e *Entry) uintptr {
	table.Lock()
	table.next++
	id := table.next
	table.m[id] = e
	table.Unlock()
	return id
}

// Unregister removes an entry; it reports whether the entry was there.
func Unregister(id uintptr) bool {
	table.Lock()
	_, ok := table.m[id]
	delete(table.m, id)
	table.Unlock()
	return ok
}

// Len is the number of registered entries (for leak checks in tests).
func Len() int {
	table.Lock()
	defer table.Unlock()
	return len(table.m)
}

// Invoke runs the entry id as the trampoline does. It is exported for tests
// that exercise the dispatch without CUDA.
func Invoke(id uintptr) {
	table.Lock()
	e := table.m[id]
	if e != nil && e.Once {
		delete(table.m, id)
	}
	table.Unlock()
	if e == nil {
		return // unknown id: nothing to run, and nothing to crash
	}
	defer func() {
		if p := recover(); p != nil && e.OnPanic != nil {
			e.OnPanic(p, debug.Stack())
		}
	}()
	e.Fn()
}

var hostFn = sync.OnceValues(func() (fn uintptr, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("trampoline: cannot create the host-function callback: %v", p)
		}
	}()
	return purego.NewCallback(func(userData uintptr) uintptr {
		Invoke(userData)
		return 0
	}), nil
})

// HostFn returns the C function pointer of the host-function trampoline
// (CUhostFn: void (*)(void *userData)), creating it on first use.
func HostFn() (uintptr, error) { return hostFn() }
