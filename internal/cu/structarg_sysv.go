//go:build amd64 && !windows

package cu

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// syscallStructArg calls fn with a struct of size bytes (> 16) passed by value
// as parameter number pos, the other arguments given in args in order.
//
// System V x86-64: a struct over 16 bytes is of class MEMORY and is copied
// onto the stack in the argument area, while the integer arguments still take
// the six registers. purego places arguments 7 and up on the stack in order,
// so the registers get args (padded to six) and the stack gets the struct.
//
//go:uintptrescapes
func syscallStructArg(fn uintptr, pos int, s unsafe.Pointer, size uintptr, args ...uintptr) (uintptr, uintptr, uintptr) {
	if len(args) > 6 || size%8 != 0 {
		return uintptr(CUDA_ERROR_NOT_SUPPORTED), 0, 0
	}
	all := make([]uintptr, 6, 6+size/8)
	copy(all, args)
	all = append(all, unsafe.Slice((*uintptr)(s), size/8)...)
	return purego.SyscallN(fn, all...)
}
