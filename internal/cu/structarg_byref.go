//go:build !amd64 || windows

package cu

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// syscallStructArg calls fn with a struct of size bytes (> 16) passed by value
// as parameter number pos, the other arguments given in args in order.
//
// AAPCS64 (arm64) and the Windows x64 convention pass such a struct by
// reference: the caller makes a copy and passes its address in the
// parameter's place.
//
//go:uintptrescapes
func syscallStructArg(fn uintptr, pos int, s unsafe.Pointer, size uintptr, args ...uintptr) (uintptr, uintptr, uintptr) {
	cp := make([]byte, size)
	copy(cp, unsafe.Slice((*byte)(s), size))
	all := make([]uintptr, 0, len(args)+1)
	all = append(all, args[:pos]...)
	all = append(all, uintptr(unsafe.Pointer(&cp[0])))
	all = append(all, args[pos:]...)
	r1, r2, err := purego.SyscallN(fn, all...)
	runtime.KeepAlive(cp)
	return r1, r2, err
}
