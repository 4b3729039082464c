package driver

import (
	"errors"
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uint64

// allocation is device memory with a lifetime: the Buffer that made it holds
// one reference, and every call that names it, every stream-ordered copy's
// keep-alive, prepared launch arguments and graphs hold others. The memory
// is freed when the last reference goes: with cuMemFree, or, for memory
// allocated in stream order, with cuMemFreeAsync on its stream (which the
// allocation holds, so it is never destroyed first), after every other
// stream that used the memory has finished with it.
type allocation struct {
	// What a launch reads comes first, within one cache line: an
	// allocation is 128 bytes, a size class whose objects start on a line.
	base   cu.CUdeviceptr  // the start; a Buffer's data is at Buffer.at (views start inside)
	ctx    *Context        // held
	stream *Stream         // stream-ordered memory: held until the free is queued
	obj    lifetime.Object // its count and closed flag in its first 16 bytes

	bytes   uintptr
	pool    *MemPool // held, for AllocFromPool
	managed bool

	fmu     sync.Mutex
	foreign []foreignUse // other streams that used stream-ordered memory
}

// foreignUse is a stream, other than the allocating one, that stream-ordered
// memory was used on; the free waits for the work queued there.
type foreignUse struct {
	s   *Stream
	ref lifetime.Ref
}

// Release drops one reference (release.Owner), for the release queue and
// cleanups.
func (a *allocation) Release() error { return a.obj.Release() }

// start gives a the Buffer's reference; its destroy frees the memory.
func (a *allocation) start() { a.obj.Init(a.free) }

func (a *allocation) free() error {
	if a.managed {
		letGo(a) // rooted by HostSlice; from here on the free (or its retry) keeps a reachable
	}
	var err error
	if a.stream != nil {
		// Queued while a capture runs on its stream, or on a stream that
		// used it, the free would be captured into the graph instead of
		// running: it waits for the capture to end. No capture can begin
		// on those streams while uncaptured runs.
		a.fmu.Lock()
		streams := make([]*Stream, 0, 1+len(a.foreign))
		streams = append(streams, a.stream)
		for _, f := range a.foreign {
			streams = append(streams, f.s)
		}
		a.fmu.Unlock()
		var fs []foreignUse
		if sink := enterAll(streams); sink != nil {
			sink.AfterCapture(lifetime.OwnerFunc(a.free))
			return nil
		}
		a.fmu.Lock()
		fs = a.foreign
		a.foreign = nil
		a.fmu.Unlock()
		ferr := bound(a.ctx, func() error {
			for _, f := range fs {
				if err := waitFor(a.stream, f.s); err != nil {
					return err
				}
			}
			return cu.MemFreeAsync(a.base, a.stream.h)
		})
		leaveAll(streams)
		err = ferr
		for _, f := range fs {
			_ = f.ref.Release()
		}
		a.stream.release()
		if a.pool != nil {
			a.pool.release()
		}
	} else {
		// cuMemFree waits for the context's work, and meanwhile holds up
		// the allocations of every other thread (a cuMemHostAlloc behind a
		// host function that waits for its caller would wait for good):
		// the work is waited for first (drain), in a way that holds up
		// nothing, captures included. While a stream of the context is
		// being captured, cuMemFree would be refused or invalidate the
		// capture, so the free waits for the capture's end.
		ran, ferr := drainThenUnlessCaptured(a.ctx, a.free, func() error { return cu.MemFree(a.base) })
		if !ran {
			return nil // a.free runs again once the capture is over
		}
		err = ferr
		if a.pool != nil { // memory imported from another process's pool
			a.pool.release()
		}
	}
	a.ctx.release()
	return err
}

// waitFor makes later work on s wait for the work queued on other so far,
// through an event; the caller has the context current.
func waitFor(s, other *Stream) error {
	var ev cu.CUevent
	if err := cu.EventCreate(&ev, uint32(cu.CU_EVENT_DISABLE_TIMING)); err != nil {
		return err
	}
	err := cu.EventRecord(ev, other.h)
	if err == nil {
		err = cu.StreamWaitEvent(s.h, ev, 0)
	}
	if e := cu.EventDestroy(ev); err == nil {
		err = e
	}
	return err
}

// usedOn notes that stream-ordered memory is used on s, a stream other than
// its own, so that the free waits for s. The caller holds s. A stream of
// another context is not noted: the free cannot wait for it (an event of
// the memory's context cannot be recorded there), so work queued there
// holds the memory until the stream has passed it instead
// (holdUntilPassed).
func (a *allocation) usedOn(s *Stream) {
	if a.stream == nil || a.stream == s || a.ctx.h != s.ctx.h {
		return
	}
	a.fmu.Lock()
	defer a.fmu.Unlock()
	for _, f := range a.foreign {
		if f.s == s {
			return
		}
	}
	// Not s.Hold, which refuses a stream marked closed: a Close racing the
	// caller's use may mark s closed after the caller took its reference,
	// and the work the caller queues on s must still hold back the free.
	if o := s.lifetimeObj(); o.Retain() {
		a.foreign = append(a.foreign, foreignUse{s, lifetime.RefOf(o)})
	}
}

// deferRelease is the cleanup of a Buffer that became unreachable without
// Close: the release may free memory, a CUDA call, so it goes to the release
// queue and never runs on the runtime's cleanup goroutine.
func deferRelease(a *allocation) { release.Defer(a) }

// Buffer is a typed device allocation of n elements of T.
//
// # Lifetime
//
// Close releases the Buffer's reference; the memory is freed when no other
// holder is left: a call in flight, a stream-ordered copy not yet run,
// prepared launch arguments, a graph or an executable graph that names it.
// Use after Close is an error matching ErrClosed. A Buffer that
// becomes unreachable without Close is released by a cleanup as a safety
// net; do not rely on it for timing.
//
// # Views
//
// Slice returns a view: a Buffer of part of the same memory, without a
// copy. A view holds its own reference on the memory, so the memory lives
// until the buffer and every view of it are closed; closing a view does not
// close the buffer it came from. Every method of a view, and a view passed
// to a kernel, works on the view's elements only.
//
// # Concurrency
//
// A Buffer is safe for concurrent use: its methods, and launches that name
// it, may run at once from several goroutines. A Close racing with them
// never frees the memory under a call in flight or queued work; calls that
// start after it fail with ErrClosed. What the device memory holds when
// two streams write it is ordered only by those streams (events, a
// Synchronize), as in CUDA.
type Buffer[T any] struct {
	// What a launch reads (a, closed, off) lies within the first 24 bytes:
	// a Buffer is in the 96-byte size class, whose objects start on a line or
	// half-way along one.
	a         *allocation
	closed    atomic.Bool
	off       uintptr // where the elements start in the allocation, in bytes (a view's offset)
	n         int
	size      uintptr // n elements, in bytes
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
	a.start()
	b := &Buffer[T]{a: a, n: n, size: a.bytes}
	b.cleanup = runtime.AddCleanup(b, deferRelease, a)
	return b
}

// Alloc allocates n elements of T on c's device (cuMemAlloc).
func Alloc[T any](c *Context, n int) (*Buffer[T], error) {
	return alloc[T]("Alloc", c, n, false)
}

// AllocManaged allocates n elements of T of managed memory, reachable from
// the host and every device (cuMemAllocManaged with CU_MEM_ATTACH_GLOBAL).
// HostSlice views it from the host.
func AllocManaged[T any](c *Context, n int) (*Buffer[T], error) {
	return alloc[T]("AllocManaged", c, n, true)
}

func alloc[T any](op string, c *Context, n int, managed bool) (*Buffer[T], error) {
	bytes, err := byteSize[T](op, n)
	if err != nil {
		return nil, err
	}
	if err := c.hold(op); err != nil {
		return nil, err
	}
	a := &allocation{bytes: bytes, ctx: c, managed: managed}
	allocate := func() error {
		if managed {
			return cu.MemAllocManaged(&a.base, bytes, uint32(cu.CU_MEM_ATTACH_GLOBAL))
		}
		return cu.MemAlloc(&a.base, bytes)
	}
	err = bound(c, allocate)
	if errors.Is(err, ErrOutOfMemory) && waitCloseFrees() {
		// Memory that earlier Closes handed over may just have come back.
		err = bound(c, allocate)
	}
	if err != nil {
		c.release()
		return nil, err
	}
	return newBuffer[T](a, n), nil
}

// AllocAsync allocates n elements of T in stream order from the device's
// current memory pool (cuMemAllocAsync). The buffer holds s: its memory is
// freed in order on s (cuMemFreeAsync), after the work queued on any other
// stream that used it, even when s was closed meanwhile.
func AllocAsync[T any](s *Stream, n int) (*Buffer[T], error) {
	return allocAsync[T]("AllocAsync", s, nil, n)
}

func allocAsync[T any](op string, s *Stream, p *MemPool, n int) (*Buffer[T], error) {
	bytes, err := byteSize[T](op, n)
	if err != nil {
		return nil, err
	}
	if p != nil {
		if err := p.acquire(op); err != nil { // kept by the allocation
			return nil, err
		}
	}
	if err := s.acquire(op); err != nil { // kept by the allocation
		if p != nil {
			p.release()
		}
		return nil, err
	}
	c := s.ctx
	if err := c.hold(op); err != nil {
		s.release()
		if p != nil {
			p.release()
		}
		return nil, err
	}
	a := &allocation{bytes: bytes, ctx: c, stream: s, pool: p}
	// Never captured: no capture begins on s between enter and leave.
	if h := s.enter(); h != nil {
		s.leave(h)
		err = invalid(op, "the stream is being captured into a graph: allocate graph memory with a memory-alloc node instead")
	} else {
		err = bound(c, func() error {
			if p != nil {
				return cu.MemAllocFromPoolAsync(&a.base, bytes, p.h, s.h)
			}
			return cu.MemAllocAsync(&a.base, bytes, s.h)
		})
		s.leave(nil)
	}
	if err != nil {
		c.release()
		s.release()
		if p != nil {
			p.release()
		}
		return nil, c.sawError(err)
	}
	return newBuffer[T](a, n), nil
}

// use holds b's memory for a call; the caller releases a when done. It
// fails for a nil, zero or closed Buffer.
func (b *Buffer[T]) use(op string) (*allocation, error) {
	if b == nil {
		return nil, invalid(op, "nil buffer")
	}
	a := b.a
	if a == nil || b.closed.Load() || !a.obj.Retain() {
		return nil, notOpen(op, "buffer")
	}
	return a, nil
}

// Len is the number of elements (0 for a nil Buffer).
func (b *Buffer[T]) Len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// Size is the size in bytes: Len elements of T (0 for a nil or zero
// Buffer).
func (b *Buffer[T]) Size() int {
	if b == nil {
		return 0
	}
	return int(b.size)
}

// Ptr is the device address of the first element (0 once closed).
func (b *Buffer[T]) Ptr() DevicePtr {
	if b == nil || b.a == nil || b.closed.Load() {
		return 0
	}
	return DevicePtr(b.at(b.a))
}

// at is the device address of b's first element in a, b's allocation (a
// view starts inside it). Every call that hands b's memory to CUDA uses it,
// never a.base.
func (b *Buffer[T]) at(a *allocation) cu.CUdeviceptr { return a.base + cu.CUdeviceptr(b.off) }

// Context is the context the memory belongs to (nil for a nil or zero
// Buffer).
func (b *Buffer[T]) Context() *Context {
	if b == nil || b.a == nil {
		return nil
	}
	return b.a.ctx
}

// holdRef takes a reference on the memory for a dependent that outlives the
// call (a graph node names the buffer, say; seam.Hold); the memory stays
// allocated, even after Close, until the reference is released. It fails
// once the Buffer is closed: a closed buffer is no new argument.
func (b *Buffer[T]) holdRef() (lifetime.Ref, error) {
	a, err := b.use("hold")
	if err != nil {
		return lifetime.Ref{}, err
	}
	return lifetime.RefOf(&a.obj), nil
}

// Close releases the buffer's own reference, without waiting for the
// device. The memory is freed once no other holder is left (a call in
// flight, a stream-ordered copy not yet run, prepared launch arguments, a
// graph or an executable graph that names it):
//
//   - Memory from Alloc and AllocManaged is freed with cuMemFree, which
//     waits until the device has finished all the work queued in the
//     context. Close hands that release to a goroutine of purecuda's and
//     returns at once: work queued before Close may still use the memory,
//     and the memory is freed once that work is done. It comes back to the
//     device shortly after Close, not at once (MemGetInfo may not show it
//     yet); an allocation that runs out of memory first waits for the frees
//     that earlier Closes handed over and tries once more, and
//     lifetime.Flush waits for them. An error of the free is reported
//     through lifetime.Errors.
//   - Memory from AllocAsync and AllocFromPool is freed in order on its
//     stream (cuMemFreeAsync), after the work queued on every stream that
//     used it; Close returns the error of queuing that free.
//
// The Context's Close does not wait for these frees either: the context is
// released after the last of them. Close is idempotent; the first result is
// kept.
func (b *Buffer[T]) Close() error {
	if b == nil {
		return invalid("Buffer.Close", "nil buffer")
	}
	if b.a == nil {
		return nil // a zero Buffer owns nothing
	}
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.cleanup.Stop()
		b.closeErr = b.a.dropOwn()
	})
	return b.closeErr
}

// HostSlice views managed memory from the host. The slice is valid until
// Close and must not be used while kernels write the memory. Since a Go
// slice of CUDA memory cannot keep the Buffer reachable, a Buffer that has
// handed out a host slice loses its cleanup safety net: only Close frees it
// (dropped without Close, it is a leak, and keeps its Context).
func (b *Buffer[T]) HostSlice() ([]T, error) {
	const op = "Buffer.HostSlice"
	a, err := b.use(op)
	if err != nil {
		return nil, err
	}
	defer a.Release()
	if !a.managed {
		return nil, invalid(op, "not managed memory (use AllocManaged)")
	}
	b.cleanup.Stop()
	keepRooted(a) // no cleanup: its Context must stay reachable while a holds it
	p := b.at(a)
	return unsafe.Slice(*(**T)(unsafe.Pointer(&p)), b.n), nil
}

// devicePointer lets buffers of any element type be kernel arguments: arg
// holds the memory, like use, and returns the address to pass. self is the
// Buffer's own address: a type that embeds a *Buffer (or a Buffer, not
// first) implements devicePointer too, and its values are not Buffers.
type devicePointer interface {
	arg(op string) (*allocation, cu.CUdeviceptr, error)
	self() unsafe.Pointer
}

func (b *Buffer[T]) self() unsafe.Pointer { return unsafe.Pointer(b) }

func (b *Buffer[T]) arg(op string) (*allocation, cu.CUdeviceptr, error) {
	a, err := b.use(op)
	if err != nil {
		return nil, 0, err
	}
	return a, b.at(a), nil
}

func elemSize[T any]() uintptr { return reflect.TypeFor[T]().Size() }

func sliceBytes[T any](s []T) uintptr { return uintptr(len(s)) * elemSize[T]() }

func (b *Buffer[T]) fits(op string, n int) error {
	if n > b.n {
		return invalid(op, "%d elements do not fit in a buffer of %d", n, b.n)
	}
	return nil
}
