package driver

import (
	"unsafe"

	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
)

// The quick hold of a stream and buffers for another library's call
// (seam.Use): the stream by its in-flight count (quickHold), each buffer's
// allocation by a reference. It is one function, written out, as the
// launch fast path is: the libraries' calls evict the caller's code and
// data from the CPU caches, and every function and line touched costs a
// miss.

func init() {
	seam.QuickUse = quickUse
	seam.QuickLeave = func(p unsafe.Pointer) { (*Stream)(p).endQuick() }
	seam.QuickRelease = quickRelease
}

// quickUse is seam.Use.
func quickUse(p unsafe.Pointer, q *seam.Quick) bool {
	s := (*Stream)(p)
	n := q.N
	if n < 0 || n > seam.QuickBufs || !s.quickHold() {
		return false
	}
	// Every check first, so that a refusal holds nothing.
	for i := range n {
		b := (*Buffer[byte])(q.Buf[i])
		if b == nil {
			return refuseQuick(s, q, i)
		}
		a := b.a
		if a == nil || b.closed.Load() || (a.ctx != s.ctx && a.ctx.h != s.ctx.h) {
			return refuseQuick(s, q, i)
		}
		q.Held[i] = unsafe.Pointer(a)
		q.Ptr[i] = uintptr(b.at(a))
		q.Bytes[i] = b.size
	}
	for i := range n {
		a := (*allocation)(q.Held[i])
		if !a.obj.Retain() { // freed since the check: a Close's last release raced it
			s.endQuick()
			// Released on the queue: s was held (see seam.Use).
			for _, h := range q.Held[:i] {
				release.Defer((*allocation)(h))
			}
			clear(q.Held[:n])
			return false
		}
	}
	for i := range n {
		if a := (*allocation)(q.Held[i]); a.stream != nil {
			a.usedOn(s)
		}
	}
	q.Ctx, q.Strm = uintptr(s.ctx.h), uintptr(s.h)
	return true
}

// refuseQuick ends quickUse's hold on s and forgets the n allocations
// checked (not held), so that a Release by mistake releases nothing.
func refuseQuick(s *Stream, q *seam.Quick, n int) bool {
	s.endQuick()
	clear(q.Held[:n])
	return false
}

// quickRelease is seam.Release.
func quickRelease(q *seam.Quick) {
	n := min(max(q.N, 0), seam.QuickBufs)
	var w int64
	for _, h := range q.Held[:n] {
		w += (*allocation)(h).obj.Refs()
	}
	warmed(w)
	for i, h := range q.Held[:n] {
		_ = (*allocation)(h).obj.Release()
		q.Held[i] = nil
	}
}
