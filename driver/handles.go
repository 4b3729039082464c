package driver

import (
	"reflect"
	"slices"
	"unsafe"

	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Package graph's way in (internal/seam): raw handles, valid while graph
// holds the objects, and kernel arguments marshalled for a node. Users get
// handles only inside an object's Raw, which holds it for the call.

func init() {
	seam.Context = func(c any) uintptr {
		if c, _ := c.(*Context); c != nil {
			return uintptr(c.h)
		}
		return 0
	}
	seam.Stream = func(s any) uintptr {
		if s, _ := s.(*Stream); s != nil {
			return uintptr(s.h)
		}
		return 0
	}
	seam.Event = func(e any) uintptr {
		if e, _ := e.(*Event); e != nil {
			return uintptr(e.h)
		}
		return 0
	}
	seam.Function = func(f any) (uintptr, uintptr) {
		if f, _ := f.(*Function); f != nil {
			return uintptr(f.h), uintptr(f.kernel)
		}
		return 0, 0
	}
	seam.Marshal = func(fn, ctx any, args []any) (seam.Params, error) {
		f, _ := fn.(*Function)
		c, _ := ctx.(*Context)
		p, err := f.marshal(c, args)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	seam.Hold = func(x any) (lifetime.Ref, error) {
		switch v := x.(type) { // the common ones without an itab lookup
		case *Context:
			return v.holdRef()
		case *Stream:
			return v.holdRef()
		case *Event:
			return v.holdRef()
		case *Function:
			return v.holdRef()
		case *Args:
			return v.holdRef()
		}
		if h, ok := x.(holder); ok { // a Buffer, HostBuffer or Registered of any T
			return h.holdRef()
		}
		return lifetime.Ref{}, invalid("hold", "%T cannot be held", x)
	}
	seam.MarshalArg = func(op string, ctx any, i int, v any) ([]byte, lifetime.Ref, error) {
		c, _ := ctx.(*Context)
		return marshalArg(op, c, i, v)
	}
	seam.PlainData = func(t reflect.Type) bool { return t != nil && plainData(t) }
	seam.TrimStaging = func(c any) error { return c.(*Context).trimStaging("TrimStaging") }
	seam.RegisterHost = func(op string, c any, p unsafe.Pointer, bytes uintptr) (seam.Owner, error) {
		h, err := registerHost(op, c.(*Context), p, bytes)
		if err != nil {
			return nil, err
		}
		return h, nil
	}
	seam.ArgsUsableIn = func(a, ctx any) error {
		args, _ := a.(*Args)
		c, _ := ctx.(*Context)
		return args.usableIn(c)
	}
}

// holder is what seam.Hold takes a reference on: every driver type a graph
// node or a capture holds.
type holder interface {
	holdRef() (lifetime.Ref, error)
}

// IsLegacy reports whether s is the legacy default stream, on which calls
// need the context current (Raw binds it).
func (s *Stream) IsLegacy() bool { return s != nil && s.special }

// kernelParams are kernel arguments marshalled once for a call that copies
// them (a graph kernel node; seam.Params). They come from a pool: Free
// returns them, and they must not be used after.
type kernelParams struct {
	blk  argBlock
	f    *Function
	fref lifetime.Ref
}

// marshal checks args against f, as Stream.Launch does, with c as the
// context the call will run in (nil for a library kernel whose buffers
// name it), and marshals them. Arguments are the same as Launch's.
func (f *Function) marshal(c *Context, args []any) (*kernelParams, error) {
	const op = "Graph.Kernel"
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
	p := paramsPool.Get().(*kernelParams)
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
func (p *kernelParams) Pointer() unsafe.Pointer {
	if p == nil {
		return nil
	}
	return unsafe.Pointer(p.blk.finish())
}

// TakeRefs appends the references the parameters hold (the kernel's module
// or library first, then each buffer argument) to dst and hands them to the
// caller, who must release each exactly once; Free then releases nothing.
func (p *kernelParams) TakeRefs(dst []lifetime.Ref) []lifetime.Ref {
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
func (p *kernelParams) Free() {
	if p == nil || p.f == nil {
		return // nil, zero (not from Marshal) or already freed: nothing to return to the pool
	}
	p.blk.reset()
	_ = p.fref.Release()
	p.fref = lifetime.Ref{}
	p.f = nil
	paramsPool.Put(p)
}

// marshalArg marshals v as one kernel argument of a call in c, as Launch
// does: its bytes, and a reference on a buffer argument's memory, handed
// to the caller (a graph executable's one-argument update).
func marshalArg(op string, c *Context, i int, v any) ([]byte, lifetime.Ref, error) {
	if c == nil {
		return nil, lifetime.Ref{}, invalid(op, "nil context")
	}
	var blk argBlock
	blk.init()
	if err := blk.marshal(op, i, v, c, nil); err != nil {
		blk.reset()
		return nil, lifetime.Ref{}, err
	}
	val := slices.Clone(unsafe.Slice((*byte)(blk.ptrs[0]), blk.sizes[0]))
	var ref lifetime.Ref
	if len(blk.allocs) > 0 { // the reference marshal took, handed over
		ref = lifetime.RefOf(&blk.allocs[0].obj)
		clear(blk.allocs)
		blk.allocs = blk.allocs[:0]
	}
	blk.reset()
	return val, ref, nil
}
