package seam

import (
	"unsafe"

	"github.com/purecuda/cuda/lifetime"
)

// A call through a function variable or an interface makes the compiler
// assume that every slice passed escapes, so a graph node add would move
// its variadic arguments and its reference buffer to the heap: two
// allocations per add that a direct call to driver does not make. The
// implementations behind Marshal and Params.TakeRefs keep no slice they are
// given (go build -gcflags=-m on driver reports "leaking param content:
// args" for Marshal's, not "leaking param"), so the calls below hide the
// slices' backing arrays from escape analysis. What the arguments point to
// still escapes as it does for Stream.Launch (leakContent).

// MarshalArgs calls Marshal without moving args to the heap.
func MarshalArgs(fn, ctx any, args []any) (Params, error) {
	leakContent(args)
	return Marshal(fn, ctx, unsafe.Slice((*any)(noescape(unsafe.Pointer(unsafe.SliceData(args)))), len(args)))
}

// TakeRefs calls p.TakeRefs without moving dst's array to the heap.
func TakeRefs(p Params, dst []lifetime.Ref) []lifetime.Ref {
	return p.TakeRefs(unsafe.Slice((*lifetime.Ref)(noescape(unsafe.Pointer(unsafe.SliceData(dst)))), cap(dst))[:len(dst)])
}

// noescape hides p from escape analysis (as the runtime's noescape does).
func noescape(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return *(*unsafe.Pointer)(unsafe.Pointer(&x))
}

// leak is never set: leakContent's store never runs, but escape analysis
// sees it, so what args' elements point to escapes as Marshal's
// implementation may keep it (a buffer it takes a reference on).
var leak struct {
	on bool
	v  any
}

//go:noinline
func leakContent(args []any) {
	if leak.on && len(args) > 0 {
		leak.v = args[0]
	}
}
