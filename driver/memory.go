package driver

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
)

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uint64

// allocation is device memory with a reference count: the Buffer that made
// it holds one reference, and anything else that must keep the memory alive
// (a graph, prepared launch arguments) holds others. The memory is freed when
// the last reference goes.
type allocation struct {
	ptr    cu.CUdeviceptr
	bytes  uintptr
	ctx    *Context
	stream *Stream // stream-ordered allocations: freed on it while it is open
	refs   atomic.Int64
}

func (a *allocation) retain() bool {
	for {
		n := a.refs.Load()
		if n <= 0 {
			return false
		}
		if a.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (a *allocation) release() error {
	if a.refs.Add(-1) != 0 {
		return nil
	}
	err := bound(a.ctx, func() error {
		if s := a.stream; s != nil && !s.closed.Load() {
			return cu.MemFreeAsync(a.ptr, s.h)
		}
		return cu.MemFree(a.ptr)
	})
	a.ctx.release()
	return err
}

// The safety net: a Buffer that becomes unreachable without Close has its
// reference dropped on a goroutine of ours (never on a CUDA thread, and not
// on the runtime's cleanup goroutine, which must not block).
var (
	orphans     = make(chan *allocation, 1024)
	orphanStart sync.Once
	// orphanErrs counts errors from freeing forgotten buffers.
	orphanErrs atomic.Int64
)

func dropOrphan(a *allocation) {
	orphanStart.Do(func() {
		go func() {
			for a := range orphans {
				if a.release() != nil {
					orphanErrs.Add(1)
				}
			}
		}()
	})
	orphans <- a
}

// Buffer is a typed device allocation of n elements of T.
//
// # Lifetime
//
// Close releases the Buffer's reference; the memory is freed when no other
// holder (see Retain) is left. Use after Close is an error matching
// ErrClosed. A Buffer that becomes unreachable without Close is released by
// a cleanup as a safety net; do not rely on it for timing.
type Buffer[T any] struct {
	a         *allocation
	n         int
	retains   atomic.Int64 // references taken with Retain, not yet released
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	cleanup   runtime.Cleanup
}

// plainData reports whether t holds no Go pointers (so it may live in
// device memory or be passed to a kernel by value).
func plainData(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return plainData(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if !plainData(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

func byteSize[T any](op string, n int) (uintptr, error) {
	t := reflect.TypeFor[T]()
	if !plainData(t) {
		return 0, invalid(op, "element type %s holds Go pointers, which cannot live in device memory", t)
	}
	size := t.Size()
	if n <= 0 {
		return 0, invalid(op, "%d elements: the count must be positive", n)
	}
	if size == 0 {
		return 0, invalid(op, "element type %s has size 0", t)
	}
	if uint64(n) > math.MaxInt64/uint64(size) {
		return 0, invalid(op, "%d elements of %d bytes overflow", n, size)
	}
	return uintptr(n) * size, nil
}

func newBuffer[T any](a *allocation, n int) *Buffer[T] {
	a.refs.Store(1)
	b := &Buffer[T]{a: a, n: n}
	b.cleanup = runtime.AddCleanup(b, dropOrphan, a)
	return b
}

// Alloc allocates n elements of T on c's device (cuMemAlloc).
func Alloc[T any](c *Context, n int) (*Buffer[T], error) {
	bytes, err := byteSize[T]("Alloc", n)
	if err != nil {
		return nil, err
	}
	if err := c.acquire("Alloc"); err != nil {
		return nil, err
	}
	a := &allocation{bytes: bytes, ctx: c}
	if err := bound(c, func() error { return cu.MemAlloc(&a.ptr, bytes) }); err != nil {
		c.release()
		return nil, err
	}
	return newBuffer[T](a, n), nil
}

// AllocManaged allocates n elements of T of managed memory, reachable from
// the host and every device (cuMemAllocManaged with CU_MEM_ATTACH_GLOBAL).
// HostSlice views it from the host.
func AllocManaged[T any](c *Context, n int) (*Buffer[T], error) {
	bytes, err := byteSize[T]("AllocManaged", n)
	if err != nil {
		return nil, err
	}
	if err := c.acquire("AllocManaged"); err != nil {
		return nil, err
	}
	a := &allocation{bytes: bytes, ctx: c}
	if err := bound(c, func() error { return cu.MemAllocManaged(&a.ptr, bytes, uint32(cu.CU_MEM_ATTACH_GLOBAL)) }); err != nil {
		c.release()
		return nil, err
	}
	b := newBuffer[T](a, n)
	return b, nil
}

// AllocAsync allocates n elements of T in stream order from the device's
// current memory pool (cuMemAllocAsync). Close frees it in order on the same
// stream while that stream is open, else synchronously.
func AllocAsync[T any](s *Stream, n int) (*Buffer[T], error) {
	return allocAsync[T]("AllocAsync", s, nil, n)
}

func allocAsync[T any](op string, s *Stream, p *MemPool, n int) (*Buffer[T], error) {
	bytes, err := byteSize[T](op, n)
	if err != nil {
		return nil, err
	}
	if err := s.check(op); err != nil {
		return nil, err
	}
	if p != nil {
		if err := p.check(op); err != nil {
			return nil, err
		}
	}
	c := s.ctx
	if err := c.acquire(op); err != nil {
		return nil, err
	}
	a := &allocation{bytes: bytes, ctx: c, stream: s}
	err = bound(c, func() error {
		if p != nil {
			return cu.MemAllocFromPoolAsync(&a.ptr, bytes, p.h, s.h)
		}
		return cu.MemAllocAsync(&a.ptr, bytes, s.h)
	})
	if err != nil {
		c.release()
		return nil, err
	}
	return newBuffer[T](a, n), nil
}

func (b *Buffer[T]) check(op string) error {
	if b == nil {
		return invalid(op, "nil buffer")
	}
	if b.closed.Load() {
		return closedErr(op, "buffer")
	}
	return nil
}

// Len is the number of elements.
func (b *Buffer[T]) Len() int { return b.n }

// Bytes is the size in bytes.
func (b *Buffer[T]) Bytes() uintptr { return b.a.bytes }

// Ptr is the device address (0 once closed).
func (b *Buffer[T]) Ptr() DevicePtr {
	if b == nil || b.closed.Load() {
		return 0
	}
	return DevicePtr(b.a.ptr)
}

// Context is the context the memory belongs to.
func (b *Buffer[T]) Context() *Context { return b.a.ctx }

// Retain takes a reference that keeps the memory allocated after Close
// until Release. It fails once the memory has been freed.
func (b *Buffer[T]) Retain() error {
	if b == nil {
		return invalid("Buffer.Retain", "nil buffer")
	}
	if !b.a.retain() {
		return closedErr("Buffer.Retain", "buffer memory already freed")
	}
	b.retains.Add(1)
	return nil
}

// Release drops a reference taken by Retain.
func (b *Buffer[T]) Release() error {
	if b == nil {
		return invalid("Buffer.Release", "nil buffer")
	}
	for {
		n := b.retains.Load()
		if n <= 0 {
			return invalid("Buffer.Release", "no reference taken with Retain is left")
		}
		if b.retains.CompareAndSwap(n, n-1) {
			return b.a.release()
		}
	}
}

// Close releases the buffer's own reference: the memory is freed now, or
// when the last Retain is released (cuMemFree, or cuMemFreeAsync on the
// allocating stream). Idempotent; the first result is kept.
func (b *Buffer[T]) Close() error {
	if b == nil {
		return invalid("Buffer.Close", "nil buffer")
	}
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.cleanup.Stop()
		b.closeErr = b.a.release()
	})
	return b.closeErr
}

// HostSlice views managed memory from the host. It is valid until Close and
// must not be used while kernels write the memory.
func (b *Buffer[T]) HostSlice() ([]T, error) {
	if err := b.check("Buffer.HostSlice"); err != nil {
		return nil, err
	}
	var managed int32
	err := bound(b.a.ctx, func() error {
		return cu.PointerGetAttribute(unsafe.Pointer(&managed), cu.CU_POINTER_ATTRIBUTE_IS_MANAGED, b.a.ptr)
	})
	if err != nil {
		return nil, err
	}
	if managed == 0 {
		return nil, invalid("Buffer.HostSlice", "not managed memory (use AllocManaged)")
	}
	p := b.a.ptr
	return unsafe.Slice(*(**T)(unsafe.Pointer(&p)), b.n), nil
}

// devicePointer lets buffers of any element type be kernel arguments.
type devicePointer interface {
	allocation(op string) (*allocation, error)
}

// allocation returns the buffer's memory, for a kernel argument.
func (b *Buffer[T]) allocation(op string) (*allocation, error) {
	if err := b.check(op); err != nil {
		return nil, err
	}
	return b.a, nil
}

func elemSize[T any]() uintptr { return reflect.TypeFor[T]().Size() }

func sliceBytes[T any](s []T) uintptr { return uintptr(len(s)) * elemSize[T]() }

func (b *Buffer[T]) fits(op string, n int) error {
	if n > b.n {
		return invalid(op, "%d elements do not fit in a buffer of %d", n, b.n)
	}
	return nil
}

// CopyFromHost copies src into the start of b and returns when done
// (cuMemcpyHtoD).
func (b *Buffer[T]) CopyFromHost(src []T) error {
	const op = "Buffer.CopyFromHost"
	if err := b.check(op); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	if err := b.fits(op, len(src)); err != nil {
		return err
	}
	return bound(b.a.ctx, func() error { return cu.MemcpyHtoD(b.a.ptr, unsafe.Pointer(&src[0]), sliceBytes(src)) })
}

// CopyToHost copies the first len(dst) elements of b into dst and returns
// when done (cuMemcpyDtoH).
func (b *Buffer[T]) CopyToHost(dst []T) error {
	const op = "Buffer.CopyToHost"
	if err := b.check(op); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	if err := b.fits(op, len(dst)); err != nil {
		return err
	}
	return bound(b.a.ctx, func() error { return cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), b.a.ptr, sliceBytes(dst)) })
}

// CopyFrom copies all of src into the start of b (cuMemcpyDtoD), then waits
// for it.
func (b *Buffer[T]) CopyFrom(src *Buffer[T]) error {
	const op = "Buffer.CopyFrom"
	if err := b.check(op); err != nil {
		return err
	}
	if err := src.check(op); err != nil {
		return err
	}
	if err := b.fits(op, src.n); err != nil {
		return err
	}
	if err := bound(b.a.ctx, func() error { return cu.MemcpyDtoD(b.a.ptr, src.a.ptr, src.a.bytes) }); err != nil {
		return err
	}
	return b.a.ctx.sync()
}

// CopyFromHostAsync queues a copy of src into b on s (cuMemcpyHtoDAsync).
//
// src is ordinary Go memory: it is kept alive, and must not be modified,
// until the copy has run on s. purecuda holds it until a host function
// queued after the copy releases it, which costs a host callback (a few
// microseconds). For copies without that cost, use CopyFromPinnedAsync with a
// HostBuffer.
func (b *Buffer[T]) CopyFromHostAsync(s *Stream, src []T) error {
	const op = "Buffer.CopyFromHostAsync"
	if err := b.asyncCheck(op, s, len(src)); err != nil || len(src) == 0 {
		return err
	}
	if err := s.do(op, func() error { return cu.MemcpyHtoDAsync(b.a.ptr, unsafe.Pointer(&src[0]), sliceBytes(src), s.h) }); err != nil {
		return err
	}
	return s.keepUntilDone(src)
}

// CopyToHostAsync queues a copy of the first len(dst) elements of b into
// dst on s (cuMemcpyDtoHAsync). dst is kept alive until the copy has run;
// read it only after synchronising s.
func (b *Buffer[T]) CopyToHostAsync(s *Stream, dst []T) error {
	const op = "Buffer.CopyToHostAsync"
	if err := b.asyncCheck(op, s, len(dst)); err != nil || len(dst) == 0 {
		return err
	}
	if err := s.do(op, func() error { return cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), b.a.ptr, sliceBytes(dst), s.h) }); err != nil {
		return err
	}
	return s.keepUntilDone(dst)
}

// CopyFromAsync queues a copy of all of src into b on s (cuMemcpyDtoDAsync).
func (b *Buffer[T]) CopyFromAsync(s *Stream, src *Buffer[T]) error {
	const op = "Buffer.CopyFromAsync"
	if err := src.check(op); err != nil {
		return err
	}
	if err := b.asyncCheck(op, s, src.n); err != nil {
		return err
	}
	return s.do(op, func() error { return cu.MemcpyDtoDAsync(b.a.ptr, src.a.ptr, src.a.bytes, s.h) })
}

func (b *Buffer[T]) asyncCheck(op string, s *Stream, n int) error {
	if err := b.check(op); err != nil {
		return err
	}
	if err := s.check(op); err != nil {
		return err
	}
	if !s.ctx.canUse(b.a.ctx) {
		return invalid(op, "the buffer belongs to another context than the stream")
	}
	return b.fits(op, n)
}

// keepUntilDone holds v until the work queued on s so far has run.
func (s *Stream) keepUntilDone(v any) error {
	return s.enqueueHost(func() { runtime.KeepAlive(v) })
}

func (b *Buffer[T]) memset(op string, s *Stream, width uintptr, set func(n uintptr) error) error {
	if err := b.check(op); err != nil {
		return err
	}
	if b.a.bytes%width != 0 {
		return invalid(op, "%d bytes are not a multiple of %d", b.a.bytes, width)
	}
	n := b.a.bytes / width
	if s == nil {
		if err := bound(b.a.ctx, func() error { return set(n) }); err != nil {
			return err
		}
		return b.a.ctx.sync()
	}
	if err := s.check(op); err != nil {
		return err
	}
	return s.bind(op, func() error { return set(n) })
}

// Memset8 sets every byte of b to v and waits (cuMemsetD8).
func (b *Buffer[T]) Memset8(v uint8) error {
	return b.memset("Buffer.Memset8", nil, 1, func(n uintptr) error { return cu.MemsetD8(b.a.ptr, v, n) })
}

// Memset16 sets every 16-bit word of b to v and waits (cuMemsetD16).
func (b *Buffer[T]) Memset16(v uint16) error {
	return b.memset("Buffer.Memset16", nil, 2, func(n uintptr) error { return cu.MemsetD16(b.a.ptr, v, n) })
}

// Memset32 sets every 32-bit word of b to v and waits (cuMemsetD32).
func (b *Buffer[T]) Memset32(v uint32) error {
	return b.memset("Buffer.Memset32", nil, 4, func(n uintptr) error { return cu.MemsetD32(b.a.ptr, v, n) })
}

// Memset8Async queues setting every byte of b to v on s (cuMemsetD8Async).
func (b *Buffer[T]) Memset8Async(s *Stream, v uint8) error {
	if s == nil {
		return fmt.Errorf("driver: Buffer.Memset8Async: %w", ErrNilStream)
	}
	return b.memset("Buffer.Memset8Async", s, 1, func(n uintptr) error { return cu.MemsetD8Async(b.a.ptr, v, n, s.h) })
}

// Memset16Async queues setting every 16-bit word of b to v on s.
func (b *Buffer[T]) Memset16Async(s *Stream, v uint16) error {
	if s == nil {
		return fmt.Errorf("driver: Buffer.Memset16Async: %w", ErrNilStream)
	}
	return b.memset("Buffer.Memset16Async", s, 2, func(n uintptr) error { return cu.MemsetD16Async(b.a.ptr, v, n, s.h) })
}

// Memset32Async queues setting every 32-bit word of b to v on s.
func (b *Buffer[T]) Memset32Async(s *Stream, v uint32) error {
	if s == nil {
		return fmt.Errorf("driver: Buffer.Memset32Async: %w", ErrNilStream)
	}
	return b.memset("Buffer.Memset32Async", s, 4, func(n uintptr) error { return cu.MemsetD32Async(b.a.ptr, v, n, s.h) })
}
