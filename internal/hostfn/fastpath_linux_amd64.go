//go:build linux && amd64

package hostfn

import (
	"syscall"
	"unsafe"
)

// fastSupported reports that HostFn has the fast path here.
const fastSupported = true

// fastHostFnABI0 is the address of the assembly trampoline
// purecuda_fastHostFn (fastpath_linux_amd64.s).
var fastHostFnABI0 uintptr

func fastTrampoline() uintptr { return fastHostFnABI0 }

const futexWakePrivate = 129 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG

// futexWake wakes the trampoline sleeping on addr. The call never blocks,
// so it need not tell the scheduler.
func futexWake(addr *uint32) {
	_, _, _ = syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakePrivate, 1, 0, 0, 0)
}
