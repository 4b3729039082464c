package driver

import (
	"unsafe"

	"github.com/purecuda/cuda/lifetime"
)

// The handles below are for purecuda's graph layer and for other CUDA
// libraries. Each is valid only while the caller holds a reference taken
// with the object's Hold (or runs inside its Raw): a handle read without
// one may name an object that is already destroyed.

// Handle is the CUcontext (0 for a nil Context).
func (c *Context) Handle() uintptr {
	if c == nil {
		return 0
	}
	return uintptr(c.h)
}

// Handle is the CUstream (0 for a nil Stream); CU_STREAM_LEGACY for the
// legacy default stream.
func (s *Stream) Handle() uintptr {
	if s == nil {
		return 0
	}
	return uintptr(s.h)
}

// IsLegacy reports whether s is the legacy default stream, on which calls
// need the context current (Raw binds it).
func (s *Stream) IsLegacy() bool { return s != nil && s.special }

// Handle is the CUevent (0 for a nil Event).
func (e *Event) Handle() uintptr {
	if e == nil {
		return 0
	}
	return uintptr(e.h)
}

// Handles are the kernel's CUfunction and, for a library kernel, its
// CUkernel (0 for a module kernel).
func (f *Function) Handles() (function, kernel uintptr) {
	if f == nil {
		return 0, 0
	}
	return uintptr(f.h), uintptr(f.kernel)
}

// KernelParams are kernel arguments marshalled once for a raw call that
// copies them, such as adding a graph kernel node: the kernelParams array
// (void**), with the kernel's module or library and every buffer argument
// held until Free, or until the caller takes those references with
// TakeRefs. They come from a pool: Free returns them, and they must not be
// used after.
type KernelParams struct {
	blk  argBlock
	f    *Function
	fref lifetime.Ref
}

// Marshal checks args against f, as Stream.Launch does, with c as the
// context the call will run in (nil for a library kernel whose buffers
// name it), and marshals them. Arguments are the same as Launch's.
func (f *Function) Marshal(c *Context, args ...any) (*KernelParams, error) {
	const op = "Function.Marshal"
	if err := f.acquire(op); err != nil {
		return nil, err
	}
	if f.ctx != nil && c != nil && !f.ctx.Same(c) {
		f.release()
		return nil, invalid(op, "kernel %s belongs to another context", f.name)
	}
	if c == nil {
		c = f.ctx
	}
	p := paramsPool.Get().(*KernelParams)
	p.f, p.fref = f, lifetime.RefOf(&f.obj)
	for i, v := range args {
		if err := p.blk.marshal(op, i, v, c, nil); err != nil {
			p.Free()
			return nil, err
		}
	}
	if err := p.blk.check(op, f, c); err != nil {
		p.Free()
		return nil, err
	}
	return p, nil
}

var paramsPool = newParamsPool()

// Pointer is the kernelParams array (nil for a kernel without parameters).
func (p *KernelParams) Pointer() unsafe.Pointer {
	if p == nil {
		return nil
	}
	return unsafe.Pointer(p.blk.finish())
}

// Function is the kernel the parameters were marshalled for.
func (p *KernelParams) Function() *Function {
	if p == nil {
		return nil
	}
	return p.f
}

// TakeRefs appends the references the parameters hold (the kernel's module
// or library first, then each buffer argument) to dst and hands them to the
// caller, who must release each exactly once; Free then releases nothing.
func (p *KernelParams) TakeRefs(dst []lifetime.Ref) []lifetime.Ref {
	if p == nil {
		return dst
	}
	if p.fref.Valid() {
		dst = append(dst, p.fref)
		p.fref = lifetime.Ref{}
	}
	for _, a := range p.blk.allocs {
		dst = append(dst, lifetime.RefOf(&a.obj))
	}
	clear(p.blk.allocs)
	p.blk.allocs = p.blk.allocs[:0]
	return dst
}

// Free releases the references not taken and returns p to the pool.
func (p *KernelParams) Free() {
	if p == nil || p.f == nil {
		return // nil, zero (not from Marshal) or already freed: nothing to return to the pool
	}
	p.blk.reset()
	_ = p.fref.Release()
	p.fref = lifetime.Ref{}
	p.f = nil
	paramsPool.Put(p)
}
