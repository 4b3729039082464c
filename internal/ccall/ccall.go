// Package ccall makes generated C calls free of allocations and lean: a
// pooled call frame, a direct call path, Escape, the Short frame that hot
// calls keep on their own stack, and Run, which makes a sequence of C
// calls (a context switch, a library call, the switch back) in one
// crossing into C.
//
// purego.SyscallN is variadic and marked go:uintptrescapes, so a call written
// as SyscallN(fn, a, b, c) heap-allocates its argument slice every time (seen
// with purego v0.11.3: 1 allocation per call). The generated tables instead
// fill a pooled Frame and call it: on linux/amd64 through a small assembly
// trampoline run by runtime.cgocall (the path purego itself takes, without
// its argument copies and second pool), elsewhere by passing a slice of the
// frame to purego.SyscallN. Neither allocates.
//
// Filling the frame converts pointers to uintptr outside the call expression,
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

// Frame is one C call: the function, its integer arguments and the result.
// The layout is read by the assembly trampoline.
type Frame struct {
	Fn   uintptr
	R1   uintptr // before Args, so a short call touches few cache lines
	Args [MaxArgs]uintptr
}

var pool = sync.Pool{New: func() any { return new(Frame) }}

// Get returns a frame from the pool, set to call fn.
func Get(fn uintptr) *Frame {
	f := pool.Get().(*Frame)
	f.Fn = fn
	return f
}

// Put returns a frame to the pool.
func Put(f *Frame) { pool.Put(f) }

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

// ShortArgs is how many arguments a Short frame holds: the most the direct
// call path passes.
const ShortArgs = 12

// Short is a call frame small enough to live on the caller's stack, for hot
// calls of up to ShortArgs arguments (a kernel launch): a frame there
// needs no pool and no flag saying whose it is, and it is in the caller's
// cache lines. Its layout is Frame's up to Args[ShortArgs-1], so the same
// trampoline calls it.
//
// A Short frame's arguments must not point into a goroutine stack unless
// no function that may grow the stack runs between their conversion to
// uintptr and the call: a moved stack would leave them stale. Where
// StackFrames is true, Call itself never grows the stack; elsewhere it
// may, and pointer arguments must be passed through EscapeShort first.
// Pointers to the heap are safe while the caller keeps the objects alive
// (runtime.KeepAlive). Go code that C calls back during the call (a
// driver API callback written in Go) would run on the caller's stack and
// could move it: a call that may call back into Go must not take pointers
// into the stack.
type Short struct {
	Fn   uintptr
	R1   uintptr
	Args [ShortArgs]uintptr
}
