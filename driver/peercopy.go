package driver

import (
	"fmt"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// Copies between buffers of two CUDA contexts (of two devices, or two
// contexts of one device): Buffer.CopyFrom and CopyFromAsync take this
// path when the source's memory belongs to another context than the
// destination's.
//
// The copy (cuMemcpyPeerAsync, which names both contexts) is queued on a
// stream of one of the two contexts. The buffer of that stream's context
// is covered as in any copy: its free (cuMemFree) waits for its context's
// work, or, for stream-ordered memory, for the stream's. The other
// buffer's free waits for its own context's work only, which does not
// include the copy: so the call hands a reference on that memory, which
// also holds its context, to the stream's release-after-work (afterWork),
// which drops it once the stream has passed the copy. The stream, held
// by that wait, holds its own context. A copy between buffers of one
// context on a stream of a peer context (CopyFromAsync, peer access
// enabled) holds both buffers the same way.

// otherContext reports whether sa, the memory of a copy's source, belongs
// to another CUDA context than b's memory.
func (b *Buffer[T]) otherContext(sa *allocation) bool {
	return b != nil && b.a != nil && b.a.ctx.h != sa.ctx.h
}

// copyPeer queues a copy of all of src (its memory sa, held by the caller)
// into the start of b on s, b's memory and sa belonging to two contexts;
// wait makes it synchronous (the copy, then cuStreamSynchronize). s must
// belong to one of the two contexts; on a stream being captured the copy
// is refused.
func (b *Buffer[T]) copyPeer(op string, s *Stream, src *Buffer[T], sa *allocation, wait bool) error {
	a, err := b.use(op)
	if err != nil {
		return err
	}
	defer a.Release()
	if err := b.fits(op, src.n); err != nil {
		return err
	}
	if err := s.acquire(op); err != nil {
		return err
	}
	defer s.release()
	own, other := a, sa // own: the memory of s's context
	switch s.ctx.h {
	case a.ctx.h:
	case sa.ctx.h:
		own, other = sa, a
	default:
		return invalid(op, "a copy between two contexts runs on a stream of one of them; this stream belongs to neither")
	}
	if h := s.enter(); h != nil {
		s.leave(h)
		return fmt.Errorf("driver: %s: a copy between two contexts cannot be captured into a graph: %w", op, ErrStreamCaptureUnsupported)
	}
	own.usedOn(s) // stream-ordered memory used on another stream of its context
	queued := false
	err = bound(s.ctx, func() error {
		if err := cu.MemcpyPeerAsync(b.at(a), a.ctx.h, src.at(sa), sa.ctx.h, src.size, s.h); err != nil {
			return err
		}
		queued = true
		if wait {
			return cu.StreamSynchronize(s.h)
		}
		return nil
	})
	s.leave(nil)
	// Not waited for (or the wait failed): the other context's memory is
	// held until s has passed the copy.
	if queued && (!wait || err != nil) {
		holdUntilPassed(s, other)
	}
	return s.ctx.sawError(err)
}

// holdUntilPassed keeps each of allocs, which the caller holds, allocated
// until s has passed the work queued on it so far (Stream.afterWork): for
// memory of another context than s's, whose free waits for the work of
// its own context only. The caller holds s.
func holdUntilPassed(s *Stream, allocs ...*allocation) {
	for _, a := range allocs {
		if a.obj.Retain() { // cannot fail: the caller holds a
			s.afterWork(lifetime.RefOf(&a.obj))
		}
	}
}
