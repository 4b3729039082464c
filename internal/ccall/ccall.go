// Package ccall holds the two helpers that make generated C calls free of
// allocations: a pool of argument arrays, and Escape.
//
// purego.SyscallN is variadic and marked go:uintptrescapes, so a call written
// as SyscallN(fn, a, b, c) heap-allocates its argument slice every time (seen
// with purego v0.11.3: 1 allocation per call). The generated tables instead
// fill a pooled array and pass a slice of it, which allocates nothing.
//
// Filling the array converts pointers to uintptr outside the call expression,
// which loses go:uintptrescapes' guarantee that the pointed-at objects are on
// the heap, where they never move. Escape gives that guarantee back: every
// pointer argument is passed through it first, so the compiler allocates the
// object on the heap (once, where the caller declares it), and
// runtime.KeepAlive after the call keeps it alive until C returns.
package ccall

import (
	"sync"
	"unsafe"
)

// MaxArgs is the most arguments a generated call passes.
const MaxArgs = 32

var pool = sync.Pool{New: func() any { return new([MaxArgs]uintptr) }}

// Args returns an argument array from the pool.
func Args() *[MaxArgs]uintptr { return pool.Get().(*[MaxArgs]uintptr) }

// Release returns an argument array to the pool.
func Release(a *[MaxArgs]uintptr) { pool.Put(a) }

var sink struct {
	on bool
	p  unsafe.Pointer
}

// Escape makes p escape to the heap in the compiler's analysis; it does
// nothing at run time beyond one load and branch.
func Escape(p unsafe.Pointer) {
	if sink.on {
		sink.p = p
	}
}
