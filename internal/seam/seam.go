// Package seam is how package graph reaches what package driver keeps out
// of its public API: raw handles that graph passes to CUDA while it holds
// the objects, and kernel arguments marshalled for a node. It is not part
// of purecuda's public API. Package driver sets the functions in its init;
// every argument typed any is the driver type named in the comment.
package seam

import (
	"reflect"
	"unsafe"

	"github.com/purecuda/cuda/lifetime"
)

// Params are kernel arguments marshalled once for a call that copies them
// (a graph kernel node): the kernelParams array, with the kernel's module or
// library and every buffer argument held until Free, or until the caller
// takes the references with TakeRefs.
type Params interface {
	// Pointer is the kernelParams array (nil for no parameters).
	Pointer() unsafe.Pointer
	// TakeRefs appends the references the parameters hold to dst and hands
	// them to the caller, who releases each once.
	TakeRefs(dst []lifetime.Ref) []lifetime.Ref
	// Free releases the references not taken; the Params are not used
	// after.
	Free()
}

var (
	// Marshal checks args against fn (a *driver.Function), as
	// Stream.Launch does, for a call in ctx (a *driver.Context), and
	// marshals them.
	Marshal func(fn, ctx any, args []any) (Params, error)
	// Function returns fn's CUfunction and, for a library kernel, its
	// CUkernel (fn a *driver.Function, held by the caller).
	Function func(fn any) (function, kernel uintptr)
	// Context returns ctx's CUcontext (ctx a *driver.Context, held).
	Context func(ctx any) uintptr
	// Stream returns s's CUstream (s a *driver.Stream, held).
	Stream func(s any) uintptr
	// Event returns e's CUevent (e a *driver.Event, held).
	Event func(e any) uintptr
	// Hold takes a reference on x that keeps its CUDA object (and what it
	// holds) alive after the owner's Close, until the reference is
	// released: for a graph node or a capture that names x. x is a
	// *driver.Context, Stream, Event, Function or Args, or a *driver.Buffer,
	// HostBuffer or Registered of any element type; Hold fails for a nil
	// or closed x and for anything else.
	Hold func(x any) (lifetime.Ref, error)
	// MarshalArg marshals v as one kernel argument of a call in ctx (a
	// *driver.Context), argument i, as Stream.Launch does (op names the caller in
	// errors): its bytes, and for a buffer a reference on its memory (the
	// zero Ref for anything else) that the caller releases once.
	MarshalArg func(op string, ctx any, i int, v any) ([]byte, lifetime.Ref, error)
	// PlainData reports whether values of t hold no Go pointers.
	PlainData func(t reflect.Type) bool
	// ArgsUsableIn fails, matching driver.ErrInvalidArgument, when work in
	// ctx may not use a (a *driver.Args, ctx a *driver.Context).
	ArgsUsableIn func(a, ctx any) error
	// RegisterHost registers the pages of Go memory [p, p+bytes) with CUDA
	// for work in ctx (a *driver.Context) and pins it, until the returned
	// owner is released (once no work may use the memory); see
	// driver.RegisterHost.
	RegisterHost func(op string, ctx any, p unsafe.Pointer, bytes uintptr) (Owner, error)
	// TrimStaging frees the page-locked blocks that ctx (a *driver.Context)
	// keeps for copies of Go slices: for tests that count host allocations.
	TrimStaging func(ctx any) error
)

// Owner is what must be released once (release.Owner).
type Owner interface{ Release() error }

// UseOn, for a library that queues work naming buffer b on stream s
// (package nccl): b is a *driver.Buffer of any element type and s a
// *driver.Stream, held by the caller. It checks that b is open and that its
// memory belongs to s's context, notes s as a stream that uses
// stream-ordered memory (so that its free waits for s), and returns b's
// device address and size in bytes with a reference on its memory, which
// the caller releases once (or hands to a capture's sink).
var UseOn func(op string, b, s any) (ptr, bytes uintptr, ref lifetime.Ref, err error)

// Marker is a point in a stream's work (an event recorded after the work
// queued so far), for a library that must wait for that work without
// blocking a thread on it (package nccl's communicators, whose kernels may
// wait for a peer that is gone).
type Marker interface {
	// Passed reports, without waiting, whether the stream has run the
	// work queued before the marker. After an unrecoverable GPU error it
	// reports true: nothing runs any more.
	Passed() (bool, error)
	// Release destroys the marker; it is not used after.
	Release()
}

// Mark records a Marker on s (a *driver.Stream the caller holds). While s
// is being captured it records nothing and reports ok false: try again
// later (a capture's work is the graph's, not the stream's).
var Mark func(s any) (m Marker, ok bool, err error)

// Synchronizing runs call, a release that waits for the device's work in
// context ctx (a *driver.Context the caller holds; another library's
// destroy, such as cublasDestroy), as the driver's own frees and unloads
// run: after the context's work, with ctx current and the thread's capture
// mode relaxed; unless a stream of ctx is being captured, when the wait
// would fail and invalidate the capture: then it runs nothing, hands retry
// to that capture's end and reports ran false.
var Synchronizing func(ctx any, retry func() error, call func() error) (ran bool, err error)

// GroupHolds, set by package nccl, reports whether the calling goroutine
// runs the function of an NCCL Group whose operations hold s (a
// *driver.Stream) until the group ends: a capture beginning or ending on s
// there would wait for those operations, and so for the function itself.
var GroupHolds func(s any) bool
