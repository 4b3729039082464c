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

// callFrameABI0 is the address of the assembly trampoline callFrame.
var callFrameABI0 uintptr

// directArgs is how many arguments the trampoline passes (6 in registers,
// 6 on the stack); longer calls go through purego.
const directArgs = 12

// Call calls f.Fn with the first n arguments and returns its integer result.
// Floating-point arguments are not supported (the generated tables bind those
// functions with purego.RegisterFunc).
func (f *Frame) Call(n int) uintptr {
	if n > directArgs {
		r1, _, _ := purego.SyscallN(f.Fn, f.Args[:n]...)
		return r1
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
