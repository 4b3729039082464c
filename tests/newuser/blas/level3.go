package main

// Level-3 checks: Gemm in every layout and operation, Sub blocks, strided batches, GemmEx.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/purecuda/cuda/cublas"
)

func gemmCheck[T num](e *env, la, lb, lc cublas.Layout, oa, ob cublas.Op, m, k, n int) (err error) {
	ar, ac := m, k
	if oa != cublas.NoTrans {
		ar, ac = k, m
	}
	br, bc := k, n
	if ob != cublas.NoTrans {
		br, bc = n, k
	}
	A, B, C0 := fill[T](ar, ac, 1), fill[T](br, bc, 2), fill[T](m, n, 3)
	a := &arena{e: e}
	defer func() { err = errors.Join(err, a.close()) }()
	dA, dB, dC := upload(a, A.stored(la)), upload(a, B.stored(lb)), upload(a, C0.stored(lc))
	if a.err != nil {
		return a.err
	}
	alpha, beta := mk[T](2, 1), mk[T](-1, 0)
	if err := cublas.Gemm(e.h, alpha, withOp(view(dA, ar, ac, la), oa), withOp(view(dB, br, bc, lb), ob), beta, view(dC, m, n, lc)); err != nil {
		return err
	}
	got, err := dC.ToHost(e.s)
	if err != nil {
		return err
	}
	want := matmul(A.op(oa), B.op(ob))
	for i := range want.v {
		want.v[i] = alpha*want.v[i] + beta*C0.v[i]
	}
	return compare(got, want.stored(lc), 0)
}

// subCheck multiplies the 4×5 block at (2, 3) of a 9×11 matrix (Sub) by a
// packed 5×3 B into the 4×3 block at (1, 4) of an 8×10 C given as a
// Matrix literal with an explicit LD; the rest of C must keep its −5s.
func subCheck(e *env, l cublas.Layout) (err error) {
	big, B := fill[float32](9, 11, 4), fill[float32](5, 3, 5)
	Cbig := hm[float32]{8, 10, make([]float32, 80)}
	for i := range Cbig.v {
		Cbig.v[i] = -5
	}
	a := &arena{e: e}
	defer func() { err = errors.Join(err, a.close()) }()
	dBig, dB, dC := upload(a, big.stored(l)), upload(a, B.stored(l)), upload(a, Cbig.stored(l))
	if a.err != nil {
		return a.err
	}
	ld, off := 10, 1*10+4 // row-major: element (i, j) at i*LD + j
	if l == cublas.ColMajor {
		ld, off = 8, 1+4*8 // column-major: i + j*LD
	}
	c := cublas.Matrix[float32]{Buf: dC, Offset: off, Rows: 4, Cols: 3, LD: ld, Layout: l}
	if err := cublas.Gemm(e.h, 1, view(dBig, 9, 11, l).Sub(2, 3, 4, 5), view(dB, 5, 3, l), 0, c); err != nil {
		return err
	}
	got, err := dC.ToHost(e.s)
	if err != nil {
		return err
	}
	blk := hm[float32]{4, 5, make([]float32, 20)}
	for i := range 4 {
		for j := range 5 {
			blk.v[i*5+j] = big.at(2+i, 3+j)
		}
	}
	p := matmul(blk, B)
	for i := range 4 {
		for j := range 3 {
			Cbig.v[(1+i)*10+4+j] = p.at(i, j)
		}
	}
	return compare(got, Cbig.stored(l), 0)
}

// --- (4) level 2 and level 1 --------------------------------------------

func stridedCheck(e *env, sharedB bool) (err error) {
	const m, k, n, count = 3, 4, 2, 8
	const sa, pad = m * k, 2
	sb, sc := k*n, m*n+pad
	nb := count
	if sharedB {
		sb, nb = 0, 1
	}
	As := make([]hm[float32], count)
	Bs := make([]hm[float32], nb)
	var hA, hB []float32
	for i := range count {
		As[i] = fill[float32](m, k, 11+i)
		hA = append(hA, As[i].v...)
	}
	for i := range nb {
		Bs[i] = fill[float32](k, n, 31+i)
		hB = append(hB, Bs[i].v...)
	}
	hC := make([]float32, sc*count)
	for i := range hC {
		hC[i] = -5
	}
	a := &arena{e: e}
	defer func() { err = errors.Join(err, a.close()) }()
	dA, dB, dC := upload(a, hA), upload(a, hB), upload(a, hC)
	if a.err != nil {
		return a.err
	}
	if err := cublas.GemmStridedBatched(e.h, 1, cublas.RowMajorMatrix(dA, m, k), sa,
		cublas.RowMajorMatrix(dB, k, n), sb, 0, cublas.RowMajorMatrix(dC, m, n), sc, count); err != nil {
		return err
	}
	got, err := dC.ToHost(e.s)
	if err != nil {
		return err
	}
	want := slices.Clone(hC)
	for i := range count {
		p := matmul(As[i], Bs[min(i, nb-1)])
		copy(want[i*sc:], p.v)
	}
	return compare(got, want, 0)
}

// --- (6) GemmEx ---------------------------------------------------------

func gemmExCheck(e *env) (err error) {
	const m, k, n = 6, 8, 5
	A, B := fill[float32](m, k, 12), fill[float32](k, n, 13)
	toBF := func(v []float32) ([]cublas.BFloat16, error) {
		out := make([]cublas.BFloat16, len(v))
		for i, f := range v {
			out[i] = cublas.BFloat16Of(f)
			if out[i].Float32() != f {
				return nil, fmt.Errorf("BFloat16Of(%v).Float32() = %v", f, out[i].Float32())
			}
		}
		return out, nil
	}
	bA, err := toBF(A.v)
	if err != nil {
		return err
	}
	bB, err := toBF(B.v)
	if err != nil {
		return err
	}
	a := &arena{e: e}
	defer func() { err = errors.Join(err, a.close()) }()
	dA, dB, dC := upload(a, bA), upload(a, bB), upload(a, make([]float32, m*n))
	if a.err != nil {
		return a.err
	}
	if err := cublas.GemmEx(e.h, 1, cublas.RowMajorMatrix(dA, m, k), cublas.RowMajorMatrix(dB, k, n),
		0, cublas.RowMajorMatrix(dC, m, n), cublas.Compute32F); err != nil {
		return err
	}
	got, err := dC.ToHost(e.s)
	if err != nil {
		return err
	}
	return compare(got, matmul(A, B).v, 0)
}

// --- (7) MatmulPlan -----------------------------------------------------
