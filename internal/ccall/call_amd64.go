//go:build linux && amd64

package ccall

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// runtime.cgocall runs fn (C calling convention, arg in DI) on the system
// stack, with the goroutine marked as in a system call. purego calls it the
// same way; the runtime keeps it linkable for that reason.
//
//go:linkname runtime_cgocall runtime.cgocall
//go:noescape
func runtime_cgocall(fn uintptr, arg unsafe.Pointer) int32

// callFrameABI0, callFrameLongABI0 and callSeqABI0 are the addresses of
// the assembly trampolines callFrame, callFrameLong and callSeq.
var callFrameABI0, callFrameLongABI0, callSeqABI0 uintptr

// directArgs is how many arguments the short trampoline passes (6 in
// registers, 6 on the stack); longer calls, up to MaxArgs, take the long
// one (26 on the stack), which costs a few more copies.
const directArgs = 12

// Call calls f.Fn with the first n arguments (at most MaxArgs) and returns
// its integer result. Floating-point arguments are not supported (the
// generated tables bind those functions with purego.RegisterFunc).
func (f *Frame) Call(n int) uintptr {
	if n > directArgs {
		if n > MaxArgs {
			r1, _, _ := purego.SyscallN(f.Fn, f.Args[:]...) // fails: purego takes at most MaxArgs
			return r1
		}
		runtime_cgocall(callFrameLongABI0, unsafe.Pointer(f))
		return f.R1
	}
	runtime_cgocall(callFrameABI0, unsafe.Pointer(f))
	return f.R1
}

// StackFrames reports that a Short call cannot move the caller's stack
// between its setup and the C call: Call is nosplit and enters C directly.
const StackFrames = true

// EscapeShort does nothing here: pointers into the stack are safe in a
// Short call (see StackFrames).
func EscapeShort(unsafe.Pointer) {}

// Call calls f.Fn with f's arguments and returns its integer result. It
// runs through the direct path; the stack cannot move during the C call (a
// goroutine in a system call keeps its stack, unless C calls back into Go
// on it), so f may be on the stack.
//
//go:nosplit
func (f *Short) Call() uintptr {
	runtime_cgocall(callFrameABI0, unsafe.Pointer(f))
	return f.R1
}

// Run calls each step's function in order, in one foreign call, and
// returns how many ran: all of them, or those up to and including the
// first step with Stop set whose result (its low 32 bits) is not 0. Each
// step's R1 holds its result. The steps may be on the caller's stack:
// Run and runtime.cgocall cannot move it before the C call (nosplit), and
// the header passes them as a pointer.
//
//go:nosplit
func Run(steps []Step) int {
	if len(steps) == 0 {
		return 0
	}
	h := seqHeader{first: &steps[0], n: uintptr(len(steps))}
	runtime_cgocall(callSeqABI0, unsafe.Pointer(&h))
	return int(h.done)
}
