//go:build linux

package cublas_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// The refusals of views: every dimension, leading dimension, offset,
// increment, stride and batch count that would reach past a buffer, every
// shape that does not agree, every overlapping output, nil, closed and
// foreign buffers, for every routine. Each is refused with the routine and
// the operand named, and no cuBLAS function is called: a failure armed in
// fakecublas for its next call of any function is still armed afterwards.

// vkit is what the validation tests need: a fake device, a closed buffer
// and buffers of another context, of every size asked.
type vkit struct {
	*fenv
	other *driver.Context
	probe cublas.Vector[float32]
}

func newKit(t *testing.T) *vkit {
	t.Helper()
	e := newEnv(t)
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	other, err := dev.NewContext(0)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, other.Close()) })
	return &vkit{fenv: e, other: other, probe: cublas.VectorOf(up(t, e.s, []float32{1, 2}))}
}

// closed is a closed buffer of n elements.
func (k *vkit) closed(t *testing.T, n int) *driver.Buffer[float32] {
	return closedBuf[float32](t, k, n)
}

// foreign is a buffer of n elements of another context.
func (k *vkit) foreign(t *testing.T, n int) *driver.Buffer[float32] {
	return foreignBuf[float32](t, k, n)
}

// closedBuf is a closed buffer of n Ts.
func closedBuf[T any](t *testing.T, k *vkit, n int) *driver.Buffer[T] {
	t.Helper()
	b, err := driver.Alloc[T](k.ctx, n)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	return b
}

// foreignBuf is a buffer of n Ts of another context, closed when t ends.
func foreignBuf[T any](t *testing.T, k *vkit, n int) *driver.Buffer[T] {
	t.Helper()
	b, err := driver.Alloc[T](k.other, n)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// refused checks that f is refused as the case says (kind: ErrShape,
// ErrOutOfBounds, ErrAlias, driver.ErrClosed, or nil for a plain
// driver.ErrInvalidArgument; the message starting with where) with no
// cuBLAS function called and nothing run.
func (k *vkit) refused(t *testing.T, name string, kind error, where string, f func() error) {
	t.Helper()
	require.NoError(t, k.s.Synchronize())
	before := opsRun(t)
	faketest.CUBLASFailNext(t, "", 14) // CUBLAS_STATUS_INTERNAL_ERROR for the next call of any function
	var err error
	assert.NotPanics(t, func() { err = f() }, name)
	if assert.Error(t, err, name) {
		if kind != nil {
			assert.ErrorIs(t, err, kind, name)
		}
		if kind != driver.ErrClosed {
			assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		}
		assert.Contains(t, err.Error(), where, name)
	}
	require.NoError(t, k.s.Synchronize())
	assert.Equal(t, before, opsRun(t), "%s: something ran", name)
	// The armed failure is still there: no cuBLAS function was called.
	assert.ErrorIs(t, cublas.Scal(k.h, 1, k.probe), cublas.StatusInternalError, "%s: cuBLAS was called", name)
	faketest.CUBLAS(t, "fake_cublas_fail_next_clear")
}

// matrixCases are the refusals of a matrix operand m (exactly filling its
// buffer) of routine fn named name, made by apply.
func (k *vkit) matrixCases(t *testing.T, fn, name string, m cublas.Matrix[float32], apply func(cublas.Matrix[float32]) error) {
	t.Helper()
	where := "cublas: " + fn + ": " + name + ":"
	stored := m.Rows
	if m.Layout == cublas.RowMajor {
		stored = m.Cols
	}
	cases := []struct {
		what string
		f    func(*cublas.Matrix[float32])
		kind error
	}{
		{"negative rows", func(m *cublas.Matrix[float32]) { m.Rows = -1 }, cublas.ErrShape},
		{"negative cols", func(m *cublas.Matrix[float32]) { m.Cols = -1 }, cublas.ErrShape},
		{"leading dimension below the stored rows", func(m *cublas.Matrix[float32]) { m.LD = stored - 1 }, cublas.ErrShape},
		{"negative leading dimension", func(m *cublas.Matrix[float32]) { m.LD = -4 }, cublas.ErrShape},
		{"unknown layout", func(m *cublas.Matrix[float32]) { m.Layout = 2 }, cublas.ErrShape},
		{"unknown operation", func(m *cublas.Matrix[float32]) { m.Op = 3 }, cublas.ErrShape},
		{"negative offset", func(m *cublas.Matrix[float32]) { m.Offset = -1 }, cublas.ErrOutOfBounds},
		{"offset one past", func(m *cublas.Matrix[float32]) { m.Offset++ }, cublas.ErrOutOfBounds},
		{"huge offset", func(m *cublas.Matrix[float32]) { m.Offset = math.MaxInt64 }, cublas.ErrOutOfBounds},
		{"leading dimension one more", func(m *cublas.Matrix[float32]) { m.LD = stored + 1 }, cublas.ErrOutOfBounds},
		{"huge leading dimension", func(m *cublas.Matrix[float32]) { m.LD = math.MaxInt64 / 2 }, cublas.ErrOutOfBounds},
		{"one more row", func(m *cublas.Matrix[float32]) { m.Rows++; m.LD = 0 }, cublas.ErrOutOfBounds},
		{"one more column", func(m *cublas.Matrix[float32]) { m.Cols++; m.LD = 0 }, cublas.ErrOutOfBounds},
		{"huge rows", func(m *cublas.Matrix[float32]) { m.Rows = math.MaxInt64; m.LD = 0 }, cublas.ErrOutOfBounds},
		{"nil buffer", func(m *cublas.Matrix[float32]) { m.Buf = nil }, nil},
		{"closed buffer", func(m *cublas.Matrix[float32]) { m.Buf = k.closed(t, m.Buf.Len()) }, driver.ErrClosed},
		{"buffer of another context", func(m *cublas.Matrix[float32]) { m.Buf = k.foreign(t, m.Buf.Len()) }, nil},
	}
	for _, c := range cases {
		bad := m
		c.f(&bad)
		k.refused(t, fmt.Sprintf("%s: %s: %s", fn, name, c.what), c.kind, where, func() error { return apply(bad) })
	}
}

// vectorCases are the refusals of a vector operand v (exactly filling its
// buffer, increment 1) of routine fn; positive: fn needs a positive
// increment.
func (k *vkit) vectorCases(t *testing.T, fn, name string, v cublas.Vector[float32], positive bool, apply func(cublas.Vector[float32]) error) {
	t.Helper()
	vectorCasesOf(t, k, fn, name, v, positive, apply)
}

// vectorCasesOf is vectorCases for vectors of any element type.
func vectorCasesOf[T cublas.Element](t *testing.T, k *vkit, fn, name string, v cublas.Vector[T], positive bool, apply func(cublas.Vector[T]) error) {
	t.Helper()
	where := "cublas: " + fn + ": " + name + ":"
	negInc := cublas.ErrOutOfBounds
	if positive {
		negInc = cublas.ErrShape
	}
	cases := []struct {
		what string
		f    func(*cublas.Vector[T])
		kind error
	}{
		{"negative length", func(v *cublas.Vector[T]) { v.N = -1 }, cublas.ErrShape},
		{"negative offset", func(v *cublas.Vector[T]) { v.Offset = -1 }, cublas.ErrOutOfBounds},
		{"offset one past", func(v *cublas.Vector[T]) { v.Offset++ }, cublas.ErrOutOfBounds},
		{"huge offset", func(v *cublas.Vector[T]) { v.Offset = math.MaxInt64 }, cublas.ErrOutOfBounds},
		{"one more element", func(v *cublas.Vector[T]) { v.N++ }, cublas.ErrOutOfBounds},
		{"increment 2", func(v *cublas.Vector[T]) { v.Inc = 2 }, cublas.ErrOutOfBounds},
		{"increment -2", func(v *cublas.Vector[T]) { v.Inc = -2 }, negInc},
		{"huge increment", func(v *cublas.Vector[T]) { v.Inc = math.MaxInt64 }, cublas.ErrOutOfBounds},
		{"smallest increment", func(v *cublas.Vector[T]) { v.Inc = math.MinInt64 }, negInc},
		{"huge length", func(v *cublas.Vector[T]) { v.N = math.MaxInt64 }, cublas.ErrOutOfBounds},
		{"nil buffer", func(v *cublas.Vector[T]) { v.Buf = nil }, nil},
		{"closed buffer", func(v *cublas.Vector[T]) { v.Buf = closedBuf[T](t, k, v.Buf.Len()) }, driver.ErrClosed},
		{"buffer of another context", func(v *cublas.Vector[T]) { v.Buf = foreignBuf[T](t, k, v.Buf.Len()) }, nil},
	}
	for _, c := range cases {
		bad := v
		c.f(&bad)
		if v.N == 1 { // a result: one element, whatever its increment
			switch c.what {
			case "increment 2", "increment -2", "huge increment", "smallest increment":
				continue
			case "one more element", "huge length":
				c.kind = cublas.ErrShape
			}
		}
		k.refused(t, fmt.Sprintf("%s: %s: %s", fn, name, c.what), c.kind, where, func() error { return apply(bad) })
	}
}

// mat is a packed rows×cols matrix of a buffer of exactly its size.
func (k *vkit) mat(t *testing.T, rows, cols int, l cublas.Layout) cublas.Matrix[float32] {
	return cublas.Matrix[float32]{Buf: up(t, k.s, data[float32](rows*cols, rows+cols)), Rows: rows, Cols: cols, Layout: l}
}

// vecOf is an n-vector of a buffer of exactly its size.
func (k *vkit) vecOf(t *testing.T, n int) cublas.Vector[float32] {
	return cublas.VectorOf(up(t, k.s, data[float32](n, n)))
}

// TestLevel3RefusalsFromFake: Gemm, GemmEx, GemmStridedBatched(Ex), Syrk,
// Symm, Trsm and Trmm refuse every bad view before cuBLAS.
func TestLevel3RefusalsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	k := newKit(t)
	h := k.h
	for _, l := range layouts {
		A, B, C := k.mat(t, 3, 4, l), k.mat(t, 4, 5, l), k.mat(t, 3, 5, l)
		gemm := func(a, b, c cublas.Matrix[float32]) error { return cublas.Gemm(h, 1, a, b, 0, c) }
		gemmEx := func(a, b, c cublas.Matrix[float32]) error { return cublas.GemmEx(h, 1, a, b, 0, c, cublas.Compute32F) }
		for fn, g := range map[string]func(a, b, c cublas.Matrix[float32]) error{"Gemm": gemm, "GemmEx": gemmEx} {
			k.matrixCases(t, fn, "A", A, func(m cublas.Matrix[float32]) error { return g(m, B, C) })
			k.matrixCases(t, fn, "B", B, func(m cublas.Matrix[float32]) error { return g(A, m, C) })
			k.matrixCases(t, fn, "C", C, func(m cublas.Matrix[float32]) error { return g(A, B, m) })
			k.refused(t, fn+": k", cublas.ErrShape, "cublas: "+fn+": B:", func() error { return g(A, k.mat(t, 3, 5, l), C) })
			k.refused(t, fn+": m", cublas.ErrShape, "cublas: "+fn+": C:", func() error { return g(A, B, k.mat(t, 2, 5, l)) })
			k.refused(t, fn+": n", cublas.ErrShape, "cublas: "+fn+": C:", func() error { return g(A, B, k.mat(t, 3, 4, l)) })
			k.refused(t, fn+": C transposed", cublas.ErrShape, "cublas: "+fn+": C:", func() error { return g(A, B, k.mat(t, 5, 3, l).T()) })
			big := up(t, k.s, make([]float32, 40))
			k.refused(t, fn+": C over A", cublas.ErrAlias, "cublas: "+fn+": C:", func() error {
				return g(cublas.Matrix[float32]{Buf: big, Rows: 3, Cols: 4, Layout: l}, B, cublas.Matrix[float32]{Buf: big, Offset: 11, Rows: 3, Cols: 5, Layout: l})
			})
			k.refused(t, fn+": C over B", cublas.ErrAlias, "cublas: "+fn+": C:", func() error {
				return g(A, cublas.Matrix[float32]{Buf: big, Offset: 10, Rows: 4, Cols: 5, Layout: l}, cublas.Matrix[float32]{Buf: big, Rows: 3, Cols: 5, Layout: l})
			})
			k.refused(t, fn+": C is A", cublas.ErrAlias, "cublas: "+fn+": C:", func() error {
				sq := k.mat(t, 3, 3, l)
				return g(sq, sq, sq)
			})
		}
		k.refused(t, "GemmEx: unknown compute type", nil, "cublas: GemmEx: unknown compute type", func() error { return cublas.GemmEx(h, 1, A, B, 0, C, 99) })
		z := cublas.Matrix[complex64]{Buf: up(t, k.s, make([]complex64, 20)), Rows: 3, Cols: 5}
		k.refused(t, "GemmEx: complex", nil, "cublas: GemmEx: complex", func() error { return cublas.GemmEx(h, 1, A, B, 0, z, cublas.Compute32F) })

		// Strided batches: three of each, packed one after the other.
		const count = 3
		SA, SB, SC := k.mat(t, 3, 4*count, l), k.mat(t, 4, 5*count, l), k.mat(t, 3, 5*count, l)
		SA.Cols, SB.Cols, SC.Cols = 4, 5, 5
		if l == cublas.RowMajor { // the batches are packed: the leading dimensions are one matrix's
			SA.LD, SB.LD, SC.LD = 0, 0, 0
		}
		SA.Buf, SB.Buf, SC.Buf = up(t, k.s, make([]float32, 12*count)), up(t, k.s, make([]float32, 20*count)), up(t, k.s, make([]float32, 15*count))
		strided := map[string]func(a cublas.Matrix[float32], sa int, b cublas.Matrix[float32], sb int, c cublas.Matrix[float32], sc, n int) error{
			"GemmStridedBatched": func(a cublas.Matrix[float32], sa int, b cublas.Matrix[float32], sb int, c cublas.Matrix[float32], sc, n int) error {
				return cublas.GemmStridedBatched(h, 1, a, sa, b, sb, 0, c, sc, n)
			},
			"GemmStridedBatchedEx": func(a cublas.Matrix[float32], sa int, b cublas.Matrix[float32], sb int, c cublas.Matrix[float32], sc, n int) error {
				return cublas.GemmStridedBatchedEx(h, 1, a, sa, b, sb, 0, c, sc, n, cublas.Compute32F)
			},
		}
		for fn, g := range strided {
			require.NoError(t, g(SA, 12, SB, 20, SC, 15, count), "%s: the valid call", fn)
			w := "cublas: " + fn + ":"
			k.refused(t, fn+": negative count", cublas.ErrShape, w+" batch count", func() error { return g(SA, 12, SB, 20, SC, 15, -1) })
			k.refused(t, fn+": one batch more", cublas.ErrOutOfBounds, w+" A:", func() error { return g(SA, 12, SB, 20, SC, 15, count+1) })
			k.refused(t, fn+": huge count", cublas.ErrOutOfBounds, w+" A:", func() error { return g(SA, 12, SB, 20, SC, 15, math.MaxInt32+1) })
			k.refused(t, fn+": A's stride", cublas.ErrOutOfBounds, w+" A:", func() error { return g(SA, 13, SB, 20, SC, 15, count) })
			k.refused(t, fn+": B's stride", cublas.ErrOutOfBounds, w+" B:", func() error { return g(SA, 12, SB, 21, SC, 15, count) })
			k.refused(t, fn+": C's stride", cublas.ErrOutOfBounds, w+" C:", func() error { return g(SA, 12, SB, 20, SC, 16, count) })
			k.refused(t, fn+": huge stride", cublas.ErrOutOfBounds, w+" B:", func() error { return g(SA, 12, SB, math.MaxInt64/2, SC, 15, count) })
			k.refused(t, fn+": negative stride of A", cublas.ErrShape, w+" A:", func() error { return g(SA, -12, SB, 20, SC, 15, count) })
			k.refused(t, fn+": negative stride of B", cublas.ErrShape, w+" B:", func() error { return g(SA, 12, SB, -1, SC, 15, count) })
			k.refused(t, fn+": negative stride of C", cublas.ErrShape, w+" C:", func() error { return g(SA, 12, SB, 20, SC, -15, count) })
			k.refused(t, fn+": C's batches overlap", cublas.ErrAlias, w+" C:", func() error { return g(SA, 12, SB, 20, SC, 14, count) })
			k.refused(t, fn+": C's batches are one", cublas.ErrAlias, w+" C:", func() error { return g(SA, 12, SB, 20, SC, 0, count) })
			k.matrixCases(t, fn, "A", A, func(m cublas.Matrix[float32]) error { return g(m, 0, B, 0, C, 0, 1) })
			k.matrixCases(t, fn, "B", B, func(m cublas.Matrix[float32]) error { return g(A, 0, m, 0, C, 0, 1) })
			k.matrixCases(t, fn, "C", C, func(m cublas.Matrix[float32]) error { return g(A, 0, B, 0, m, 0, 1) })
		}

		// Syrk: C n×n, op(A) n×k.
		SyA, SyC := k.mat(t, 3, 2, l), k.mat(t, 3, 3, l)
		syrk := func(u cublas.Uplo, a, c cublas.Matrix[float32]) error { return cublas.Syrk(h, u, 1, a, 0, c) }
		k.matrixCases(t, "Syrk", "A", SyA, func(m cublas.Matrix[float32]) error { return syrk(cublas.Lower, m, SyC) })
		k.matrixCases(t, "Syrk", "C", SyC, func(m cublas.Matrix[float32]) error { return syrk(cublas.Lower, SyA, m) })
		k.refused(t, "Syrk: uplo", cublas.ErrShape, "cublas: Syrk:", func() error { return syrk(7, SyA, SyC) })
		k.refused(t, "Syrk: C not square", cublas.ErrShape, "cublas: Syrk: C:", func() error { return syrk(cublas.Upper, SyA, k.mat(t, 3, 2, l)) })
		k.refused(t, "Syrk: n", cublas.ErrShape, "cublas: Syrk:", func() error { return syrk(cublas.Upper, SyA.T(), SyC) })
		k.refused(t, "Syrk: C is A", cublas.ErrAlias, "cublas: Syrk: C:", func() error { return syrk(cublas.Upper, SyC, SyC) })

		// Trsm, Trmm, Symm: A 3×3 (Left) for B, C 3×2.
		TA, TB, TC := k.mat(t, 3, 3, l), k.mat(t, 3, 2, l), k.mat(t, 3, 2, l)
		trsm := func(s cublas.Side, u cublas.Uplo, d cublas.Diag, a, b cublas.Matrix[float32]) error {
			return cublas.Trsm(h, s, u, d, 1, a, b)
		}
		k.matrixCases(t, "Trsm", "A", TA, func(m cublas.Matrix[float32]) error { return trsm(cublas.Left, cublas.Lower, cublas.NonUnit, m, TB) })
		k.matrixCases(t, "Trsm", "B", TB, func(m cublas.Matrix[float32]) error { return trsm(cublas.Left, cublas.Lower, cublas.NonUnit, TA, m) })
		k.refused(t, "Trsm: side", cublas.ErrShape, "cublas: Trsm:", func() error { return trsm(2, cublas.Lower, cublas.NonUnit, TA, TB) })
		k.refused(t, "Trsm: uplo", cublas.ErrShape, "cublas: Trsm:", func() error { return trsm(cublas.Left, 2, cublas.NonUnit, TA, TB) })
		k.refused(t, "Trsm: diag", cublas.ErrShape, "cublas: Trsm:", func() error { return trsm(cublas.Left, cublas.Lower, 2, TA, TB) })
		k.refused(t, "Trsm: A's side", cublas.ErrShape, "cublas: Trsm:", func() error { return trsm(cublas.Right, cublas.Lower, cublas.NonUnit, TA, TB) })
		k.refused(t, "Trsm: A not square", cublas.ErrShape, "cublas: Trsm: A:", func() error { return trsm(cublas.Left, cublas.Lower, cublas.NonUnit, k.mat(t, 3, 2, l), TB) })
		k.refused(t, "Trsm: B transposed", cublas.ErrShape, "cublas: Trsm: B:", func() error { return trsm(cublas.Left, cublas.Lower, cublas.NonUnit, TA, k.mat(t, 2, 3, l).T()) })
		k.refused(t, "Trsm: B is A", cublas.ErrAlias, "cublas: Trsm: B:", func() error { return trsm(cublas.Left, cublas.Lower, cublas.NonUnit, TA, TA) })

		trmm := func(s cublas.Side, u cublas.Uplo, d cublas.Diag, a, b, c cublas.Matrix[float32]) error {
			return cublas.Trmm(h, s, u, d, 1, a, b, c)
		}
		k.matrixCases(t, "Trmm", "A", TA, func(m cublas.Matrix[float32]) error { return trmm(cublas.Left, cublas.Upper, cublas.Unit, m, TB, TC) })
		k.matrixCases(t, "Trmm", "B", TB, func(m cublas.Matrix[float32]) error { return trmm(cublas.Left, cublas.Upper, cublas.Unit, TA, m, TC) })
		k.matrixCases(t, "Trmm", "C", TC, func(m cublas.Matrix[float32]) error { return trmm(cublas.Left, cublas.Upper, cublas.Unit, TA, TB, m) })
		k.refused(t, "Trmm: diag", cublas.ErrShape, "cublas: Trmm:", func() error { return trmm(cublas.Left, cublas.Upper, 3, TA, TB, TC) })
		k.refused(t, "Trmm: C's shape", cublas.ErrShape, "cublas: Trmm:", func() error { return trmm(cublas.Left, cublas.Upper, cublas.Unit, TA, TB, k.mat(t, 3, 3, l)) })
		k.refused(t, "Trmm: C is A", cublas.ErrAlias, "cublas: Trmm: C:", func() error {
			sq := k.mat(t, 3, 3, l)
			return trmm(cublas.Left, cublas.Upper, cublas.Unit, sq, k.mat(t, 3, 3, l), sq)
		})

		symm := func(s cublas.Side, u cublas.Uplo, a, b, c cublas.Matrix[float32]) error {
			return cublas.Symm(h, s, u, 1, a, b, 0, c)
		}
		k.matrixCases(t, "Symm", "A", TA, func(m cublas.Matrix[float32]) error { return symm(cublas.Left, cublas.Upper, m, TB, TC) })
		k.matrixCases(t, "Symm", "B", TB, func(m cublas.Matrix[float32]) error { return symm(cublas.Left, cublas.Upper, TA, m, TC) })
		k.matrixCases(t, "Symm", "C", TC, func(m cublas.Matrix[float32]) error { return symm(cublas.Left, cublas.Upper, TA, TB, m) })
		k.refused(t, "Symm: side", cublas.ErrShape, "cublas: Symm:", func() error { return symm(5, cublas.Upper, TA, TB, TC) })
		k.refused(t, "Symm: A's side", cublas.ErrShape, "cublas: Symm:", func() error { return symm(cublas.Right, cublas.Upper, TA, TB, TC) })
		k.refused(t, "Symm: C is B", cublas.ErrAlias, "cublas: Symm: C:", func() error { return symm(cublas.Left, cublas.Upper, TA, TB, TB) })
	}
	noBadUses(t)
}

// TestLevel2RefusalsFromFake: Gemv, Ger, Gerc and Trsv.
func TestLevel2RefusalsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	k := newKit(t)
	h := k.h
	for _, l := range layouts {
		A, x, y := k.mat(t, 3, 4, l), k.vecOf(t, 4), k.vecOf(t, 3)
		gemv := func(a cublas.Matrix[float32], x, y cublas.Vector[float32]) error {
			return cublas.Gemv(h, 1, a, x, 0, y)
		}
		k.matrixCases(t, "Gemv", "A", A, func(m cublas.Matrix[float32]) error { return gemv(m, x, y) })
		k.vectorCases(t, "Gemv", "x", x, false, func(v cublas.Vector[float32]) error { return gemv(A, v, y) })
		k.vectorCases(t, "Gemv", "y", y, false, func(v cublas.Vector[float32]) error { return gemv(A, x, v) })
		k.refused(t, "Gemv: x's length", cublas.ErrShape, "cublas: Gemv: x:", func() error { return gemv(A, y, y) })
		k.refused(t, "Gemv: y's length", cublas.ErrShape, "cublas: Gemv: y:", func() error { return gemv(A, x, x) })
		k.refused(t, "Gemv: y over A", cublas.ErrAlias, "cublas: Gemv: y:", func() error {
			return gemv(A, x, cublas.Vector[float32]{Buf: A.Buf, Offset: 2, N: 3})
		})
		k.refused(t, "Gemv: y over x", cublas.ErrAlias, "cublas: Gemv: y:", func() error {
			sq := k.mat(t, 3, 3, l)
			return gemv(sq, y, y)
		})

		for fn, g := range map[string]func(x, y cublas.Vector[float32], a cublas.Matrix[float32]) error{
			"Ger":  func(x, y cublas.Vector[float32], a cublas.Matrix[float32]) error { return cublas.Ger(h, 1, x, y, a) },
			"Gerc": func(x, y cublas.Vector[float32], a cublas.Matrix[float32]) error { return cublas.Gerc(h, 1, x, y, a) },
		} {
			// A is 3×4: x has 3 elements, y 4.
			k.matrixCases(t, fn, "A", A, func(m cublas.Matrix[float32]) error { return g(y, x, m) })
			k.vectorCases(t, fn, "x", y, false, func(v cublas.Vector[float32]) error { return g(v, x, A) })
			k.vectorCases(t, fn, "y", x, false, func(v cublas.Vector[float32]) error { return g(y, v, A) })
			k.refused(t, fn+": x's length", cublas.ErrShape, "cublas: "+fn+": x:", func() error { return g(x, x, A) })
			k.refused(t, fn+": y's length", cublas.ErrShape, "cublas: "+fn+": y:", func() error { return g(y, y, A) })
			k.refused(t, fn+": A transposed", cublas.ErrShape, "cublas: "+fn+": A:", func() error { return g(x, y, A.T()) })
			k.refused(t, fn+": A over x", cublas.ErrAlias, "cublas: "+fn+": A:", func() error {
				return g(cublas.Vector[float32]{Buf: A.Buf, Offset: 1, N: 3}, x, A)
			})
		}

		T, tx := k.mat(t, 4, 4, l), k.vecOf(t, 4)
		trsv := func(u cublas.Uplo, d cublas.Diag, a cublas.Matrix[float32], x cublas.Vector[float32]) error {
			return cublas.Trsv(h, u, d, a, x)
		}
		k.matrixCases(t, "Trsv", "A", T, func(m cublas.Matrix[float32]) error { return trsv(cublas.Upper, cublas.Unit, m, tx) })
		k.vectorCases(t, "Trsv", "x", tx, false, func(v cublas.Vector[float32]) error { return trsv(cublas.Upper, cublas.Unit, T, v) })
		k.refused(t, "Trsv: uplo", cublas.ErrShape, "cublas: Trsv:", func() error { return trsv(2, cublas.Unit, T, tx) })
		k.refused(t, "Trsv: diag", cublas.ErrShape, "cublas: Trsv:", func() error { return trsv(cublas.Lower, 2, T, tx) })
		k.refused(t, "Trsv: A not square", cublas.ErrShape, "cublas: Trsv: A:", func() error { return trsv(cublas.Lower, cublas.Unit, A, tx) })
		k.refused(t, "Trsv: x's length", cublas.ErrShape, "cublas: Trsv: x:", func() error { return trsv(cublas.Lower, cublas.Unit, T, y) })
		k.refused(t, "Trsv: x over A", cublas.ErrAlias, "cublas: Trsv: x:", func() error {
			return trsv(cublas.Lower, cublas.Unit, T, cublas.Vector[float32]{Buf: T.Buf, Offset: 4, N: 4})
		})
	}
	noBadUses(t)
}

// TestLevel1RefusalsFromFake: Axpy, Copy, Swap, Scal and every reduction,
// to the host and to the device.
func TestLevel1RefusalsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	k := newKit(t)
	h := k.h
	x, y := k.vecOf(t, 5), k.vecOf(t, 5)
	pairs := map[string]func(x, y cublas.Vector[float32]) error{
		"Axpy": func(x, y cublas.Vector[float32]) error { return cublas.Axpy(h, 2, x, y) },
		"Copy": func(x, y cublas.Vector[float32]) error { return cublas.Copy(h, x, y) },
		"Swap": func(x, y cublas.Vector[float32]) error { return cublas.Swap(h, x, y) },
		"Dot": func(x, y cublas.Vector[float32]) error {
			_, err := cublas.Dot(h, x, y)
			return err
		},
		"Dotc": func(x, y cublas.Vector[float32]) error {
			_, err := cublas.Dotc(h, x, y)
			return err
		},
	}
	r := cublas.VectorOf(up(t, k.s, []float32{0}))
	pairs["DotTo"] = func(x, y cublas.Vector[float32]) error { return cublas.DotTo(h, x, y, r) }
	pairs["DotcTo"] = func(x, y cublas.Vector[float32]) error { return cublas.DotcTo(h, x, y, r) }
	for fn, g := range pairs {
		k.vectorCases(t, fn, "x", x, false, func(v cublas.Vector[float32]) error { return g(v, y) })
		k.vectorCases(t, fn, "y", y, false, func(v cublas.Vector[float32]) error { return g(x, v) })
		k.refused(t, fn+": lengths", cublas.ErrShape, "cublas: "+fn+": y:", func() error { return g(x, k.vecOf(t, 4)) })
		if fn == "Axpy" || fn == "Copy" || fn == "Swap" {
			k.refused(t, fn+": y over x", cublas.ErrAlias, "cublas: "+fn+": y:", func() error {
				return g(cublas.Vector[float32]{Buf: x.Buf, N: 2, Inc: 2}, cublas.Vector[float32]{Buf: x.Buf, Offset: 2, N: 2})
			})
		}
	}
	for fn, g := range map[string]func(x, y, r cublas.Vector[float32]) error{
		"DotTo":  func(x, y, r cublas.Vector[float32]) error { return cublas.DotTo(h, x, y, r) },
		"DotcTo": func(x, y, r cublas.Vector[float32]) error { return cublas.DotcTo(h, x, y, r) },
	} {
		k.vectorCases(t, fn, "result", r, false, func(v cublas.Vector[float32]) error { return g(x, y, v) })
		k.refused(t, fn+": two results", cublas.ErrShape, "cublas: "+fn+": result:", func() error { return g(x, y, k.vecOf(t, 2)) })
		k.refused(t, fn+": result in x", cublas.ErrAlias, "cublas: "+fn+": result:", func() error {
			return g(x, y, cublas.Vector[float32]{Buf: x.Buf, Offset: 3, N: 1})
		})
	}

	ri := cublas.VectorOf(up(t, k.s, []int32{0}))
	singles := map[string]func(x cublas.Vector[float32]) error{
		"Scal": func(x cublas.Vector[float32]) error { return cublas.Scal(h, 2, x) },
		"Nrm2": func(x cublas.Vector[float32]) error {
			_, err := cublas.Nrm2(h, x)
			return err
		},
		"Asum": func(x cublas.Vector[float32]) error {
			_, err := cublas.Asum(h, x)
			return err
		},
		"Iamax": func(x cublas.Vector[float32]) error {
			_, err := cublas.Iamax(h, x)
			return err
		},
		"Nrm2To":  func(x cublas.Vector[float32]) error { return cublas.Nrm2To(h, x, r) },
		"AsumTo":  func(x cublas.Vector[float32]) error { return cublas.AsumTo(h, x, r) },
		"IamaxTo": func(x cublas.Vector[float32]) error { return cublas.IamaxTo(h, x, ri) },
	}
	for fn, g := range singles {
		k.vectorCases(t, fn, "x", x, true, g)
	}
	for fn, g := range map[string]func(r cublas.Vector[float32]) error{
		"Nrm2To": func(r cublas.Vector[float32]) error { return cublas.Nrm2To(h, x, r) },
		"AsumTo": func(r cublas.Vector[float32]) error { return cublas.AsumTo(h, x, r) },
	} {
		k.vectorCases(t, fn, "result", r, false, g)
		k.refused(t, fn+": result in x", cublas.ErrAlias, "cublas: "+fn+": result:", func() error {
			return g(cublas.Vector[float32]{Buf: x.Buf, Offset: 4, N: 1})
		})
	}
	vectorCasesOf(t, k, "IamaxTo", "result", ri, false, func(v cublas.Vector[int32]) error { return cublas.IamaxTo(h, x, v) })
	// Wider elements: the bounds are counted in elements of the view's
	// type.
	z, zy := cublas.VectorOf(up(t, k.s, data[complex128](4, 1))), cublas.VectorOf(up(t, k.s, data[complex128](4, 2)))
	vectorCasesOf(t, k, "Axpy", "x", z, false, func(v cublas.Vector[complex128]) error { return cublas.Axpy(h, 1i, v, zy) })
	vectorCasesOf(t, k, "Scal", "x", z, true, func(v cublas.Vector[complex128]) error { return cublas.Scal(h, 2, v) })
	c, cy := cublas.VectorOf(up(t, k.s, data[complex64](3, 1))), cublas.VectorOf(up(t, k.s, data[complex64](3, 2)))
	vectorCasesOf(t, k, "Dotc", "y", cy, false, func(v cublas.Vector[complex64]) error {
		_, err := cublas.Dotc(h, c, v)
		return err
	})
	d := cublas.VectorOf(up(t, k.s, data[float64](3, 1)))
	vectorCasesOf(t, k, "Nrm2To", "result", cublas.VectorOf(up(t, k.s, []float64{0})), false, func(v cublas.Vector[float64]) error {
		return cublas.Nrm2To(h, d, v)
	})
	k.refused(t, "IamaxTo: two results", cublas.ErrShape, "cublas: IamaxTo: result:", func() error {
		return cublas.IamaxTo(h, x, cublas.VectorOf(up(t, k.s, []int32{0, 0})))
	})
	k.refused(t, "IamaxTo: nil result", nil, "cublas: IamaxTo: result:", func() error {
		return cublas.IamaxTo(h, x, cublas.Vector[int32]{N: 1})
	})
	noBadUses(t)
}

// TestHandleRefusalsFromFake: every routine on a nil Handle, a zero
// Handle{} and a closed Handle fails cleanly (ErrInvalidArgument,
// ErrInvalidArgument, ErrClosed), naming itself, with no cuBLAS call.
func TestHandleRefusalsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	k := newKit(t)
	o := newOperands(t, k.fenv)
	closed, err := cublas.NewHandle(k.s, &cublas.Options{WorkspaceBytes: 256})
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	for name, call := range apiCalls {
		if handleFree[name] {
			continue
		}
		k.refused(t, name+" on a nil Handle", nil, "cublas: "+name+":", func() error { return call(nil, o) })
		k.refused(t, name+" on a zero Handle", nil, "cublas: "+name+":", func() error { return call(&cublas.Handle{}, o) })
		if name != "Close" {
			k.refused(t, name+" on a closed Handle", driver.ErrClosed, "cublas: "+name+":", func() error { return call(closed, o) })
		}
	}
	assert.NoError(t, closed.Close(), "a second Close returns the first's result")
	var nilH *cublas.Handle
	assert.Nil(t, nilH.Stream())
	assert.Nil(t, nilH.Context())
	assert.Equal(t, cublas.Options{}, nilH.Options())
	assert.Nil(t, (&cublas.Handle{}).Stream())
	assert.Same(t, k.s, closed.Stream(), "a closed Handle still says its stream")
}

// TestNewHandleRefusalsFromFake: NewHandle refuses a nil or closed stream,
// an unknown math mode and a workspace size that is negative or not a
// multiple of 256, and a failure inside cuBLAS's setup, leaving nothing:
// no cuBLAS handle, no allocation, no lifetime object.
func TestNewHandleRefusalsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	ctx := fakeCtx(t)
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	gone, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, gone.Close())
	allocs := faketest.Call(t, "fake_live_allocations")
	cases := []struct {
		what string
		s    *driver.Stream
		o    *cublas.Options
		want error
	}{
		{"nil stream", nil, nil, driver.ErrNilStream},
		{"closed stream", gone, nil, driver.ErrClosed},
		{"math mode 1", s, &cublas.Options{Math: 1}, driver.ErrInvalidArgument},
		{"math mode 99", s, &cublas.Options{Math: 99}, driver.ErrInvalidArgument},
		{"math mode 4 with the flag", s, &cublas.Options{Math: 4 | cublas.DisallowReducedPrecisionReduction}, driver.ErrInvalidArgument},
		{"workspace of 100 bytes", s, &cublas.Options{WorkspaceBytes: 100}, driver.ErrInvalidArgument},
		{"workspace of 257 bytes", s, &cublas.Options{WorkspaceBytes: 257}, driver.ErrInvalidArgument},
		{"negative workspace", s, &cublas.Options{WorkspaceBytes: -256}, driver.ErrInvalidArgument},
	}
	for _, c := range cases {
		var h *cublas.Handle
		var err error
		assert.NotPanics(t, func() { h, err = cublas.NewHandle(c.s, c.o) }, c.what)
		assert.Nil(t, h, c.what)
		assert.ErrorIs(t, err, c.want, c.what)
		if err != nil {
			assert.Contains(t, err.Error(), "cublas: NewHandle:", c.what)
		}
	}
	// cuBLAS failing at each step of the setup.
	for _, fn := range []string{"cublasCreate_v2", "cublasSetStream_v2", "cublasSetWorkspace_v2", "cublasSetMathMode", "cublasSetAtomicsMode", "cublasSetPointerMode_v2"} {
		faketest.CUBLASFailNext(t, fn, 3) // CUBLAS_STATUS_ALLOC_FAILED
		h, err := cublas.NewHandle(s, &cublas.Options{WorkspaceBytes: 1 << 10})
		assert.Nil(t, h, fn)
		assert.ErrorIs(t, err, cublas.StatusAllocFailed, fn)
		var ce *cublas.Error
		if assert.True(t, errors.As(err, &ce), fn) {
			assert.Equal(t, fn, ce.Func)
			assert.Equal(t, "NewHandle", ce.Op)
		}
		assert.Zero(t, liveHandles(t), "%s: the handle made is destroyed", fn)
	}
	waitFor(t, "fake_live_allocations", allocs) // no workspace left
	// And the valid options make a handle that says them.
	h, err := cublas.NewHandle(s, &cublas.Options{Math: cublas.PedanticMath | cublas.DisallowReducedPrecisionReduction, Atomics: true})
	require.NoError(t, err)
	assert.Equal(t, cublas.Options{Math: cublas.PedanticMath | cublas.DisallowReducedPrecisionReduction, Atomics: true, WorkspaceBytes: h.Options().WorkspaceBytes}, h.Options())
	assert.Contains(t, []int{4 << 20, 32 << 20}, h.Options().WorkspaceBytes, "the recommended size")
	assert.Same(t, s, h.Stream())
	assert.Same(t, ctx, h.Context())
	require.NoError(t, h.Close())
	waitNoHandles(t)
	waitFor(t, "fake_live_allocations", allocs)
	noBadUses(t)
}
