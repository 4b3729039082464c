package main

// cuBLASLt plans and graph capture.

import (
	"errors"
	"fmt"
	"math"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

func matmulPlan(e *env) {
	const m, k, n = 6, 5, 4 // m ≠ n, so a per-row bias would be the wrong length
	A, B := fill[float32](m, k, 14), fill[float32](k, n, 15)
	bias := []float32{-4, 2, -1, 3} // one per column of the row-major D
	a := &arena{e: e}
	defer func() {
		if err := a.close(); err != nil {
			fail("MatmulPlan buffers", "%v", err)
		}
	}()
	dA, dB, dD := upload(a, A.v), upload(a, B.v), upload(a, make([]float32, m*n))
	dBias, dShort, dLong := upload(a, bias), upload(a, bias[:n-1]), upload(a, make([]float32, m))
	if a.err != nil {
		fail("MatmulPlan buffers", "%v", a.err)
		return
	}
	va, vb, vd := cublas.RowMajorMatrix(dA, m, k), cublas.RowMajorMatrix(dB, k, n), cublas.RowMajorMatrix(dD, m, n)
	p, err := cublas.NewMatmulPlan(e.h, va, vb, vd, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUBias})
	if err != nil {
		fail("NewMatmulPlan ReLU+bias row-major", "%v", err)
		return
	}
	defer p.Close()
	AB := matmul(A, B)
	want := func(alpha float32) []float32 {
		w := make([]float32, m*n)
		for i := range m {
			for j := range n {
				w[i*n+j] = max(0, alpha*AB.at(i, j)+bias[j])
			}
		}
		return w
	}
	check("MatmulPlan ReLU+bias row-major 6×5·5×4, bias per column, 10 Runs with alpha 1…10 (D reset to −7 before each)", func() error {
		for r := range 10 {
			if err := dD.MemsetFloat32(e.s, -7); err != nil {
				return err
			}
			alpha := float32(r + 1)
			if err := p.Run(float64(alpha), va, vb, 0, vd, vd, dBias); err != nil {
				return fmt.Errorf("run %d: %w", r, err)
			}
			got, err := dD.ToHost(e.s)
			if err != nil {
				return err
			}
			if err := compare(got, want(alpha), 0); err != nil {
				return fmt.Errorf("run %d: %w", r, err)
			}
		}
		return nil
	}())
	refused("MatmulPlan.Run with a bias of n−1 elements refused", p.Run(1, va, vb, 0, vd, vd, dShort), driver.ErrInvalidArgument)
	refused("MatmulPlan.Run with a nil bias on a bias epilogue refused", p.Run(1, va, vb, 0, vd, vd, nil), driver.ErrInvalidArgument)
	// Not a rule the docs state either way: a bias longer than n.
	if err := p.Run(1, va, vb, 0, vd, vd, dLong); err != nil {
		ok(fmt.Sprintf("MatmulPlan.Run with a bias of m=%d elements (per row, wrong for row-major) refused: %v", m, err))
	} else {
		ok(fmt.Sprintf("MatmulPlan.Run with a bias of m=%d elements (per row, wrong for row-major) ACCEPTED: only its first n=%d used?", m, n))
	}
	check("MatmulPlan Autotune 4: Tuned() lists candidates, Run correct", func() error {
		pt, err := cublas.NewMatmulPlan(e.h, va, vb, vd, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUBias, Autotune: 4})
		if err != nil {
			return err
		}
		defer pt.Close()
		if len(pt.Tuned()) == 0 {
			return errors.New("Tuned() is empty after Autotune 4")
		}
		if err := dD.MemsetFloat32(e.s, -7); err != nil {
			return err
		}
		if err := pt.Run(1, va, vb, 0, vd, vd, dBias); err != nil {
			return err
		}
		got, err := dD.ToHost(e.s)
		if err != nil {
			return err
		}
		return compare(got, want(1), 0)
	}())
}

// --- (8) graph ----------------------------------------------------------

// graphCheck captures, on a handle of its own, a memset of C, 49 Gemms
// C += A·B, one D += A·B and copies of C and D into Go slices; closes the
// graph, the buffers and the handle; replays 100 times. C must be 49·A·B
// (reset each replay), D 100·A·B (accumulated over the replays).
func graphCheck(e *env) {
	const m, k, n = 4, 3, 5
	what := "graph: 50 Gemms captured (CaptureGlobal), buffers+handle closed, replayed 100 times"
	s2, err := e.ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		fail(what, "%v", err)
		return
	}
	defer s2.Close()
	h2, err := cublas.NewHandle(s2, nil)
	if err != nil {
		fail(what, "%v", err)
		return
	}
	A, B := fill[float32](m, k, 16), fill[float32](k, n, 17)
	a := &arena{e: &env{ctx: e.ctx, s: s2}}
	dA, dB, dC, dD := upload(a, A.v), upload(a, B.v), upload(a, make([]float32, m*n)), upload(a, make([]float32, m*n))
	if a.err != nil {
		fail(what, "%v", errors.Join(a.close(), h2.Close()))
		return
	}
	hostC, hostD := make([]float32, m*n), make([]float32, m*n)
	va, vb := cublas.RowMajorMatrix(dA, m, k), cublas.RowMajorMatrix(dB, k, n)
	vc, vd := cublas.RowMajorMatrix(dC, m, n), cublas.RowMajorMatrix(dD, m, n)
	g, err := graph.Capture(s2, graph.CaptureGlobal, func(cs *driver.Stream) error {
		if err := dC.MemsetFloat32Async(cs, 0); err != nil {
			return err
		}
		for i := range 49 {
			if err := cublas.Gemm(h2, 1, va, vb, 1, vc); err != nil {
				return fmt.Errorf("gemm %d: %w", i, err)
			}
		}
		if err := cublas.Gemm(h2, 1, va, vb, 1, vd); err != nil {
			return fmt.Errorf("gemm 49: %w", err)
		}
		if err := dC.CopyToHostAsync(cs, hostC); err != nil {
			return err
		}
		return dD.CopyToHostAsync(cs, hostD)
	})
	if err != nil {
		fail(what, "capture: %v", errors.Join(err, a.close(), h2.Close()))
		return
	}
	exe, err := g.Instantiate()
	if cerr := g.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fail(what, "instantiate: %v", errors.Join(err, a.close(), h2.Close()))
		return
	}
	defer exe.Close()
	if err := errors.Join(a.close(), h2.Close()); err != nil {
		fail(what, "closing buffers and handle: %v", err)
		return
	}
	// The handle is closed: a new call on it must be refused.
	func() {
		b := &arena{e: e}
		defer b.close()
		x := upload(b, make([]float32, 4))
		if b.err != nil {
			fail("Gemm on a closed handle", "%v", b.err)
			return
		}
		v := cublas.RowMajorMatrix(x, 2, 2)
		y := upload(b, make([]float32, 4))
		refused("Gemm on a closed Handle refused", cublas.Gemm(h2, 1, v, v, 0, cublas.RowMajorMatrix(y, 2, 2)), driver.ErrClosed)
	}()
	for i := range hostC {
		hostC[i], hostD[i] = float32(math.NaN()), float32(math.NaN())
	}
	for i := range 100 {
		if err := exe.Launch(e.s); err != nil {
			fail(what, "launch %d: %v", i, err)
			return
		}
	}
	if err := errors.Join(e.s.Synchronize(), exe.Err()); err != nil {
		fail(what, "%v", err)
		return
	}
	AB := matmul(A, B)
	wantC, wantD := make([]float32, m*n), make([]float32, m*n)
	for i, v := range AB.v {
		wantC[i], wantD[i] = 49*v, 100*v
	}
	if err := compare(hostC, wantC, 0); err != nil {
		fail(what, "C (49·A·B): %v", err)
		return
	}
	if err := compare(hostD, wantD, 0); err != nil {
		fail(what, "D (100·A·B): %v", err)
		return
	}
	ok(what + ": C = 49·A·B, D = 100·A·B")
}

// --- (9) misuse ---------------------------------------------------------
