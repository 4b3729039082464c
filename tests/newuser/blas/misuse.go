package main

// Misuse that must be refused, and one handle shared by goroutines.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

func misuse(e *env) {
	a := &arena{e: e}
	defer func() {
		if err := a.close(); err != nil {
			fail("misuse buffers", "%v", err)
		}
	}()
	const m, k, n = 5, 7, 3
	A, B := fill[float32](m, k, 18), fill[float32](k, n, 19)
	sentinel := make([]float32, m*n)
	for i := range sentinel {
		sentinel[i] = -5
	}
	dA, dB, dC := upload(a, A.v), upload(a, B.v), upload(a, sentinel)
	big := upload(a, make([]float32, 64))
	cA := upload(a, fill[complex64](k, m, 1).v)
	cB := upload(a, fill[complex64](k, n, 2).v)
	cC := upload(a, make([]complex64, m*n))
	if a.err != nil {
		fail("misuse buffers", "%v", a.err)
		return
	}
	va, vb, vc := cublas.RowMajorMatrix(dA, m, k), cublas.RowMajorMatrix(dB, k, n), cublas.RowMajorMatrix(dC, m, n)
	inv := driver.ErrInvalidArgument

	bad := cublas.Matrix[float32]{Buf: dA, Rows: m, Cols: k, LD: k - 1, Layout: cublas.RowMajor}
	refused("misuse: row-major A with LD = Cols−1 (ErrShape)", cublas.Gemm(e.h, 1, bad, vb, 0, vc), cublas.ErrShape, inv)
	past := va
	past.Offset = 1
	refused("misuse: A view at offset 1 of an exactly-sized buffer (ErrOutOfBounds)", cublas.Gemm(e.h, 1, past, vb, 0, vc), cublas.ErrOutOfBounds, inv)
	refused("misuse: Sub block running past the buffer (ErrOutOfBounds)", cublas.Gemm(e.h, 1, cublas.RowMajorMatrix(dA, 5, 7).Sub(3, 0, m, k), vb, 0, vc), cublas.ErrOutOfBounds, inv)
	refused("misuse: A 5×7 times B 6×3 (ErrShape)", cublas.Gemm(e.h, 1, va, cublas.RowMajorMatrix(dB, 6, 3), 0, vc), cublas.ErrShape, inv)
	refused("misuse: C with Op Trans (ErrShape)", cublas.Gemm(e.h, 1, va, vb, 0, cublas.RowMajorMatrix(dC, n, m).T()), cublas.ErrShape, inv)
	sq := cublas.RowMajorMatrix(dA, 5, 5)
	refused("misuse: C is A itself (ErrAlias)", cublas.Gemm(e.h, 1, sq, sq, 0, sq), cublas.ErrAlias, inv)
	s1, err1 := big.Slice(0, 25)
	s2, err2 := big.Slice(20, 45)
	if err := errors.Join(err1, err2); err != nil {
		fail("misuse: slices", "%v", err)
	} else {
		refused("misuse: C a Slice overlapping A's Slice of one allocation (ErrAlias)",
			cublas.Gemm(e.h, 1, cublas.RowMajorMatrix(s1, 5, 5), cublas.RowMajorMatrix(s1, 5, 5), 0, cublas.RowMajorMatrix(s2, 5, 5)), cublas.ErrAlias, inv)
		s1.Close()
		s2.Close()
	}
	refused("misuse: Axpy with y overlapping x, shifted by one (ErrAlias)",
		cublas.Axpy(e.h, 1, cublas.Vector[float32]{Buf: big, N: 10}, cublas.Vector[float32]{Buf: big, Offset: 1, N: 10}), cublas.ErrAlias, inv)
	refused("misuse: Dot of 5 and 6 elements (ErrShape)", func() error {
		_, err := cublas.Dot(e.h, cublas.Vector[float32]{Buf: big, N: 5}, cublas.Vector[float32]{Buf: big, Offset: 10, N: 6})
		return err
	}(), cublas.ErrShape, inv)
	refused("misuse: Nrm2 with increment −1 (docs: must be positive)", func() error {
		_, err := cublas.Nrm2(e.h, cublas.Vector[float32]{Buf: big, N: 5, Inc: -1})
		return err
	}(), inv)
	refused("misuse: complex64 Aᴴ row-major with col-major C (ErrShape)",
		cublas.Gemm(e.h, 1, cublas.RowMajorMatrix(cA, k, m).H(), cublas.ColMajorMatrix(cB, k, n), 0, cublas.ColMajorMatrix(cC, m, n)), cublas.ErrShape, inv)
	check("misuse: C unchanged after the refused calls (nothing queued)", func() error {
		got, err := dC.ToHost(e.s)
		if err != nil {
			return err
		}
		return compare(got, sentinel, 0)
	}())
	// A closed buffer.
	func() {
		b := &arena{e: e}
		defer b.close()
		dx := upload(b, A.v)
		if b.err != nil {
			fail("misuse: closed buffer", "%v", b.err)
			return
		}
		if err := dx.Close(); err != nil {
			fail("misuse: closed buffer", "Close: %v", err)
			return
		}
		refused("misuse: Gemm with a closed A buffer (driver.ErrClosed)", cublas.Gemm(e.h, 1, cublas.RowMajorMatrix(dx, m, k), vb, 0, vc), driver.ErrClosed)
	}()
	// Dot inside a capture: refused, the capture goes on, DotTo is captured.
	what := "misuse: Dot inside graph.Capture refused, DotTo in the same capture replays right"
	xs, ys := fill[float32](8, 1, 20).v, fill[float32](8, 1, 21).v
	dx, dy, dr := upload(a, xs), upload(a, ys), upload(a, []float32{-7})
	if a.err != nil {
		fail(what, "%v", a.err)
		return
	}
	var dotErr error
	g, err := graph.Capture(e.s, graph.CaptureGlobal, func(cs *driver.Stream) error {
		_, dotErr = cublas.Dot(e.h, cublas.VectorOf(dx), cublas.VectorOf(dy))
		return cublas.DotTo(e.h, cublas.VectorOf(dx), cublas.VectorOf(dy), cublas.VectorOf(dr))
	})
	if err != nil {
		fail(what, "capture failed (Dot error: %v): %v", dotErr, err)
		return
	}
	defer g.Close()
	refused("misuse: Dot inside a capture (driver.ErrStreamCaptureUnsupported, as for other waits)", dotErr, driver.ErrStreamCaptureUnsupported)
	check(what, func() error {
		exe, err := g.Instantiate()
		if err != nil {
			return err
		}
		defer exe.Close()
		if err := exe.Launch(e.s); err != nil {
			return err
		}
		got, err := dr.ToHost(e.s)
		if err != nil {
			return err
		}
		var want float32
		for i := range xs {
			want += xs[i] * ys[i]
		}
		return compare(got, []float32{want}, 0)
	}())
}

// --- (10) concurrency ---------------------------------------------------

func concurrent(e *env) error {
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for gi := range 4 {
		wg.Go(func() {
			errs[gi] = func() (err error) {
				m, k, n := 3+gi, 4+2*gi, 2+gi
				A, B := fill[float32](m, k, 40+gi), fill[float32](k, n, 50+gi)
				a := &arena{e: e}
				defer func() { err = errors.Join(err, a.close()) }()
				dA, dB, dC := upload(a, A.v), upload(a, B.v), upload(a, make([]float32, m*n))
				if a.err != nil {
					return a.err
				}
				AB := matmul(A, B)
				for it := range 25 {
					alpha := float32(it%5 + 1)
					if err := cublas.Gemm(e.h, alpha, cublas.RowMajorMatrix(dA, m, k), cublas.RowMajorMatrix(dB, k, n), 0, cublas.RowMajorMatrix(dC, m, n)); err != nil {
						return err
					}
					got, err := dC.ToHost(e.s)
					if err != nil {
						return err
					}
					want := make([]float32, m*n)
					for i, v := range AB.v {
						want[i] = alpha * v
					}
					if err := compare(got, want, 0); err != nil {
						return fmt.Errorf("goroutine %d, iteration %d: %w", gi, it, err)
					}
				}
				return nil
			}()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
