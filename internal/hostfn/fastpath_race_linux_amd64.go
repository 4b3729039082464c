//go:build race && linux && amd64

package hostfn

import (
	"unsafe"
	_ "unsafe" // for go:linkname
)

// runtime.cgocall is how purego and internal/ccall call C; the runtime
// keeps it linkable for that reason.
//
//go:linkname runtime_cgocall runtime.cgocall
//go:noescape
func runtime_cgocall(fn uintptr, arg unsafe.Pointer) int32

// nopABI0 is the address of purecuda_nop, a C function that does nothing.
var nopABI0 uintptr

// raceSync tells the race detector what the fast path's atomics in
// assembly, which it cannot see, order: the server's callback and the
// threads that wait for it through C. A call into C is, to the race
// detector, a release before it and an acquire after it of the one
// variable that stands for synchronisation in C; the waiting threads make
// C calls too (cuStreamSynchronize, pthread_join).
func raceSync() { runtime_cgocall(nopABI0, nil) }
