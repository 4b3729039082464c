package cublas

import (
	"fmt"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/seam"
)

var (
	batched32 = [4]func(hnd, opr, opr, int32, int32, int32, uintptr, uintptr, int32, uintptr, int32, uintptr, uintptr, int32, int32) error{
		cublasraw.SgemmBatched, cublasraw.DgemmBatched, cublasraw.CgemmBatched, cublasraw.ZgemmBatched}
	batched64 = [4]func(hnd, opr, opr, int64, int64, int64, uintptr, uintptr, int64, uintptr, int64, uintptr, uintptr, int64, int64) error{
		cublasraw.SgemmBatched_64, cublasraw.DgemmBatched_64, cublasraw.CgemmBatched_64, cublasraw.ZgemmBatched_64}
)

// GemmBatched computes C[i] = alpha·op(A[i])·op(B[i]) + beta·C[i] for
// every i (cublas<t>gemmBatched): the matrices of a batch may lie anywhere,
// in any buffers of the handle's context, but all have batch 0's shape,
// layout, operation and leading dimension. The three slices have one
// length, the batch count. Every view is checked (its refusal names it,
// "A[3]"); no C[i] may overlap another C[j] or any A[j] or B[j] (the
// batches run at once).
//
// The arrays of device pointers cuBLAS reads are built by this call in
// pinned host memory, which the GPU reads directly, and held until the
// stream has passed the routine (or, captured, by the graph). Allocating
// them is not allowed inside a capture of mode CaptureGlobal or
// CaptureThreadLocal (CUDA refuses it and ends that capture): capture
// GemmBatched in CaptureRelaxed mode. For many batches of the same
// matrices, GemmStridedBatched needs no arrays and captures in any mode.
func GemmBatched[T Float](h *Handle, alpha T, as, bs []Matrix[T], beta T, cs []Matrix[T]) error {
	const op = "GemmBatched"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	views := func(name string, ms []Matrix[T]) ([]blasview.Matrix, []uintptr, error) {
		vs, ps := make([]blasview.Matrix, len(ms)), make([]uintptr, len(ms))
		for i, m := range ms {
			if vs[i], ps[i], err = matrix(&cl, fmt.Sprintf("%s[%d]", name, i), m); err != nil {
				return nil, nil, err
			}
		}
		return vs, ps, nil
	}
	va, pa, err := views("A", as)
	if err != nil {
		return cl.fail(err)
	}
	vb, pb, err := views("B", bs)
	if err != nil {
		return cl.fail(err)
	}
	vc, pc, err := views("C", cs)
	if err != nil {
		return cl.fail(err)
	}
	g, err := blasview.GemmBatched(va, vb, vc)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	if g.Count == 0 {
		cl.done()
		return nil
	}
	if g.Swapped {
		pa, pb = pb, pa
	}
	n := int(g.Count)
	arrays, err := driver.AllocHost[uint64](cl.st.ctx, 3*n, driver.HostAllocDefault)
	if err != nil {
		return cl.fail(fmt.Errorf("cublas: %s: the pointer arrays: %w", op, err))
	}
	p := arrays.Slice() // taken before Close, which hides it; ref keeps the memory
	ref, err := seam.Hold(arrays)
	_ = arrays.Close() // ref holds it, until the stream has passed the routine
	if err != nil {
		return cl.fail(fmt.Errorf("cublas: %s: the pointer arrays: %w", op, err))
	}
	cl.late = append(cl.late, ref)
	if len(p) != 3*n {
		return cl.fail(fmt.Errorf("cublas: %s: the pointer arrays: %d elements, want %d", op, len(p), 3*n))
	}
	esz := sizeOf[T]()
	for i := range n {
		p[i] = uint64(pa[i] + uintptr(g.OffA[i])*esz)
		p[n+i] = uint64(pb[i] + uintptr(g.OffB[i])*esz)
		p[2*n+i] = uint64(pc[i] + uintptr(g.OffC[i])*esz)
	}
	// Pinned memory is reachable from the device at its host address
	// (unified addressing, which every platform purecuda runs on has).
	A := uintptr(unsafe.Pointer(&p[0]))
	B, C := A+uintptr(n)*8, A+2*uintptr(n)*8
	k := kindOf[T]()
	return cl.run(queued, func(hh cublasraw.Handle) error {
		al, be := scalars(cl.st, alpha, beta)
		if g.Needs64 {
			return batched64[k](hh, g.TransA, g.TransB, g.M, g.N, g.K, al, A, g.LDA, B, g.LDB, be, C, g.LDC, g.Count)
		}
		return batched32[k](hh, g.TransA, g.TransB, i32(g.M), i32(g.N), i32(g.K), al, A, i32(g.LDA), B, i32(g.LDB), be, C, i32(g.LDC), i32(g.Count))
	})
}
