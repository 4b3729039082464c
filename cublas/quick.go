package cublas

import (
	"unsafe"

	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/seam"
)

// The quick path of Gemm: the common case written out in one function,
// as driver's launch is. cuBLAS's call evicts the caller's code and data
// from the CPU caches, so each function the next call runs and each line
// it touches costs a miss: this one holds the stream and the three
// buffers in one call into package driver (seam.Use: the stream by its
// count of calls in flight, no reference), checks the views in a few
// instructions (blasview.QuickGemm) and fills the handle's own sequence of
// C calls in place. Anything else, or any doubt, goes to the general path,
// which does the same work in every case and explains a refusal.

// gemmQuick makes Gemm's call when it is the common case (a live handle,
// an uncaptured stream, open buffers of the handle's context, views that
// blasview.QuickGemm accepts) and reports true with its error; otherwise
// it reports false, having queued nothing and holding nothing.
func gemmQuick[T Float](h *Handle, alpha T, a, b *Matrix[T], beta T, c *Matrix[T]) (bool, error) {
	if h == nil || h.st == nil || !h.obj.Acquire() {
		return false, nil
	}
	st := h.st
	q := seam.Quick{N: 3}
	q.Buf[0], q.Buf[1], q.Buf[2] = unsafe.Pointer(a.Buf), unsafe.Pointer(b.Buf), unsafe.Pointer(c.Buf)
	// The handle's lock first, as the general path takes it before it
	// enters the stream.
	st.mu.Lock()
	if !seam.Use(unsafe.Pointer(st.s), &q) {
		st.mu.Unlock()
		_ = h.obj.Release()
		return false, nil
	}
	esz := int64(sizeOf[T]())
	va := a.view(blasview.Buffer{Len: int64(q.Bytes[0]) / esz, Addr: uint64(q.Ptr[0]), Elem: esz})
	vb := b.view(blasview.Buffer{Len: int64(q.Bytes[1]) / esz, Addr: uint64(q.Ptr[1]), Elem: esz})
	vc := c.view(blasview.Buffer{Len: int64(q.Bytes[2]) / esz, Addr: uint64(q.Ptr[2]), Elem: esz})
	var g blasview.GemmArgs
	k := kindOf[T]()
	fn := st.gemmFn[k]
	if fn == 0 {
		fn, _ = gemmProc32[k]() // 0 when missing: the general path explains
		st.gemmFn[k] = fn
	}
	if fn == 0 || !blasview.QuickGemm(&va, &vb, &vc, &g) {
		seam.Leave(unsafe.Pointer(st.s))
		st.mu.Unlock()
		seam.Release(&q)
		_ = h.obj.Release()
		return false, nil
	}
	pa, pb := q.Ptr[0], q.Ptr[1]
	if g.Swapped {
		pa, pb = pb, pa
	}
	al, be := scalars(st, alpha, beta)
	s := st.seq.Op()
	s.Fn, s.N = fn, 14
	s.Args[0], s.Args[1], s.Args[2], s.Args[3], s.Args[4], s.Args[5] = uintptr(st.h), uintptr(g.TransA), uintptr(g.TransB), uintptr(g.M), uintptr(g.N), uintptr(g.K)
	s.Args[6], s.Args[7], s.Args[8], s.Args[9] = al, at[T](pa, g.OffA), uintptr(g.LDA), at[T](pb, g.OffB)
	s.Args[10], s.Args[11], s.Args[12], s.Args[13] = uintptr(g.LDB), be, at[T](q.Ptr[2], g.OffC), uintptr(g.LDC)
	err := st.seq.Run(st.cuctx, gemmStatus32[k])
	seam.Leave(unsafe.Pointer(st.s))
	st.mu.Unlock()
	// Released once the lock is given back, as in the general path.
	seam.Release(&q)
	_ = h.obj.Release()
	return true, wrap("Gemm", err)
}
