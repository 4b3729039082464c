package cublas

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/seam"
)

// autotune times each candidate the heuristic gave (st.candidates) on
// scratch buffers of the plan's shapes, on the handle's stream, and keeps
// the fastest.
func autotune[TA, TB, TC Element](st *planState) error {
	const op = "NewMatmulPlan"
	hs := st.hd.st
	if capture.Installed(hs.s) != nil {
		return fmt.Errorf("cublas: %s: Autotune times matmuls on the handle's stream, which is being captured: %w", op, driver.ErrStreamCaptureUnsupported)
	}
	g := st.g
	ac, bc := g.K, g.N
	if g.TransA != cublasraw.CUBLAS_OP_N {
		ac = g.M
	}
	if g.TransB != cublasraw.CUBLAS_OP_N {
		bc = g.K
	}
	sa, sb := sizeOf[TA](), sizeOf[TB]()
	if g.Swapped {
		sa, sb = sb, sa
	}
	var bufs []*driver.Buffer[byte]
	defer func() {
		for _, b := range bufs {
			_ = b.Close()
		}
	}()
	esz := int64(sizeOf[TC]())
	// A, B, C and D, the bias (or its gradient), the auxiliary matrix.
	sizes := [5][3]int64{{g.LDA, ac, int64(sa)}, {g.LDB, bc, int64(sb)}, {g.LDC, g.N, esz}, {max(g.M, g.N), esz, 1}, {st.auxLD, g.N, esz}}
	if st.epi.mask() {
		sizes[4] = [3]int64{st.auxLD / 8, g.N, 1}
	}
	if st.fp8Out {
		sizes[2][2] = 2 // C's layout is BFloat16 (C is NULL, but in case)
	}
	var bytes [5]int64 // all checked before any is allocated
	for i, sz := range sizes {
		var ok bool
		if bytes[i], ok = sizeProduct(sz[0], sz[1], sz[2]); !ok || bytes[i] > math.MaxInt64-256 {
			return fmt.Errorf("cublas: %s: autotune's scratch: %d×%d×%d bytes is beyond 2^63-1: %w", op, sz[0], sz[1], sz[2], driver.ErrOutOfMemory)
		}
	}
	// Each starts with no more alignment than Run requires (so that every
	// candidate is timed, and tested, at it): the matrices and the
	// auxiliary matrix 16 bytes into their scratch, the bias one element.
	offs := [5]uintptr{matrixAlign, matrixAlign, matrixAlign, uintptr(esz), 16}
	if st.fp8 {
		offs[3] = 16 // an FP8 plan's bias starts on 16 bytes (see extras)
	}
	var ptrs [5]uintptr
	for i := range bytes {
		b, err := driver.AllocZeroed[byte](hs.s, int(bytes[i]+256))
		if err != nil {
			return fmt.Errorf("cublas: %s: autotune's scratch: %w", op, err)
		}
		bufs = append(bufs, b)
		ptrs[i] = uintptr(b.Ptr()) + offs[i]
	}
	ev0, err := hs.ctx.NewEvent(driver.EventDefault)
	if err != nil {
		return err
	}
	defer ev0.Close()
	ev1, err := hs.ctx.NewEvent(driver.EventDefault)
	if err != nil {
		return err
	}
	defer ev1.Close()
	// The events' handles, used below while the events are open (they
	// are closed last).
	var e0, e1 cu.CUevent
	if err := ev0.Raw(func(h uintptr) error { e0 = cu.CUevent(h); return nil }); err != nil {
		return err
	}
	if err := ev1.Raw(func(h uintptr) error { e1 = cu.CUevent(h); return nil }); err != nil {
		return err
	}
	const reps = 5
	// timed queues n matmuls of a candidate between records of ev0 and
	// ev1 and waits for ev1, as one routine that refuses a capture: none
	// can begin on the stream meanwhile, so that no graph gets a matmul
	// naming the scratch buffers, and no wait breaks a capture.
	timed := func(algo *cublasraw.LtMatmulAlgo, ws uintptr, n int) error {
		cl, err := st.hd.begin(op)
		if err != nil {
			return err
		}
		return cl.run(timing, func(cublasraw.Handle) error {
			bias := uintptr(0)
			if st.epi.hasBias() || st.epi.biasGrad() {
				bias = ptrs[3]
			}
			x := extraPtrs{bias: bias, aux: ptrs[4]}
			if st.amax {
				x.amax = ptrs[3] // no bias with an 8-bit D: its scratch
			}
			if err := st.pointers(x); err != nil {
				return err
			}
			al, be := exScalars(hs, st.sk, 1, 0)
			stream := seam.Stream(hs.s)
			if err := cu.EventRecord(e0, cu.CUstream(stream)); err != nil {
				return err
			}
			for range n {
				if err := cublasraw.LtMatmul(st.lt, st.desc, al, ptrs[0], st.la, ptrs[1], st.lb, be, st.cPtr(ptrs[2]), st.cLayout(), ptrs[2], st.lc,
					algo, hs.wsPtr, ws, cublasraw.Stream(stream)); err != nil {
					return err
				}
			}
			if err := cu.EventRecord(e1, cu.CUstream(stream)); err != nil {
				return err
			}
			return cu.EventSynchronize(e1)
		})
	}
	best := -1
	for i := range st.candidates {
		c := &st.candidates[i]
		elapsed := time.Duration(-1)
		err := timed(&c.Algo, c.WorkspaceSize, 1) // a warm-up, and a test that the candidate runs
		var ce *Error
		switch {
		case err == nil:
			if err := timed(&c.Algo, c.WorkspaceSize, reps); err != nil {
				return err
			}
			if elapsed, err = driver.Elapsed(ev0, ev1); err != nil {
				return err
			}
			elapsed /= reps
		case !errors.As(err, &ce):
			return err // not the candidate's failure: a capture, a closed handle, the stream's error
		}
		st.tuned = append(st.tuned, elapsed) // -1: the candidate failed to run
		if elapsed >= 0 && (best < 0 || elapsed < st.tuned[best]) {
			best = i
		}
	}
	if best < 0 {
		return &Error{Op: op, Func: "cublasLtMatmul", Status: StatusNotSupported}
	}
	st.algo, st.wsBytes = st.candidates[best].Algo, st.candidates[best].WorkspaceSize
	return nil // the last timing waited for its work
}
