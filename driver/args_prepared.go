package driver

import (
	"reflect"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// Args are kernel arguments marshalled once, for launching many times with
// no allocation (Stream.LaunchArgs). Until Close, and until launches in
// progress have returned, Args keep the kernel's module or library loaded
// and hold the buffers named in them, so neither can be freed while the
// Args can still launch. A graph node made from Args holds them likewise.
//
// Launches of the same Args may run at once from several goroutines, on
// any streams: each launch passes the values as they are when it is made.
// SetArg changes those values, so it must not run concurrently with a
// launch of the same Args or with another SetArg (that is a data race on
// the values; nothing else breaks). A Close racing with launches releases
// what the Args hold only after the launches in progress return; launches
// that start after it fail with ErrClosed.
type Args struct {
	// What LaunchArgs reads comes first, copied from f so that a launch
	// reads neither f nor its module.
	fh      cu.CUfunction
	fctx    *Context
	kparams *unsafe.Pointer
	hold    *argsHold
	checks  uint8 // argsCheckContexts, argsStreamOrdered, argsLibrary

	f       *Function
	blk     argBlock
	cleanup runtime.Cleanup
}

const (
	argsCheckContexts = 1 << iota // a library kernel with buffers: check their contexts per launch
	argsStreamOrdered             // a stream-ordered buffer: note other streams it is used on
	argsLibrary                   // a library kernel: note the contexts it is launched in
	argsOtherContext              // a buffer may belong to another context than the launch's: hold it until the stream passes the launch
)

// argsHold is what Args hold until their last use: the buffers' memory and
// the module or library. Its Object counts the owner and the launches in
// progress; apart from Args, so that the cleanup's argument does not keep
// the Args reachable.
type argsHold struct {
	obj    lifetime.Object
	allocs []*allocation
	ld     lifetime.Ref
}

// Release drops one reference (release.Owner).
func (h *argsHold) Release() error { return h.obj.Release() }

func (h *argsHold) free() error {
	var err error
	for _, a := range h.allocs {
		if e := a.Release(); e != nil && err == nil {
			err = e
		}
	}
	_ = h.ld.Release()
	return lifetime.Counted(err) // the allocation's Release counted it
}

func deferArgs(h *argsHold) { release.Defer(h) }

// NewArgs marshals and checks args for f once.
func (f *Function) NewArgs(args ...any) (*Args, error) {
	const op = "Function.NewArgs"
	if err := f.acquire(op); err != nil {
		return nil, err
	}
	a, err := f.newArgs(op, args)
	if err != nil {
		f.release()
		return nil, err
	}
	return a, nil // a keeps f's reference
}

// newArgs builds Args; on success they own the caller's reference on f's
// module or library.
func (f *Function) newArgs(op string, args []any) (*Args, error) {
	a := &Args{f: f, fh: f.h, fctx: f.ctx}
	a.blk.init()
	for i, v := range args {
		if err := a.blk.marshal(op, i, v, f.ctx, nil); err != nil {
			a.blk.reset()
			return nil, err
		}
	}
	if err := a.blk.check(op, f, nil); err != nil {
		a.blk.reset()
		return nil, err
	}
	if _, err := cu.LaunchKernelProc(); err != nil { // no launch without it
		a.blk.reset()
		return nil, err
	}
	a.kparams = a.blk.finish()
	// The held allocations move to the hold (a copy: the block's own slice
	// points into a, and the cleanup's argument must not keep a reachable).
	h := &argsHold{allocs: slices.Clone(a.blk.allocs), ld: lifetime.RefOf(&f.obj)}
	clear(a.blk.allocs)
	a.blk.allocs = a.blk.allocs[:0]
	if f.ctx == nil {
		a.checks |= argsLibrary
	}
	for _, al := range h.allocs {
		if f.ctx == nil {
			a.checks |= argsCheckContexts | argsOtherContext
		} else if al.ctx.h != f.ctx.h {
			a.checks |= argsOtherContext
		}
		if al.stream != nil {
			a.checks |= argsStreamOrdered
		}
	}
	h.obj.Init(h.free)
	a.hold = h
	a.cleanup = runtime.AddCleanup(a, deferArgs, h)
	return a, nil
}

// SetArg replaces argument i with v, which must have the same size as the
// argument it replaces. v is a value: an integer of fixed size, a float, a
// DevicePtr, or a struct or array of those. A buffer is refused, since Args
// hold the buffers they were made with; make new Args for another one.
// SetArg allocates nothing. Do not call it concurrently with a launch of the
// same Args.
func SetArg[T any](a *Args, i int, v T) error {
	if a == nil {
		return invalid("SetArg", "nil args")
	}
	if a.hold == nil || a.hold.obj.Closed() {
		return notOpen("SetArg", "args")
	}
	if i < 0 || i >= len(a.blk.sizes) {
		return invalid("SetArg", "argument %d of %d", i, len(a.blk.sizes))
	}
	size := unsafe.Sizeof(v)
	if size != uintptr(a.blk.sizes[i]) {
		return invalid("SetArg", "argument %d is %d bytes, %T is %d", i, a.blk.sizes[i], v, size)
	}
	switch any(v).(type) {
	case int, uint:
		return invalid("SetArg", "%T has no fixed C size", v)
	}
	if !plainData(reflect.TypeFor[T]()) {
		return invalid("SetArg", "%T is not plain data (a buffer or a Go pointer): make new Args for another buffer", v)
	}
	*(*T)(a.blk.ptrs[i]) = v
	return nil
}

// acquire holds a for a launch; release lets it go.
func (a *Args) acquire(op string) error {
	if a == nil {
		return invalid(op, "nil args")
	}
	if a.hold == nil || !a.hold.obj.Acquire() {
		return notOpen(op, "args")
	}
	return nil
}

func (a *Args) release() { _ = a.hold.obj.Release() }

// holdRef takes a reference that keeps what the Args hold (the buffers and the
// kernel's module or library) after Close, until it is released: for graph
// nodes made from the Args (seam.Hold).
func (a *Args) holdRef() (lifetime.Ref, error) {
	if err := a.acquire("hold"); err != nil {
		return lifetime.Ref{}, err
	}
	return lifetime.RefOf(&a.hold.obj), nil
}

// Function is the kernel the Args were made for (nil for nil Args).
func (a *Args) Function() *Function {
	if a == nil {
		return nil
	}
	return a.f
}

// Raw calls f with the kernel's CUfunction handle and the kernelParams
// array (void**) of the marshalled values, with the Args held, for
// building a graph node or calling another library. Neither may be kept
// after f returns.
func (a *Args) Raw(f func(fn uintptr, params unsafe.Pointer) error) error {
	const op = "Args.Raw"
	if f == nil {
		return invalid(op, "nil function")
	}
	if err := a.acquire(op); err != nil {
		return err
	}
	defer a.release()
	return f(uintptr(a.fh), unsafe.Pointer(a.kparams))
}

// Close releases the buffers the arguments held and the kernel's module:
// at once, or when the last launch in progress returns. It is idempotent
// and returns the first call's result.
func (a *Args) Close() error {
	if a == nil {
		return invalid("Args.Close", "nil args")
	}
	if a.hold == nil {
		return nil
	}
	a.cleanup.Stop()
	return a.hold.obj.Close()
}

func newParamsPool() *sync.Pool {
	return &sync.Pool{New: func() any {
		p := new(kernelParams)
		p.blk.init()
		return p
	}}
}

// usableIn reports, as an error matching ErrInvalidArgument, whether work
// in context c may use the Args: a module kernel must belong to c, and
// every buffer argument to c or a peer of it. Stream.LaunchArgs checks the
// same; graph nodes made from Args call it (seam.ArgsUsableIn).
func (a *Args) usableIn(c *Context) error {
	const op = "Graph.KernelArgs"
	if err := a.acquire(op); err != nil {
		return err
	}
	defer a.release()
	if c == nil {
		return invalid(op, "nil context")
	}
	if a.fctx != nil && !a.fctx.Same(c) {
		return invalid(op, "kernel %s belongs to another context", a.f.name)
	}
	for _, al := range a.hold.allocs {
		if !al.usableIn(c) {
			return invalid(op, "a buffer argument belongs to another context (enable peer access first)")
		}
	}
	return nil
}
