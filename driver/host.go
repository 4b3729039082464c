package driver

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// HostAllocFlags are cuMemHostAlloc flags.
type HostAllocFlags uint32

// Pinned host memory flags.
const (
	HostAllocDefault       HostAllocFlags = 0
	HostAllocPortable      HostAllocFlags = 1 // CU_MEMHOSTALLOC_PORTABLE
	HostAllocDeviceMap     HostAllocFlags = 2 // CU_MEMHOSTALLOC_DEVICEMAP
	HostAllocWriteCombined HostAllocFlags = 4 // CU_MEMHOSTALLOC_WRITECOMBINED
)

// HostBuffer is pinned (page-locked) host memory, seen from Go as a slice.
// Copies between it and device memory run asynchronously with no keep-alive
// cost.
//
// Every call holds the HostBuffer while it runs; Close frees the memory
// once no call is using it, after waiting for the context's queued work
// (which may still copy to or from it): the goroutine that lets go last,
// often the one calling Close, waits for that work.
//
// A HostBuffer is safe for concurrent use: copies to and from it may be
// queued at once from several goroutines. The memory behind Slice is
// shared with those copies: read or write it only when the copies that
// touch it are done (a Synchronize), and never after Close.
type HostBuffer[T any] struct {
	p   unsafe.Pointer
	n   int
	ctx *Context
	obj lifetime.Object
}

// AllocHost allocates n elements of pinned host memory (cuMemHostAlloc).
// Unlike device buffers, it has no cleanup safety net: the slice could still
// be in use, so only Close frees it (a HostBuffer dropped without Close is
// a leak, and keeps its Context).
func AllocHost[T any](c *Context, n int, flags HostAllocFlags) (*HostBuffer[T], error) {
	const op = "AllocHost"
	bytes, err := byteSize[T](op, n)
	if err != nil {
		return nil, err
	}
	if err := c.hold(op); err != nil {
		return nil, err
	}
	h := &HostBuffer[T]{n: n, ctx: c}
	if err := bound(c, func() error { return cu.MemHostAlloc(&h.p, bytes, uint32(flags)) }); err != nil {
		c.release()
		return nil, err
	}
	h.obj.Init(h.free)
	keepRooted(h) // no cleanup: its Context must stay reachable while it holds it
	return h, nil
}

// free is the HostBuffer's destroy: it waits for the context's queued work,
// which may still copy to or from the memory (drain), then frees it. While
// a stream of the context is being captured, the free would fail and
// invalidate the capture: it waits for the capture's end instead.
func (h *HostBuffer[T]) free() error {
	letGo(h) // from here on the destroy (or its retry) keeps h reachable
	c := h.ctx
	ran, err := drainThenUnlessCaptured(c, h.free, func() error { return cu.MemFreeHost(h.p) })
	if !ran {
		return nil // h.free runs again once the capture is over
	}
	c.release()
	return err
}

// Slice is the memory as a Go slice; nil after Close. Do not use the slice
// after Close.
func (h *HostBuffer[T]) Slice() []T {
	if h == nil || h.ctx == nil || h.obj.Closed() {
		return nil
	}
	return unsafe.Slice((*T)(h.p), h.n)
}

// Len is the number of elements (0 for a nil HostBuffer).
func (h *HostBuffer[T]) Len() int {
	if h == nil {
		return 0
	}
	return h.n
}

func (h *HostBuffer[T]) acquire(op string) error {
	if h == nil {
		return invalid(op, "nil host buffer")
	}
	if !h.obj.Acquire() {
		return notOpen(op, "host buffer")
	}
	return nil
}

// holdRef takes a reference that keeps the pinned memory allocated after
// Close until it is released: for graph nodes that copy to or from it
// (seam.Hold).
func (h *HostBuffer[T]) holdRef() (lifetime.Ref, error) {
	if h == nil {
		return lifetime.Ref{}, invalid("hold", "nil host buffer")
	}
	r, ok := h.obj.Hold()
	if !ok {
		return lifetime.Ref{}, notOpen("hold", "host buffer")
	}
	return r, nil
}

// Pointer is the start of the memory (nil once closed).
func (h *HostBuffer[T]) Pointer() unsafe.Pointer {
	if h == nil || h.ctx == nil || h.obj.Closed() {
		return nil
	}
	return h.p
}

// Close frees the memory (cuMemFreeHost) once no call is using it;
// idempotent, first result kept.
func (h *HostBuffer[T]) Close() error {
	if h == nil {
		return invalid("HostBuffer.Close", "nil host buffer")
	}
	if h.ctx == nil {
		return nil
	}
	return h.obj.Close()
}

// CopyFromPinnedAsync queues a copy of the first src.Len() elements of src
// into b on s (cuMemcpyHtoDAsync). src is held for the call; its Close
// waits for queued work before freeing it.
func (b *Buffer[T]) CopyFromPinnedAsync(s *Stream, src *HostBuffer[T]) error {
	const op = "Buffer.CopyFromPinnedAsync"
	if err := src.acquire(op); err != nil {
		return err
	}
	defer src.obj.Release()
	bytes := uintptr(src.n) * elemSize[T]()
	return b.onStream(op, s, src.n, false, func(a *allocation, h *captureHook) error {
		err := cu.MemcpyHtoDAsync(b.at(a), src.p, bytes, s.h)
		if h != nil && err == nil {
			h.keepObjs(&src.obj)
		}
		return err
	})
}

// CopyToPinnedAsync queues a copy of the first dst.Len() elements of b into
// dst on s (cuMemcpyDtoHAsync).
func (b *Buffer[T]) CopyToPinnedAsync(s *Stream, dst *HostBuffer[T]) error {
	const op = "Buffer.CopyToPinnedAsync"
	if err := dst.acquire(op); err != nil {
		return err
	}
	defer dst.obj.Release()
	bytes := uintptr(dst.n) * elemSize[T]()
	return b.onStream(op, s, dst.n, false, func(a *allocation, h *captureHook) error {
		err := cu.MemcpyDtoHAsync(dst.p, b.at(a), bytes, s.h)
		if h != nil && err == nil {
			h.keepObjs(&dst.obj)
		}
		return err
	})
}

// Registered is Go memory registered with CUDA as page-locked memory
// (cuMemHostRegister). The slice stays registered, and pinned
// (runtime.Pinner), at least until Close; a Registered dropped without
// Close is let go by a cleanup. Its pages stay registered after that while
// other registered slices of purecuda's on the same pages (graph.Slice
// nodes, captured copies) need them.
//
// Its methods are safe for concurrent use. Close waits for the context's
// queued work and then lets go of the registration; the unregistration
// itself runs on purecuda's release queue. The slice is shared with the
// copies that use it: touch it only when they are done.
type Registered[T any] struct {
	s       []T
	reg     *registration
	closed  atomic.Bool
	once    sync.Once
	err     error
	cleanup runtime.Cleanup
}

// registration is what a Registered releases: apart from it, so that the
// cleanup's argument does not keep the Registered reachable.
type registration struct {
	obj  lifetime.Object
	hold *hostHold
	ctx  *Context
}

// Release drops one reference (release.Owner).
func (r *registration) Release() error { return r.obj.Release() }

func deferUnregister(r *registration) { release.Defer(r) }

// RegisterHost registers an existing Go slice with CUDA as page-locked
// memory (cuMemHostRegister, portable to every context) and pins it, so
// that CUDA copies to and from it run in stream order, as with a
// HostBuffer: work that names the memory through Raw or the graph package
// reads and writes it when it runs. (Buffer.CopyFromHostAsync and
// CopyToHostAsync stage every Go slice through memory of their own, this one
// too; see there.) The slice must not be grown past its capacity
// meanwhile. CUDA registers whole pages: pages shared with other slices
// registered by purecuda are registered once and stay so while any of them
// needs them. Close waits for the context's queued work and then lets go
// of the registration (cuMemHostUnregister, on purecuda's release queue,
// once nothing else of purecuda's needs those pages).
func RegisterHost[T any](c *Context, s []T) (*Registered[T], error) {
	const op = "RegisterHost"
	if _, err := byteSize[T](op, len(s)); err != nil {
		return nil, err
	}
	if err := c.hold(op); err != nil {
		return nil, err
	}
	hold, err := registerHost(op, c, unsafe.Pointer(&s[0]), sliceBytes(s))
	if err != nil {
		c.release()
		return nil, err
	}
	reg := &registration{hold: hold, ctx: c}
	reg.obj.Init(func() error {
		err := bound(c, c.sync)
		_ = hold.Release() // unregisters the pages no other use of purecuda's still needs
		c.release()
		return err
	})
	r := &Registered[T]{s: s, reg: reg}
	r.cleanup = runtime.AddCleanup(r, deferUnregister, reg)
	return r, nil
}

// Slice is the registered memory (nil for a nil Registered).
func (r *Registered[T]) Slice() []T {
	if r == nil {
		return nil
	}
	return r.s
}

// holdRef takes a reference that keeps the memory registered after Close until
// it is released: for graph nodes that copy to or from it (seam.Hold).
func (r *Registered[T]) holdRef() (lifetime.Ref, error) {
	if r == nil || r.reg == nil || r.closed.Load() {
		return lifetime.Ref{}, notOpen("hold", "registration")
	}
	ref, ok := r.reg.obj.Hold()
	if !ok {
		return lifetime.Ref{}, notOpen("hold", "registration")
	}
	return ref, nil
}

// Close unregisters the memory (cuMemHostUnregister) once nothing holds
// it; idempotent, first result kept.
func (r *Registered[T]) Close() error {
	if r == nil {
		return invalid("Registered.Close", "nil registration")
	}
	if r.reg == nil {
		return nil
	}
	r.once.Do(func() {
		r.closed.Store(true)
		r.cleanup.Stop()
		r.err = r.reg.obj.Close()
	})
	return r.err
}
