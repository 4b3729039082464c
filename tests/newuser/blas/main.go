// Command blas is a new user's test of package cublas, written from the
// README and go doc alone. It checks cuBLAS results against plain Go, one
// line per check ("ok  ..." or "FAIL ...: ..."), and exits 0 when every
// check passed, 1 when one failed, 2 when there is no GPU or no cuBLAS.
//
// Matrices hold small integers, so float32 results are exact: the stated
// tolerance is 0 unless a check says otherwise.
package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/cmplx"
	"os"
	"slices"
	"sync"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

func main() { os.Exit(run()) }

var failed int

func ok(what string) { fmt.Printf("ok  %s\n", what) }

func fail(what string, format string, args ...any) {
	failed++
	fmt.Printf("FAIL %s: %s\n", what, fmt.Sprintf(format, args...))
}

// check prints ok for a nil err and FAIL with err otherwise.
func check(what string, err error) {
	if err != nil {
		fail(what, "%v", err)
		return
	}
	ok(what)
}

// refused checks that err is an error matching every sentinel, and
// prints it.
func refused(what string, err error, sentinels ...error) {
	if err == nil {
		fail(what, "accepted, want an error")
		return
	}
	for _, s := range sentinels {
		if !errors.Is(err, s) {
			fail(what, "error does not match %q: %v", s, err)
			return
		}
	}
	ok(fmt.Sprintf("%s: %v", what, err))
}

type env struct {
	ctx *driver.Context
	s   *driver.Stream
	h   *cublas.Handle
}

func run() int {
	count, err := driver.DeviceCount()
	if err != nil {
		if errors.Is(err, driver.ErrNoGPU) {
			fmt.Fprintf(os.Stderr, "blas: no usable GPU: %v\n", err)
			return 2
		}
		fail("driver", "%v", err)
		return 1
	}
	if count == 0 {
		fmt.Fprintln(os.Stderr, "blas: no usable GPU: the driver reports no device")
		return 2
	}
	major, minor, patch, path, err := cublas.Version()
	if err != nil {
		if errors.Is(err, cublas.ErrNotSupported) {
			fmt.Fprintf(os.Stderr, "blas: no usable cuBLAS: %v\n", err)
			return 2
		}
		fail("cublas.Version", "%v", err)
		return 1
	}
	ok(fmt.Sprintf("cuBLAS %d.%d.%d loaded from %s", major, minor, patch, path))

	dev, err := driver.DeviceByOrdinal(0)
	if err != nil {
		fail("device 0", "%v", err)
		return 1
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		fail("primary context", "%v", err)
		return 1
	}
	defer ctx.Close()
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		fail("stream", "%v", err)
		return 1
	}
	defer s.Close()
	h, err := cublas.NewHandle(s, nil)
	if err != nil {
		if errors.Is(err, cublas.ErrNotSupported) {
			fmt.Fprintf(os.Stderr, "blas: no usable cuBLAS: %v\n", err)
			return 2
		}
		fail("NewHandle", "%v", err)
		return 1
	}
	defer h.Close()
	e := &env{ctx: ctx, s: s, h: h}

	const rm, cm = cublas.RowMajor, cublas.ColMajor
	const nt, tr, ct = cublas.NoTrans, cublas.Trans, cublas.ConjTrans

	// (1) row-major float32, as Go stores matrices.
	check("Gemm float32 row-major C = 2·A·B − C (5×7·7×3)", gemmCheck[float32](e, rm, rm, rm, nt, nt, 5, 7, 3))
	check("Gemm float32 row-major C = 2·Aᵀ·B − C (A stored 7×5, view .T())", gemmCheck[float32](e, rm, rm, rm, tr, nt, 5, 7, 3))
	check("Gemm float32 row-major C = 2·A·Bᵀ − C (B stored 3×7, view .T())", gemmCheck[float32](e, rm, rm, rm, nt, tr, 5, 7, 3))
	// (2) column-major, mixed layouts, sub-blocks.
	check("Gemm float32 col-major C = 2·A·B − C (5×7·7×3)", gemmCheck[float32](e, cm, cm, cm, nt, nt, 5, 7, 3))
	check("Gemm float32 col-major C = 2·Aᵀ·B − C", gemmCheck[float32](e, cm, cm, cm, tr, nt, 5, 7, 3))
	check("Gemm float32 mixed: row-major A, col-major B, col-major C", gemmCheck[float32](e, rm, cm, cm, nt, nt, 5, 7, 3))
	check("Gemm float32 mixed: col-major Aᵀ, row-major B, row-major C", gemmCheck[float32](e, cm, rm, rm, tr, nt, 5, 7, 3))
	check("Gemm float32 row-major Sub-block A of 9×11, into an explicit-LD block of 8×10 C, rest untouched", subCheck(e, rm))
	check("Gemm float32 col-major Sub-block A of 9×11, into an explicit-LD block of 8×10 C, rest untouched", subCheck(e, cm))
	// (3) float64 and complex64.
	check("Gemm float64 row-major C = 2·A·B − C", gemmCheck[float64](e, rm, rm, rm, nt, nt, 6, 4, 5))
	check("Gemm float64 col-major C = 2·Aᵀ·Bᵀ − C", gemmCheck[float64](e, cm, cm, cm, tr, tr, 6, 4, 5))
	check("Gemm complex64 row-major C = (2+i)·A·B − C", gemmCheck[complex64](e, rm, rm, rm, nt, nt, 4, 6, 3))
	check("Gemm complex64 row-major C = (2+i)·Aᵀ·B − C", gemmCheck[complex64](e, rm, rm, rm, tr, nt, 4, 6, 3))
	check("Gemm complex64 row-major C = (2+i)·Aᴴ·B − C (.H())", gemmCheck[complex64](e, rm, rm, rm, ct, nt, 4, 6, 3))
	check("Gemm complex64 col-major C = (2+i)·A·Bᴴ − C (.H())", gemmCheck[complex64](e, cm, cm, cm, nt, ct, 4, 6, 3))
	// (4) level 2 and level 1.
	level12(e)
	// (5) strided batches.
	check("GemmStridedBatched float32 row-major, 8 batches of 3×4·4×2, C stride padded by 2 (gaps untouched)", stridedCheck(e, false))
	check("GemmStridedBatched float32 row-major, 8 batches, strideB 0 (one B for all)", stridedCheck(e, true))
	// (6) mixed precision.
	check("GemmEx BFloat16 A·B → float32 C, Compute32F (row-major 6×8·8×5)", gemmExCheck(e))
	// (7) cuBLASLt.
	matmulPlan(e)
	// (8) capture into a graph, replay after closing everything.
	graphCheck(e)
	// (9) misuse.
	misuse(e)
	// (10) one handle, 4 goroutines.
	check("one Handle from 4 goroutines at once, 25 Gemms each with own matrices", concurrent(e))

	if failed > 0 {
		fmt.Printf("%d check(s) failed\n", failed)
		return 1
	}
	return 0
}

// --- host-side matrices -------------------------------------------------

type num interface {
	float32 | float64 | complex64 | complex128
}

// mk is re (+ im·i for complex T) as a T.
func mk[T num](re, im float64) T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(re)
	case *float64:
		*p = re
	case *complex64:
		*p = complex64(complex(re, im))
	case *complex128:
		*p = complex(re, im)
	}
	return z
}

func toC[T num](x T) complex128 {
	switch v := any(x).(type) {
	case float32:
		return complex(float64(v), 0)
	case float64:
		return complex(v, 0)
	case complex64:
		return complex128(v)
	case complex128:
		return v
	}
	return 0
}

func conj[T num](x T) T {
	switch v := any(x).(type) {
	case complex64:
		return any(complex(real(v), -imag(v))).(T)
	case complex128:
		return any(cmplx.Conj(v)).(T)
	}
	return x
}

// hm is an r×c matrix, its values row by row.
type hm[T num] struct {
	r, c int
	v    []T
}

func (m hm[T]) at(i, j int) T { return m.v[i*m.c+j] }

// fill is an r×c matrix of small integers (−3…3, imaginary parts −2…2).
func fill[T num](r, c, seed int) hm[T] {
	m := hm[T]{r, c, make([]T, r*c)}
	for i := range r {
		for j := range c {
			m.v[i*c+j] = mk[T](float64((i*7+j*3+seed*5)%7-3), float64((i*3+j*5+seed)%5-2))
		}
	}
	return m
}

// stored is m as a packed buffer of layout l.
func (m hm[T]) stored(l cublas.Layout) []T {
	if l == cublas.RowMajor {
		return slices.Clone(m.v)
	}
	out := make([]T, len(m.v))
	for i := range m.r {
		for j := range m.c {
			out[i+j*m.r] = m.at(i, j)
		}
	}
	return out
}

// op is op(m).
func (m hm[T]) op(o cublas.Op) hm[T] {
	if o == cublas.NoTrans {
		return m
	}
	t := hm[T]{m.c, m.r, make([]T, len(m.v))}
	for i := range m.r {
		for j := range m.c {
			x := m.at(i, j)
			if o == cublas.ConjTrans {
				x = conj(x)
			}
			t.v[j*m.r+i] = x
		}
	}
	return t
}

func matmul[T num](a, b hm[T]) hm[T] {
	c := hm[T]{a.r, b.c, make([]T, a.r*b.c)}
	for i := range a.r {
		for j := range b.c {
			var s T
			for l := range a.c {
				s += a.at(i, l) * b.at(l, j)
			}
			c.v[i*b.c+j] = s
		}
	}
	return c
}

// compare checks got against want element by element: |got−want| ≤
// tol·max(1, |want|); NaN fails.
func compare[T num](got, want []T, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	for i := range want {
		w := toC(want[i])
		d := cmplx.Abs(toC(got[i]) - w)
		if !(d <= tol*math.Max(1, cmplx.Abs(w))) {
			return fmt.Errorf("element %d is %v, want %v (tolerance %g)", i, got[i], want[i], tol)
		}
	}
	return nil
}

// --- device buffers -----------------------------------------------------

// arena allocates buffers for one check, keeps the first error and closes
// them all at the end.
type arena struct {
	e   *env
	err error
	cl  []io.Closer
}

func (a *arena) close() error {
	var err error
	for i := len(a.cl) - 1; i >= 0; i-- {
		err = errors.Join(err, a.cl[i].Close())
	}
	return errors.Join(a.err, err)
}

func upload[T any](a *arena, v []T) *driver.Buffer[T] {
	if a.err != nil {
		return nil
	}
	b, err := driver.AllocCopy(a.e.s, v)
	if err != nil {
		a.err = err
		return nil
	}
	a.cl = append(a.cl, b)
	return b
}

func view[T cublas.Element](b *driver.Buffer[T], r, c int, l cublas.Layout) cublas.Matrix[T] {
	if l == cublas.RowMajor {
		return cublas.RowMajorMatrix(b, r, c)
	}
	return cublas.ColMajorMatrix(b, r, c)
}

func withOp[T cublas.Element](m cublas.Matrix[T], o cublas.Op) cublas.Matrix[T] {
	switch o {
	case cublas.Trans:
		return m.T()
	case cublas.ConjTrans:
		return m.H()
	}
	return m
}

// --- (1)-(3) Gemm -------------------------------------------------------

// gemmCheck computes C = alpha·op(A)·op(B) + beta·C for an m×k op(A) and a
// k×n op(B) stored in the layouts given, with alpha 2 (2+i for complex)
// and beta −1, and compares C with plain Go exactly.
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
