package driver

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
)

// Copies and memsets of a Buffer: synchronous ones (queued on the stream
// they name, then a wait for it), and stream-ordered ones that hold what
// they name until the work has run (or, captured, for as long as the graph
// may run it).

// syncOnStream queues f (a copy or memset naming b's memory) on s, with b
// and s held and the context current, and waits until s has run it
// (cuStreamSynchronize): the work is ordered after everything queued on s
// before the call, and done when the call returns. A stream being captured
// is refused: a graph cannot wait. pin, if not nil, is Go memory the work
// reads or writes, pinned until the wait is over.
func (b *Buffer[T]) syncOnStream(op string, s *Stream, n int, pin unsafe.Pointer, f func(a *allocation) error) error {
	a, err := b.use(op)
	if err != nil {
		return err
	}
	defer a.Release()
	if err := b.fits(op, n); err != nil {
		return err
	}
	if err := s.acquire(op); err != nil {
		return err
	}
	defer s.release()
	if !s.ctx.canUse(a.ctx) {
		return invalid(op, "the buffer belongs to another context than the stream")
	}
	if err := s.enterUncaptured(op); err != nil {
		return err
	}
	defer s.leave(nil)
	a.usedOn(s)
	var p runtime.Pinner
	if pin != nil {
		p.Pin(pin) // a pageable copy may read it after the call that queued it
		defer p.Unpin()
		// Pages that a graph or RegisterHost registered stay registered
		// until the copy is done: CUDA copies them by DMA.
		defer keptDone(keepRegistered(pin, uintptr(n)*elemSize[T]()))
	}
	return s.ctx.sawError(bound(s.ctx, func() error {
		if err := f(a); err != nil {
			return err
		}
		return cu.StreamSynchronize(s.h)
	}))
}

// CopyFromHost copies src into the start of b on s and returns when the
// copy is done (cuMemcpyHtoDAsync, then cuStreamSynchronize). The copy runs
// after everything queued on s before the call, and src is read by the time
// the call returns. Name ctx.LegacyStream() for the legacy default stream.
// Panics of host functions queued on s are left for s.Synchronize.
func (b *Buffer[T]) CopyFromHost(s *Stream, src []T) error {
	const op = "Buffer.CopyFromHost"
	if len(src) == 0 {
		return b.checkEmpty(op, s)
	}
	return b.syncOnStream(op, s, len(src), unsafe.Pointer(&src[0]), func(a *allocation) error {
		return cu.MemcpyHtoDAsync(b.at(a), unsafe.Pointer(&src[0]), sliceBytes(src), s.h)
	})
}

// CopyToHost copies the first len(dst) elements of b into dst on s and
// returns when the copy is done (cuMemcpyDtoHAsync, then
// cuStreamSynchronize): dst holds what b held once everything queued on s
// before the call had run.
func (b *Buffer[T]) CopyToHost(s *Stream, dst []T) error {
	const op = "Buffer.CopyToHost"
	if len(dst) == 0 {
		return b.checkEmpty(op, s)
	}
	return b.syncOnStream(op, s, len(dst), unsafe.Pointer(&dst[0]), func(a *allocation) error {
		return cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), b.at(a), sliceBytes(dst), s.h)
	})
}

// CopyFrom copies all of src into the start of b on s and returns when the
// copy is done (cuMemcpyDtoDAsync, then cuStreamSynchronize): src must not
// be longer than b, and b holds what src held once everything queued on s
// before the call had run. A view copies, or is written, only its own
// elements.
//
// src may belong to another context than b, of another device or of the
// same one: then the copy is cuMemcpyPeerAsync, s must be a stream of b's
// context or of src's, peer access is not needed, and the copy waits for
// the work queued on s only, not for the other context's (see
// CopyFromAsync). For buffers of one context, s may also be a stream of a
// context with peer access to it (Context.EnablePeerAccess).
func (b *Buffer[T]) CopyFrom(s *Stream, src *Buffer[T]) error {
	const op = "Buffer.CopyFrom"
	sa, err := src.use(op)
	if err != nil {
		return err
	}
	defer sa.Release()
	if b.otherContext(sa) {
		return b.copyPeer(op, s, src, sa, true)
	}
	if s != nil && s.ctx != nil && !s.ctx.canUse(sa.ctx) {
		return invalid(op, "the source buffer belongs to another context than the stream")
	}
	return b.syncOnStream(op, s, src.n, nil, func(a *allocation) error {
		sa.usedOn(s)
		return cu.MemcpyDtoDAsync(b.at(a), src.at(sa), src.size, s.h)
	})
}

// checkEmpty makes the checks of a copy of nothing: s names a stream and b
// is open.
func (b *Buffer[T]) checkEmpty(op string, s *Stream) error {
	if _, err := b.checkOpen(op); err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("driver: %s: %w", op, ErrNilStream)
	}
	return nil
}

// checkOpen reports whether b is open, without holding it.
func (b *Buffer[T]) checkOpen(op string) (bool, error) {
	a, err := b.use(op)
	if err != nil {
		return false, err
	}
	a.Release()
	return true, nil
}

// onStream runs f, which queues work on s that names b's memory, with b and
// s held for the call, after the checks every stream-ordered operation on a
// buffer makes; f runs with the context current when the stream needs it.
func (b *Buffer[T]) onStream(op string, s *Stream, n int, bind bool, f func(a *allocation, h *captureHook) error) error {
	a, err := b.use(op)
	if err != nil {
		return err
	}
	defer a.Release()
	if err := b.fits(op, n); err != nil {
		return err
	}
	if err := s.acquire(op); err != nil {
		return err
	}
	defer s.release()
	if !s.ctx.canUse(a.ctx) {
		return invalid(op, "the buffer belongs to another context than the stream")
	}
	a.usedOn(s)
	h := s.enter()
	if bind || s.special {
		err = bound(s.ctx, func() error { return f(a, h) })
	} else {
		err = f(a, h)
	}
	if h != nil && err == nil {
		h.keepObjs(&a.obj) // captured: the graph holds the memory
	} else if err == nil && a.ctx.h != s.ctx.h {
		// A stream of a context with peer access: the memory's free
		// waits for its own context's work, which this is not.
		holdUntilPassed(s, a)
	}
	s.leave(h)
	return s.ctx.sawError(err)
}

// CopyFromAsync queues a copy of all of src into the start of b on s
// (cuMemcpyDtoDAsync) and returns without waiting for s; src must not be
// longer than b. The copy runs after everything queued on s before it, and
// reads src when it runs. Both buffers' memory stays allocated until the
// copy has run, even if they are closed at once. For buffers of one
// context, s may also be a stream of a context with peer access to it
// (Context.EnablePeerAccess). While s is being captured into a graph, the
// copy becomes a memcpy node and the graph holds both.
//
// # Between contexts
//
// src may belong to another context than b, of another device or of the
// same one. Then the copy is cuMemcpyPeerAsync, and s must be a stream of
// b's context or of src's (either may be the legacy stream); a stream of
// any other context is refused with ErrInvalidArgument, and nothing is
// queued. Peer access is not needed: without it (Context.EnablePeerAccess,
// Device.CanAccessPeer) CUDA stages the copy, which is slower. The copy is
// ordered on s alone: it does not wait for work queued on the other
// context's streams, so order a kernel there that writes src (or reads b)
// with an event: Event.Record on that stream, then s.WaitEvent. Both
// buffers, and so both contexts, stay alive until s has passed the copy,
// whichever of them is closed first. A copy between contexts cannot be
// captured into a graph: on a stream being captured it is refused with
// ErrStreamCaptureUnsupported, and the capture goes on.
func (b *Buffer[T]) CopyFromAsync(s *Stream, src *Buffer[T]) error {
	const op = "Buffer.CopyFromAsync"
	sa, err := src.use(op)
	if err != nil {
		return err
	}
	defer sa.Release()
	if b.otherContext(sa) {
		return b.copyPeer(op, s, src, sa, false)
	}
	if s != nil && s.ctx != nil && !s.ctx.canUse(sa.ctx) {
		return invalid(op, "the source buffer belongs to another context than the stream")
	}
	return b.onStream(op, s, src.n, false, func(a *allocation, h *captureHook) error {
		sa.usedOn(s)
		err := cu.MemcpyDtoDAsync(b.at(a), src.at(sa), src.size, s.h)
		switch {
		case err != nil:
		case h != nil:
			h.keepObjs(&sa.obj)
		case s.ctx.h != sa.ctx.h:
			// A stream of a context with peer access: the memory's free
			// waits for its own context's work, which the copy is not
			// (onStream holds b's).
			holdUntilPassed(s, sa)
		}
		return err
	})
}

// memset checks b for a memset of width-byte words and queues set on s;
// wait makes it synchronous (see syncOnStream).
func (b *Buffer[T]) memset(op string, s *Stream, width uintptr, wait bool, set func(a *allocation, n uintptr) error) error {
	if s == nil && !wait {
		return fmt.Errorf("driver: %s: %w", op, ErrNilStream)
	}
	if b != nil && b.a != nil && b.size%width != 0 {
		return invalid(op, "%d bytes are not a multiple of %d", b.size, width)
	}
	if b != nil && b.off%width != 0 {
		return invalid(op, "a view at byte offset %d is not aligned to %d bytes", b.off, width)
	}
	if wait {
		return b.syncOnStream(op, s, 0, nil, func(a *allocation) error { return set(a, b.size/width) })
	}
	return b.onStream(op, s, 0, false, func(a *allocation, _ *captureHook) error { return set(a, b.size/width) })
}

// Memset8 sets every byte of b to v on s and returns when done
// (cuMemsetD8Async, then cuStreamSynchronize).
func (b *Buffer[T]) Memset8(s *Stream, v uint8) error {
	return b.memset("Buffer.Memset8", s, 1, true, func(a *allocation, n uintptr) error { return cu.MemsetD8Async(b.at(a), v, n, s.h) })
}

// Memset16 sets every 16-bit word of b to v on s and returns when done
// (cuMemsetD16Async, then cuStreamSynchronize).
func (b *Buffer[T]) Memset16(s *Stream, v uint16) error {
	return b.memset("Buffer.Memset16", s, 2, true, func(a *allocation, n uintptr) error { return cu.MemsetD16Async(b.at(a), v, n, s.h) })
}

// Memset32 sets every 32-bit word of b to v on s and returns when done
// (cuMemsetD32Async, then cuStreamSynchronize).
func (b *Buffer[T]) Memset32(s *Stream, v uint32) error {
	return b.memset("Buffer.Memset32", s, 4, true, func(a *allocation, n uintptr) error { return cu.MemsetD32Async(b.at(a), v, n, s.h) })
}

// Memset8Async queues setting every byte of b to v on s (cuMemsetD8Async).
func (b *Buffer[T]) Memset8Async(s *Stream, v uint8) error {
	return b.memset("Buffer.Memset8Async", s, 1, false, func(a *allocation, n uintptr) error { return cu.MemsetD8Async(b.at(a), v, n, s.h) })
}

// Memset16Async queues setting every 16-bit word of b to v on s.
func (b *Buffer[T]) Memset16Async(s *Stream, v uint16) error {
	return b.memset("Buffer.Memset16Async", s, 2, false, func(a *allocation, n uintptr) error { return cu.MemsetD16Async(b.at(a), v, n, s.h) })
}

// Memset32Async queues setting every 32-bit word of b to v on s.
func (b *Buffer[T]) Memset32Async(s *Stream, v uint32) error {
	return b.memset("Buffer.Memset32Async", s, 4, false, func(a *allocation, n uintptr) error { return cu.MemsetD32Async(b.at(a), v, n, s.h) })
}
