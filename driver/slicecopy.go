package driver

import (
	"fmt"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
)

// Stream-ordered copies between device memory and ordinary Go slices. CUDA
// treats Go memory as pageable, and copies pageable memory out of stream
// order (see staging.go); these copies go through page-locked memory
// purecuda owns, or, in a capture, through a registration of the slice, so
// that each has one stated moment at which the slice is read or written.

// CopyFromHostAsync queues a copy of src into b on s (cuMemcpyHtoDAsync)
// and returns without waiting for s.
//
// src is read before CopyFromHostAsync returns: it is copied into
// page-locked memory that purecuda owns, and the device copy, which runs
// when s reaches it, reads from there. So src may be changed or reused as
// soon as the call returns, and a change made later — by the caller or by
// a host function queued on s before the copy — does not reach the device.
// The cost is a copy on the host (about as fast as memmove) and a host
// function after the device copy that gives the memory back. The context
// keeps a few page-locked blocks of up to 16 MiB for these copies; a
// larger copy page-locks memory of its own size and frees it after, which
// costs far more than the copy. For large or repeated copies, copy from a
// HostBuffer (CopyFromPinnedAsync), which the device reads when s reaches
// the copy.
//
// While s is being captured into a graph (package graph), the copy becomes
// a memcpy node that reads src each time the graph runs it: src is
// registered with CUDA (cuMemHostRegister) and pinned for as long as the
// graph may run, and must not be grown past its capacity meanwhile.
func (b *Buffer[T]) CopyFromHostAsync(s *Stream, src []T) error {
	const op = "Buffer.CopyFromHostAsync"
	if len(src) == 0 { // nothing to queue, but the same checks
		if s == nil {
			return fmt.Errorf("driver: %s: %w", op, ErrNilStream)
		}
		_, err := b.checkOpen(op)
		return err
	}
	return b.onStream(op, s, len(src), true, func(a *allocation, h *captureHook) error {
		p, n := unsafe.Pointer(&src[0]), sliceBytes(src)
		if h != nil {
			return s.copyRegistered(op, h, p, n, func() error { return cu.MemcpyHtoDAsync(b.at(a), p, n, s.h) })
		}
		st, err := s.ctx.getStage(op, n)
		if err != nil {
			return err
		}
		copy(st.bytes(n), unsafe.Slice((*byte)(p), n))
		return s.afterCopy(func() error { return cu.MemcpyHtoDAsync(b.at(a), st.p, n, s.h) }, func(bool) { st.put() })
	})
}

// CopyToHostAsync queues a copy of the first len(dst) elements of b into
// dst on s (cuMemcpyDtoHAsync) and returns without waiting for s.
//
// dst is written when s reaches the copy: the device copies into
// page-locked memory purecuda owns, and a host function queued right after
// it copies that into dst. So dst holds the data once s.Synchronize (or an
// event recorded after the copy) says the work is done, and work queued
// on s after the copy — a host function — sees it there. Do not read or
// write dst until then. dst is kept alive until it was written. The write
// is Go code's, so two copies into one slice that no stream or event
// orders are a data race, which the race detector reports.
//
// While s is being captured into a graph, the copy becomes a memcpy node
// that writes dst each time the graph runs it (dst is registered with
// CUDA and pinned for as long as the graph may run).
func (b *Buffer[T]) CopyToHostAsync(s *Stream, dst []T) error {
	const op = "Buffer.CopyToHostAsync"
	if len(dst) == 0 { // nothing to queue, but the same checks
		if s == nil {
			return fmt.Errorf("driver: %s: %w", op, ErrNilStream)
		}
		_, err := b.checkOpen(op)
		return err
	}
	return b.onStream(op, s, len(dst), true, func(a *allocation, h *captureHook) error {
		p, n := unsafe.Pointer(&dst[0]), sliceBytes(dst)
		if h != nil {
			return s.copyRegistered(op, h, p, n, func() error { return cu.MemcpyDtoHAsync(p, b.at(a), n, s.h) })
		}
		st, err := s.ctx.getStage(op, n)
		if err != nil {
			return err
		}
		out := unsafe.Slice((*byte)(p), n) // keeps dst alive until the host function ran
		return s.afterCopy(func() error { return cu.MemcpyDtoHAsync(st.p, b.at(a), n, s.h) }, func(ran bool) {
			if ran {
				copy(out, st.bytes(n))
			}
			st.put()
		})
	})
}

// copyRegistered registers the Go memory [p, p+n) and runs queue, which
// queues the captured copy naming it on s; the capture's graph holds the
// registration from then on.
func (s *Stream) copyRegistered(op string, h *captureHook, p unsafe.Pointer, n uintptr, queue func() error) error {
	reg, err := registerHost(op, s.ctx, p, n)
	if err != nil {
		return err
	}
	if err := queue(); err != nil {
		_ = reg.Release()
		return err
	}
	h.sink.Keep([]release.Owner{reg})
	return nil
}

// afterCopy runs queue, which queues an uncaptured copy on s with the
// context current, and then queues a host function that calls done(true)
// once the copy has run. done runs exactly once: with false if the copy
// was not queued or will never run (a sticky error), and with true, after
// a wait for s, if the host function could not be queued behind the copy.
// done must not call CUDA.
func (s *Stream) afterCopy(queue func() error, done func(ran bool)) error {
	tramp, err := hostfn.HostFn()
	if err != nil {
		done(false)
		return err
	}
	if err := queue(); err != nil {
		done(false)
		return err
	}
	id := hostfn.Register(hostfn.Callback{Fn: func() { done(true) }, Once: true, OnCancel: func() { done(false) }})
	hostfn.Expect()
	if err := cu.LaunchHostFunc(s.h, cu.CUhostFn(tramp), id); err != nil {
		// The copy is queued but what follows it is not: wait for it.
		serr := cu.StreamSynchronize(s.h)
		if hostfn.Unregister(id) {
			done(serr == nil)
		}
		return serr
	}
	s.ctx.addPending(id)
	return nil
}
