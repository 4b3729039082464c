//go:build !(linux && amd64)

package ccall

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// StackFrames reports that here a Short call may grow (move) the caller's
// stack before the C call: pointer arguments must escape (EscapeShort).
const StackFrames = false

// EscapeShort makes p escape to the heap, as Escape does, since Call may
// move the stack here.
func EscapeShort(p unsafe.Pointer) { Escape(p) }

// Call calls f.Fn with the first n arguments and returns its integer result.
// Here it passes a slice of the frame to purego.SyscallN, which allocates
// nothing since the frame is already on the heap.
func (f *Frame) Call(n int) uintptr {
	r1, _, _ := purego.SyscallN(f.Fn, f.Args[:n]...)
	return r1
}

// Call calls f.Fn with f's arguments and returns its integer result. Here
// it copies them into a pooled Frame first, so that purego.SyscallN reads
// them from the heap and allocates nothing.
func (f *Short) Call() uintptr {
	p := Get(f.Fn)
	copy(p.Args[:ShortArgs], f.Args[:])
	r1 := p.Call(ShortArgs)
	Put(p)
	return r1
}

// Run calls each step's function in order and returns how many ran: all
// of them, or those up to and including the first step with Stop set
// whose result (its low 32 bits) is not 0. Each step's R1 holds its
// result. Here each step is a foreign call of its own.
func Run(steps []Step) int { return runEach(steps) }
