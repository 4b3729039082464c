package driver

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
)

// The conveniences users of cudarc, cuda.core and CuPy reach for first:
// zero-filled and copied allocations, a copy to a new slice, views, and a
// float32 fill. Each is a few calls of the API above, with the errors and
// the cleanup on failure done right.

// AllocZeroed allocates n elements of T on the device of s's context
// (cuMemAlloc) and sets every byte to 0 on s (cuMemsetD8Async), returning
// once the memory is zero.
func AllocZeroed[T any](s *Stream, n int) (*Buffer[T], error) {
	const op = "AllocZeroed"
	if _, err := byteSize[T](op, n); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("driver: %s: %w", op, ErrNilStream)
	}
	b, err := alloc[T](op, s.ctx, n, false)
	if err != nil {
		return nil, err
	}
	if err := b.memset(op, s, 1, true, func(a *allocation, n uintptr) error { return cu.MemsetD8Async(b.at(a), 0, n, s.h) }); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// AllocCopy allocates len(src) elements of T on the device of s's context
// (cuMemAlloc) and copies src into them on s, returning once the copy is
// done. src must not be empty.
func AllocCopy[T any](s *Stream, src []T) (*Buffer[T], error) {
	const op = "AllocCopy"
	if _, err := byteSize[T](op, len(src)); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("driver: %s: %w", op, ErrNilStream)
	}
	b, err := alloc[T](op, s.ctx, len(src), false)
	if err != nil {
		return nil, err
	}
	if err := b.CopyFromHost(s, src); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// ToHost copies all of b into a new slice on s and returns it once the
// copy is done: the slice holds what b held once everything queued on s
// before the call had run (cuMemcpyDtoHAsync, then cuStreamSynchronize).
func (b *Buffer[T]) ToHost(s *Stream) ([]T, error) {
	const op = "Buffer.ToHost"
	if err := b.checkEmpty(op, s); err != nil {
		return nil, err // before allocating the slice
	}
	dst := make([]T, b.n)
	if err := b.syncOnStream(op, s, len(dst), unsafe.Pointer(&dst[0]), func(a *allocation) error {
		return cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), b.at(a), sliceBytes(dst), s.h)
	}); err != nil {
		return nil, err
	}
	return dst, nil
}

// Slice returns a view of elements [from, to) of b: a Buffer of the same
// memory, without a copy, which can be used wherever b can (copies,
// memsets, kernel arguments, graph nodes) and covers only its elements.
// Like Go's s[from:to], it needs 0 <= from <= to <= b.Len(); unlike it, the
// view must not be empty.
//
// The view holds its own reference on the memory: the memory stays
// allocated until b and every view are closed (or collected), in any
// order. Closing the view does not close b. Views of views work alike.
func (b *Buffer[T]) Slice(from, to int) (*Buffer[T], error) {
	const op = "Buffer.Slice"
	if b == nil {
		return nil, invalid(op, "nil buffer")
	}
	if from < 0 || to > b.n || from >= to {
		return nil, invalid(op, "range [%d:%d] of a buffer of %d elements: want 0 <= from < to <= %d", from, to, b.n, b.n)
	}
	a, err := b.use(op) // the view's own reference, released by its Close or cleanup
	if err != nil {
		return nil, err
	}
	es := elemSize[T]()
	v := &Buffer[T]{a: a, n: to - from, off: b.off + uintptr(from)*es, size: uintptr(to-from) * es}
	v.cleanup = runtime.AddCleanup(v, deferRelease, a)
	return v, nil
}

// MemsetFloat32 sets every 32-bit word of b to v on s and returns when
// done (cuMemsetD32Async with v's bit pattern, then cuStreamSynchronize):
// for a Buffer[float32], every element becomes v.
func (b *Buffer[T]) MemsetFloat32(s *Stream, v float32) error {
	return b.memset("Buffer.MemsetFloat32", s, 4, true, func(a *allocation, n uintptr) error {
		return cu.MemsetD32Async(b.at(a), math.Float32bits(v), n, s.h)
	})
}

// MemsetFloat32Async queues setting every 32-bit word of b to v on s
// (cuMemsetD32Async with v's bit pattern).
func (b *Buffer[T]) MemsetFloat32Async(s *Stream, v float32) error {
	if s == nil {
		return fmt.Errorf("driver: Buffer.MemsetFloat32Async: %w", ErrNilStream)
	}
	return b.Memset32Async(s, math.Float32bits(v))
}
