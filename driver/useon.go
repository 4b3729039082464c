package driver

import (
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Buffers named by work that another library of purecuda queues on a
// stream (package nccl's collectives): seam.UseOn.

// streamUser is a Buffer of any element type, for seam.UseOn.
type streamUser interface {
	useOn(op string, s *Stream) (ptr, bytes uintptr, ref lifetime.Ref, err error)
}

func init() {
	seam.UseOn = func(op string, b, s any) (uintptr, uintptr, lifetime.Ref, error) {
		u, ok := b.(streamUser)
		if !ok || u == nil {
			return 0, 0, lifetime.Ref{}, invalid(op, "%T is not a buffer", b)
		}
		st, _ := s.(*Stream)
		return u.useOn(op, st)
	}
}

// useOn holds b's memory for work queued on s (held by the caller), which
// must belong to the memory's context, and notes s as a user of
// stream-ordered memory (seam.UseOn).
func (b *Buffer[T]) useOn(op string, s *Stream) (uintptr, uintptr, lifetime.Ref, error) {
	if s == nil {
		return 0, 0, lifetime.Ref{}, invalid(op, "nil stream")
	}
	a, err := b.use(op)
	if err != nil {
		return 0, 0, lifetime.Ref{}, err
	}
	if a.ctx.h != s.ctx.h {
		_ = a.Release()
		return 0, 0, lifetime.Ref{}, invalid(op, "the buffer's memory belongs to another context than the stream")
	}
	a.usedOn(s)
	return uintptr(b.at(a)), b.size, lifetime.RefOf(&a.obj), nil
}
