package driver

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
)

// HostAllocFlags are cuMemHostAlloc flags.
type HostAllocFlags uint32

// Pinned host memory flags.
const (
	HostAllocDefault       HostAllocFlags = 0
	HostAllocPortable      HostAllocFlags = HostAllocFlags(cu.CU_MEMHOSTALLOC_PORTABLE)
	HostAllocDeviceMap     HostAllocFlags = HostAllocFlags(cu.CU_MEMHOSTALLOC_DEVICEMAP)
	HostAllocWriteCombined HostAllocFlags = HostAllocFlags(cu.CU_MEMHOSTALLOC_WRITECOMBINED)
)

// HostBuffer is pinned (page-locked) host memory, seen from Go as a slice.
// Copies between it and device memory run asynchronously with no keep-alive
// cost.
type HostBuffer[T any] struct {
	p         unsafe.Pointer
	n         int
	ctx       *Context
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// AllocHost allocates n elements of pinned host memory (cuMemHostAlloc).
// Unlike device buffers, it has no cleanup safety net: the slice could still
// be in use, so only Close frees it.
func AllocHost[T any](c *Context, n int, flags HostAllocFlags) (*HostBuffer[T], error) {
	bytes, err := byteSize[T]("AllocHost", n)
	if err != nil {
		return nil, err
	}
	if err := c.acquire("AllocHost"); err != nil {
		return nil, err
	}
	h := &HostBuffer[T]{n: n, ctx: c}
	if err := bound(c, func() error { return cu.MemHostAlloc(&h.p, bytes, uint32(flags)) }); err != nil {
		c.release()
		return nil, err
	}
	return h, nil
}

// Slice is the memory as a Go slice; nil after Close. Do not use the slice
// after Close.
func (h *HostBuffer[T]) Slice() []T {
	if h == nil || h.closed.Load() {
		return nil
	}
	return unsafe.Slice((*T)(h.p), h.n)
}

// Len is the number of elements.
func (h *HostBuffer[T]) Len() int { return h.n }

func (h *HostBuffer[T]) check(op string) error {
	if h == nil {
		return invalid(op, "nil host buffer")
	}
	if h.closed.Load() {
		return closedErr(op, "host buffer")
	}
	return nil
}

// Close frees the memory (cuMemFreeHost); idempotent, first result kept.
func (h *HostBuffer[T]) Close() error {
	if h == nil {
		return invalid("HostBuffer.Close", "nil host buffer")
	}
	h.closeOnce.Do(func() {
		h.closed.Store(true)
		h.closeErr = bound(h.ctx, func() error { return cu.MemFreeHost(h.p) })
		h.ctx.release()
	})
	return h.closeErr
}

// CopyFromPinnedAsync queues a copy of the first src.Len() elements of src
// into b on s (cuMemcpyHtoDAsync); src must stay open until the copy has run.
func (b *Buffer[T]) CopyFromPinnedAsync(s *Stream, src *HostBuffer[T]) error {
	const op = "Buffer.CopyFromPinnedAsync"
	if err := src.check(op); err != nil {
		return err
	}
	if err := b.asyncCheck(op, s, src.n); err != nil {
		return err
	}
	bytes := uintptr(src.n) * elemSize[T]()
	if s.special {
		return s.ctx.use(op, func() error { return cu.MemcpyHtoDAsync(b.a.ptr, src.p, bytes, s.h) })
	}
	return cu.MemcpyHtoDAsync(b.a.ptr, src.p, bytes, s.h)
}

// CopyToPinnedAsync queues a copy of the first dst.Len() elements of b into
// dst on s (cuMemcpyDtoHAsync).
func (b *Buffer[T]) CopyToPinnedAsync(s *Stream, dst *HostBuffer[T]) error {
	const op = "Buffer.CopyToPinnedAsync"
	if err := dst.check(op); err != nil {
		return err
	}
	if err := b.asyncCheck(op, s, dst.n); err != nil {
		return err
	}
	bytes := uintptr(dst.n) * elemSize[T]()
	if s.special {
		return s.ctx.use(op, func() error { return cu.MemcpyDtoHAsync(dst.p, b.a.ptr, bytes, s.h) })
	}
	return cu.MemcpyDtoHAsync(dst.p, b.a.ptr, bytes, s.h)
}

// Registered is Go memory registered with CUDA as pinned memory
// (cuMemHostRegister). It keeps the slice alive until Close.
type Registered[T any] struct {
	s         []T
	ctx       *Context
	closeOnce sync.Once
	closeErr  error
}

// RegisterHost pins an existing Go slice for fast, asynchronous copies
// (cuMemHostRegister). Go's heap does not move objects, and the Registered
// value keeps the slice reachable until Close (cuMemHostUnregister). The
// slice must not be resliced beyond its length or reallocated meanwhile.
func RegisterHost[T any](c *Context, s []T) (*Registered[T], error) {
	if _, err := byteSize[T]("RegisterHost", len(s)); err != nil {
		return nil, err
	}
	if err := c.acquire("RegisterHost"); err != nil {
		return nil, err
	}
	r := &Registered[T]{s: s, ctx: c}
	if err := bound(c, func() error { return cu.MemHostRegister(unsafe.Pointer(&s[0]), sliceBytes(s), 0) }); err != nil {
		c.release()
		return nil, err
	}
	return r, nil
}

// Slice is the registered memory.
func (r *Registered[T]) Slice() []T { return r.s }

// Close unregisters the memory (cuMemHostUnregister); idempotent.
func (r *Registered[T]) Close() error {
	if r == nil {
		return invalid("Registered.Close", "nil registration")
	}
	r.closeOnce.Do(func() {
		r.closeErr = bound(r.ctx, func() error { return cu.MemHostUnregister(unsafe.Pointer(&r.s[0])) })
		r.ctx.release()
	})
	return r.closeErr
}
