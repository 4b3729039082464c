package main

// Level-1 and level-2 checks, with host and device results.

import (
	"fmt"

	"github.com/purecuda/cuda/cublas"
)

func level12(e *env) {
	a := &arena{e: e}
	defer func() {
		if err := a.close(); err != nil {
			fail("level 1/2 buffers", "%v", err)
		}
	}()
	A := fill[float32](5, 4, 6)
	x4, y5 := fill[float32](4, 1, 7).v, fill[float32](5, 1, 8).v
	dA, dx4, dy5 := upload(a, A.v), upload(a, x4), upload(a, y5)
	x5, y4 := fill[float32](5, 1, 9).v, fill[float32](4, 1, 10).v
	dx5, dy4 := upload(a, x5), upload(a, y4)
	if a.err != nil {
		fail("level 1/2 buffers", "%v", a.err)
		return
	}
	vA := cublas.RowMajorMatrix(dA, 5, 4)

	// Gemv y = 2·A·x − y, then y' = 2·Aᵀ·x' − y'.
	check("Gemv float32 row-major y = 2·A·x − y (5×4)", func() error {
		if err := cublas.Gemv(e.h, 2, vA, cublas.VectorOf(dx4), -1, cublas.VectorOf(dy5)); err != nil {
			return err
		}
		got, err := dy5.ToHost(e.s)
		if err != nil {
			return err
		}
		want := make([]float32, 5)
		for i := range 5 {
			var s float32
			for j := range 4 {
				s += A.at(i, j) * x4[j]
			}
			want[i] = 2*s - y5[i]
		}
		return compare(got, want, 0)
	}())
	check("Gemv float32 row-major y = 2·Aᵀ·x − y (.T())", func() error {
		if err := cublas.Gemv(e.h, 2, vA.T(), cublas.VectorOf(dx5), -1, cublas.VectorOf(dy4)); err != nil {
			return err
		}
		got, err := dy4.ToHost(e.s)
		if err != nil {
			return err
		}
		want := make([]float32, 4)
		for j := range 4 {
			var s float32
			for i := range 5 {
				s += A.at(i, j) * x5[i]
			}
			want[j] = 2*s - y4[j]
		}
		return compare(got, want, 0)
	}())

	xs := []float32{1, -2, 3, -9, 9, 4, 0, 2, -1, 5}
	ys := []float32{2, 1, -1, 3, 2, -2, 4, 1, 1, -3}
	dx, dy := upload(a, xs), upload(a, ys)
	dr := upload(a, []float32{-7})
	dn := upload(a, []float32{3, 0, 4, 0, 12})
	di := upload(a, []int32{-1})
	if a.err != nil {
		fail("level 1 buffers", "%v", a.err)
		return
	}
	vx, vy := cublas.VectorOf(dx), cublas.VectorOf(dy)
	var dot float32
	for i := range xs {
		dot += xs[i] * ys[i]
	}

	check("Axpy float32 y = 3·x + y (10 elements)", func() error {
		dy2 := upload(a, ys)
		if a.err != nil {
			return a.err
		}
		if err := cublas.Axpy(e.h, 3, vx, cublas.VectorOf(dy2)); err != nil {
			return err
		}
		got, err := dy2.ToHost(e.s)
		if err != nil {
			return err
		}
		want := make([]float32, len(ys))
		for i := range ys {
			want[i] = 3*xs[i] + ys[i]
		}
		return compare(got, want, 0)
	}())
	check("Dot float32 (host result) = Σ x·y", func() error {
		got, err := cublas.Dot(e.h, vx, vy)
		if err != nil {
			return err
		}
		return compare([]float32{got}, []float32{dot}, 0)
	}())
	check("Dot float32 with x offset 1 inc 2, y inc −1 (runs from the end)", func() error {
		x := cublas.Vector[float32]{Buf: dx, Offset: 1, N: 4, Inc: 2}
		y := cublas.Vector[float32]{Buf: dy, Offset: 0, N: 4, Inc: -1}
		got, err := cublas.Dot(e.h, x, y)
		if err != nil {
			return err
		}
		var want float32
		for k := range 4 {
			want += xs[1+2*k] * ys[4-1-k]
		}
		return compare([]float32{got}, []float32{want}, 0)
	}())
	check("DotTo float32 (device result in a 1-element buffer)", func() error {
		if err := cublas.DotTo(e.h, vx, vy, cublas.VectorOf(dr)); err != nil {
			return err
		}
		got, err := dr.ToHost(e.s)
		if err != nil {
			return err
		}
		return compare(got, []float32{dot}, 0)
	}())
	check("Nrm2 float32 of (3,0,4,0,12) = 13 (relative tolerance 1e-6)", func() error {
		got, err := cublas.Nrm2(e.h, cublas.VectorOf(dn))
		if err != nil {
			return err
		}
		return compare([]float64{got}, []float64{13}, 1e-6)
	}())
	check("Nrm2To float32 to device = 13 (relative tolerance 1e-6)", func() error {
		if err := cublas.Nrm2To(e.h, cublas.VectorOf(dn), cublas.VectorOf(dr)); err != nil {
			return err
		}
		got, err := dr.ToHost(e.s)
		if err != nil {
			return err
		}
		return compare(got, []float32{13}, 1e-6)
	}())
	// xs has |−9| at 3 and |9| at 4: the first, 3, counting from 0.
	check("Iamax float32 = 3 (first of two largest |x|, counting from 0 as documented)", func() error {
		got, err := cublas.Iamax(e.h, vx)
		if err != nil {
			return err
		}
		if got != 3 {
			return fmt.Errorf("got %d, want 3", got)
		}
		return nil
	}())
	check("IamaxTo float32 = 4 (counting from 1, as documented for the To form)", func() error {
		if err := cublas.IamaxTo(e.h, vx, cublas.VectorOf(di)); err != nil {
			return err
		}
		got, err := di.ToHost(e.s)
		if err != nil {
			return err
		}
		if got[0] != 4 {
			return fmt.Errorf("got %d, want 4", got[0])
		}
		return nil
	}())
	check("Iamax of an empty vector = −1", func() error {
		got, err := cublas.Iamax(e.h, cublas.Vector[float32]{Buf: dx, N: 0})
		if err != nil {
			return err
		}
		if got != -1 {
			return fmt.Errorf("got %d, want -1", got)
		}
		return nil
	}())
}

// --- (5) strided batches ------------------------------------------------
