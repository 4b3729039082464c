package cublas

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/seam"
)

// GemmGroup is one group of a grouped GEMM: the products C[i] =
// Alpha·op(A[i])·op(B[i]) + Beta·C[i], all of one shape, layout, operation
// and leading dimension (as one GemmBatched), with the group's own alpha
// and beta. The three slices have one length.
type GemmGroup[T Real] struct {
	Alpha, Beta T
	A, B, C     []Matrix[T]
}

// GemmGrouped computes every group's products in one call
// (cublas<t>gemmGroupedBatched, cuBLAS 12.5 and later; an older cuBLAS
// returns an error matching ErrNotSupported): groups of different shapes,
// layouts and scalars, for float32 and float64. Each group is checked as
// GemmBatched checks its batch, the problems numbered across the groups
// in refusals ("A[5]" is the sixth problem's A); no C may overlap any
// other problem's A, B or C, in any group (all run at once). Its pointer
// arrays are built and held as GemmBatched's (capture it in relaxed mode
// only); the scalars and shapes are read during the call.
func GemmGrouped[T Real](h *Handle, groups []GemmGroup[T]) error {
	const op = "GemmGrouped"
	cl, err := h.begin(op)
	if err != nil {
		return err
	}
	vgroups := make([]blasview.Group, len(groups))
	bases := make([][3][]uintptr, len(groups))
	problem := 0
	for gi, g := range groups {
		for x, ms := range [3][]Matrix[T]{g.A, g.B, g.C} {
			vs, ps := make([]blasview.Matrix, len(ms)), make([]uintptr, len(ms))
			for i, m := range ms {
				if vs[i], ps[i], err = matrix(&cl, fmt.Sprintf("%c[%d]", "ABC"[x], problem+i), m); err != nil {
					return cl.fail(err)
				}
			}
			bases[gi][x] = ps
			switch x {
			case 0:
				vgroups[gi].A = vs
			case 1:
				vgroups[gi].B = vs
			default:
				vgroups[gi].C = vs
			}
		}
		problem += len(g.A)
	}
	args, err := blasview.GemmGrouped(vgroups)
	if err != nil {
		return cl.fail(refused(op, err))
	}
	// The groups cuBLAS gets: the empty ones left out.
	var live []int
	total := 0
	for gi, a := range args {
		if a.Count > 0 && a.M > 0 && a.N > 0 {
			live = append(live, gi)
			total += int(a.Count)
		}
	}
	if len(live) == 0 {
		cl.done()
		return nil
	}
	arrays, err := driver.AllocHost[uint64](cl.st.ctx, 3*total, driver.HostAllocDefault)
	if err != nil {
		return cl.fail(fmt.Errorf("cublas: %s: the pointer arrays: %w", op, err))
	}
	p := arrays.Slice() // taken before Close, which hides it; ref keeps the memory
	ref, err := seam.Hold(arrays)
	_ = arrays.Close()
	if err != nil {
		return cl.fail(fmt.Errorf("cublas: %s: the pointer arrays: %w", op, err))
	}
	cl.late = append(cl.late, ref)
	if len(p) != 3*total {
		return cl.fail(fmt.Errorf("cublas: %s: the pointer arrays: %d elements, want %d", op, len(p), 3*total))
	}
	n := len(live)
	ta, tb := make([]cublasraw.Operation, n), make([]cublasraw.Operation, n)
	dims := make([]int64, 7*n) // m, n, k, lda, ldb, ldc, size
	alphas, betas := make([]T, n), make([]T, n)
	esz := sizeOf[T]()
	j := 0
	for li, gi := range live {
		a := args[gi]
		pa, pb := bases[gi][0], bases[gi][1]
		if a.Swapped {
			pa, pb = pb, pa
		}
		for i := range int(a.Count) {
			p[j] = uint64(pa[i] + uintptr(a.OffA[i])*esz)
			p[total+j] = uint64(pb[i] + uintptr(a.OffB[i])*esz)
			p[2*total+j] = uint64(bases[gi][2][i] + uintptr(a.OffC[i])*esz)
			j++
		}
		ta[li], tb[li] = a.TransA, a.TransB
		copy(dims[7*li:], []int64{a.M, a.N, a.K, a.LDA, a.LDB, a.LDC, a.Count})
		alphas[li], betas[li] = groups[gi].Alpha, groups[gi].Beta
	}
	A := uintptr(unsafe.Pointer(&p[0]))
	B, C := A+uintptr(total)*8, A+2*uintptr(total)*8
	al, be := uintptr(unsafe.Pointer(&alphas[0])), uintptr(unsafe.Pointer(&betas[0]))
	col := func(f int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = dims[7*i+f]
		}
		return out
	}
	m, nn, k, lda, ldb, ldc, size := col(0), col(1), col(2), col(3), col(4), col(5), col(6)
	big := args[live[0]].Needs64
	var m32, n32, k32, lda32, ldb32, ldc32, size32 []int32
	if !big {
		narrow := func(v []int64) []int32 {
			out := make([]int32, len(v))
			for i, x := range v {
				out[i] = int32(x)
			}
			return out
		}
		m32, n32, k32, lda32, ldb32, ldc32, size32 = narrow(m), narrow(nn), narrow(k), narrow(lda), narrow(ldb), narrow(ldc), narrow(size)
	}
	double := kindOf[T]() == kD
	err = cl.run(queued, func(hh cublasraw.Handle) error {
		switch {
		case big && double:
			return cublasraw.DgemmGroupedBatched_64(hh, &ta[0], &tb[0], &m[0], &nn[0], &k[0], al, A, &lda[0], B, &ldb[0], be, C, &ldc[0], int64(n), &size[0])
		case big:
			return cublasraw.SgemmGroupedBatched_64(hh, &ta[0], &tb[0], &m[0], &nn[0], &k[0], al, A, &lda[0], B, &ldb[0], be, C, &ldc[0], int64(n), &size[0])
		case double:
			return cublasraw.DgemmGroupedBatched(hh, &ta[0], &tb[0], &m32[0], &n32[0], &k32[0], al, A, &lda32[0], B, &ldb32[0], be, C, &ldc32[0], int32(n), &size32[0])
		}
		return cublasraw.SgemmGroupedBatched(hh, &ta[0], &tb[0], &m32[0], &n32[0], &k32[0], al, A, &lda32[0], B, &ldb32[0], be, C, &ldc32[0], int32(n), &size32[0])
	})
	runtime.KeepAlive(alphas)
	runtime.KeepAlive(betas)
	return err
}
