package blasview_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	bv "github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
)

const (
	opN = cublasraw.CUBLAS_OP_N
	opT = cublasraw.CUBLAS_OP_T
	opC = cublasraw.CUBLAS_OP_C
)

func TestGemmArguments(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b, c bv.Matrix
		want    bv.GemmArgs
	}{{
		name: "column-major",
		a:    col(0, 100, 1, 4, 3, 5), b: col(1, 100, 0, 3, 2, 3), c: col(2, 100, 2, 4, 2, 4),
		want: bv.GemmArgs{TransA: opN, TransB: opN, M: 4, N: 2, K: 3, LDA: 5, LDB: 3, LDC: 4, OffA: 1, OffB: 0, OffC: 2},
	}, {
		name: "row-major: C^T = B^T A^T, the classic sgemm(N, N, n, m, k, B, A)",
		a:    row(0, 12, 0, 4, 3, 3), b: row(1, 6, 0, 3, 2, 2), c: row(2, 8, 0, 4, 2, 2),
		want: bv.GemmArgs{TransA: opN, TransB: opN, M: 2, N: 4, K: 3, LDA: 2, LDB: 3, LDC: 2, Swapped: true},
	}, {
		name: "row-major A, transposed column-major B, column-major C",
		a:    row(0, 50, 7, 4, 3, 3), b: op(col(1, 50, 3, 2, 3, 2), bv.Trans), c: col(2, 50, 1, 4, 2, 4),
		want: bv.GemmArgs{TransA: opT, TransB: opT, M: 4, N: 2, K: 3, LDA: 3, LDB: 2, LDC: 4, OffA: 7, OffB: 3, OffC: 1},
	}, {
		name: "conjugate transposes of operands in C's layout pass through",
		a:    op(row(0, 50, 0, 3, 4, 4), bv.ConjTrans), b: op(row(1, 50, 5, 2, 3, 3), bv.ConjTrans), c: row(2, 50, 9, 4, 2, 2),
		want: bv.GemmArgs{TransA: opC, TransB: opC, M: 2, N: 4, K: 3, LDA: 3, LDB: 4, LDC: 2, OffA: 5, OffB: 0, OffC: 9, Swapped: true},
	}, {
		name: "k = 0: A and B empty but their ld still >= 1",
		a:    col(0, 0, 0, 4, 0, 4), b: col(1, 0, 0, 0, 2, 1), c: col(2, 8, 0, 4, 2, 4),
		want: bv.GemmArgs{TransA: opN, TransB: opN, M: 4, N: 2, K: 0, LDA: 4, LDB: 1, LDC: 4},
	}, {
		name: "A the top rows, C the bottom rows of one matrix (exact overlap check)",
		a:    col(0, 40, 0, 4, 4, 8), b: col(1, 16, 0, 4, 4, 4), c: col(0, 40, 4, 4, 4, 8),
		want: bv.GemmArgs{TransA: opN, TransB: opN, M: 4, N: 4, K: 4, LDA: 8, LDB: 4, LDC: 8, OffC: 4},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := bv.Gemm(tc.a, tc.b, tc.c)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestGemmNeeds64(t *testing.T) {
	const big = math.MaxInt32 + 1
	got, err := bv.Gemm(col(0, big, 0, big, 1, big), col(1, 1, 0, 1, 1, 1), col(2, big, 0, big, 1, big))
	require.NoError(t, err)
	assert.True(t, got.Needs64)
	got, err = bv.Gemm(col(0, 4, 0, 2, 2, 2), col(1, 4, 0, 2, 2, 2), col(2, 4, 0, 2, 2, 2))
	require.NoError(t, err)
	assert.False(t, got.Needs64)
}

func TestGemmRefusals(t *testing.T) {
	a, b, c := col(0, 12, 0, 4, 3, 4), col(1, 6, 0, 3, 2, 3), col(2, 8, 0, 4, 2, 4)
	with := func(f func(a, b, c *bv.Matrix)) [3]bv.Matrix {
		x, y, z := a, b, c
		f(&x, &y, &z)
		return [3]bv.Matrix{x, y, z}
	}
	for _, tc := range []struct {
		name    string
		ops     [3]bv.Matrix
		kind    error
		operand string
		msg     string
	}{
		{"A rows", with(func(a, _, _ *bv.Matrix) { a.Rows = -1 }), bv.ErrShape, "A", "rows -1 is negative"},
		{"B cols", with(func(_, b, _ *bv.Matrix) { b.Cols = -2 }), bv.ErrShape, "B", "cols -2 is negative"},
		{"A ld", with(func(a, _, _ *bv.Matrix) { a.LD = 3 }), bv.ErrShape, "A", "leading dimension 3 is less than its 4 rows"},
		{"B ld", with(func(_, b, _ *bv.Matrix) { b.LD = 2 }), bv.ErrShape, "B", "leading dimension 2 is less than its 3 rows"},
		{"C ld row-major", with(func(_, _, c *bv.Matrix) { c.Layout = bv.RowMajor; c.LD = 1 }), bv.ErrShape, "C", "leading dimension 1 is less than its 2 columns (row-major)"},
		{"empty C ld 0", with(func(a, _, c *bv.Matrix) { a.Rows, c.Rows, c.LD = 0, 0, 0 }), bv.ErrShape, "C", "leading dimension 0 is less than 1"},
		{"A offset", with(func(a, _, _ *bv.Matrix) { a.Offset = -1 }), bv.ErrOutOfBounds, "A", "offset -1 is negative"},
		{"B past the end", with(func(_, b, _ *bv.Matrix) { b.Offset = 1 }), bv.ErrOutOfBounds, "B", "last element (2,1) at 6 is past the end of its buffer of 6 elements"},
		{"C short buffer", with(func(_, _, c *bv.Matrix) { c.Buf.Len = 7 }), bv.ErrOutOfBounds, "C", "past the end"},
		{"A ld overflows", with(func(a, _, _ *bv.Matrix) { a.LD = math.MaxInt64 / 2 }), bv.ErrOutOfBounds, "A", "beyond 2^63"},
		{"A offset overflows", with(func(a, _, _ *bv.Matrix) { a.Offset = math.MaxInt64 - 5 }), bv.ErrOutOfBounds, "A", "beyond 2^63"},
		{"empty A offset past the end", with(func(a, b, _ *bv.Matrix) { a.Cols, b.Rows, a.Offset = 0, 0, 13 }), bv.ErrOutOfBounds, "A", "offset 13 is past the end"},
		{"k", with(func(_, b, _ *bv.Matrix) { b.Rows = 2; b.LD = 2 }), bv.ErrShape, "B", "op(B) has 2 rows but op(A) has 3 columns (k)"},
		{"k through Trans", with(func(a, _, _ *bv.Matrix) { a.Op = bv.Trans }), bv.ErrShape, "B", "op(B) has 3 rows but op(A) has 4 columns (k)"},
		{"m", with(func(_, _, c *bv.Matrix) { c.Rows = 3 }), bv.ErrShape, "C", "C has 3 rows but op(A) has 4 (m)"},
		{"n", with(func(_, _, c *bv.Matrix) { c.Cols = 1 }), bv.ErrShape, "C", "C has 1 columns but op(B) has 2 (n)"},
		{"C op", with(func(_, _, c *bv.Matrix) { c.Op = bv.Trans }), bv.ErrShape, "C", "the result takes no operation"},
		{"unknown layout", with(func(a, _, _ *bv.Matrix) { a.Layout = 2 }), bv.ErrShape, "A", "unknown layout 2"},
		{"unknown op", with(func(_, b, _ *bv.Matrix) { b.Op = 9 }), bv.ErrShape, "B", "unknown operation 9"},
		{"negative length", with(func(a, _, _ *bv.Matrix) { a.Buf.Len = -1 }), bv.ErrShape, "A", "buffer length -1 is negative"},
		{"negative element size", with(func(_, b, _ *bv.Matrix) { b.Buf.Elem = -4 }), bv.ErrShape, "B", "element size -4 is negative"},
		{"address overflow", with(func(_, _, c *bv.Matrix) { c.Buf.Addr = math.MaxUint64 - 3 }), bv.ErrOutOfBounds, "C", "overflows the address space"},
		{"size overflow", with(func(_, _, c *bv.Matrix) { c.Buf.Elem = math.MaxInt64 / 4 }), bv.ErrOutOfBounds, "C", "overflows the address space"},
		{"conjugate across layouts", with(func(a, _, c *bv.Matrix) {
			a.Op = bv.ConjTrans
			a.Rows, a.Cols = 3, 4
			a.LD = 3
			c.Layout = bv.RowMajor
			c.LD = 2
		}), bv.ErrShape, "A", "conjugate transpose of a column-major view cannot be expressed with a row-major result"},
		{"C is A", with(func(a, _, c *bv.Matrix) { c.Buf, c.Offset = a.Buf, 4 }), bv.ErrAlias, "C", "C overlaps A"},
		{"C in B's column gap", with(func(_, b, c *bv.Matrix) {
			b.LD = 5
			b.Buf.Len = 20
			c.Buf, c.Offset, c.LD = b.Buf, 3, 5
		}), bv.ErrAlias, "C", "C overlaps B"},
		{"C over A's columns", with(func(a, _, c *bv.Matrix) {
			a.LD, a.Buf.Len = 8, 40
			c.Buf, c.Offset, c.LD = a.Buf, 18, 8
		}), bv.ErrAlias, "C", "C overlaps A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bv.Gemm(tc.ops[0], tc.ops[1], tc.ops[2])
			refused(t, err, tc.kind, tc.operand, tc.msg)
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		})
	}
}

func TestGemmStridedBatched(t *testing.T) {
	a, b, c := col(0, 12, 0, 2, 2, 2), col(1, 8, 0, 2, 2, 2), col(2, 12, 0, 2, 2, 2)
	got, err := bv.GemmStridedBatched(a, b, c, 4, 0, 4, 3)
	require.NoError(t, err)
	assert.Equal(t, bv.StridedArgs{
		GemmArgs: bv.GemmArgs{TransA: opN, TransB: opN, M: 2, N: 2, K: 2, LDA: 2, LDB: 2, LDC: 2},
		StrideA:  4, StrideB: 0, StrideC: 4, Count: 3,
	}, got)

	ra, rb, rc := row(0, 30, 1, 2, 3, 3), row(1, 30, 2, 3, 4, 4), row(2, 40, 3, 2, 4, 4)
	got, err = bv.GemmStridedBatched(ra, rb, rc, 6, 12, 8, 2)
	require.NoError(t, err)
	assert.Equal(t, bv.StridedArgs{
		GemmArgs: bv.GemmArgs{TransA: opN, TransB: opN, M: 4, N: 2, K: 3, LDA: 4, LDB: 3, LDC: 4, OffA: 2, OffB: 1, OffC: 3, Swapped: true},
		StrideA:  12, StrideB: 6, StrideC: 8, Count: 2,
	}, got, "row-major C: A and B swap, their strides with them")

	got, err = bv.GemmStridedBatched(a, b, c, -1, -1, -1, 0)
	refused(t, err, bv.ErrShape, "A", "stride -1 is negative")
	_ = got
	_, err = bv.GemmStridedBatched(a, b, c, 0, 0, 4, math.MaxInt32+1)
	refused(t, err, bv.ErrOutOfBounds, "C", "past the end")
	_, err = bv.GemmStridedBatched(a, b, c, 0, 0, 0, 0)
	require.NoError(t, err, "count 0 touches nothing")

	for _, tc := range []struct {
		name              string
		sa, sb, sc, count int64
		kind              error
		operand, msg      string
	}{
		{"count", 4, 4, 4, -1, bv.ErrShape, "", "batch count -1 is negative"},
		{"A stride", 5, 0, 4, 3, bv.ErrOutOfBounds, "A", "batch 2's last element at 13 is past the end of its buffer of 12 elements (stride 5)"},
		{"B stride", 4, -3, 4, 3, bv.ErrShape, "B", "stride -3 is negative"},
		{"B count", 0, 4, 4, 3, bv.ErrOutOfBounds, "B", "batch 2's last element at 11 is past the end of its buffer of 8"},
		{"C count", 0, 0, 4, 4, bv.ErrOutOfBounds, "C", "batch 3"},
		{"C stride overflows", 0, 0, math.MaxInt64 / 2, 3, bv.ErrOutOfBounds, "C", "beyond 2^63"},
		{"C batches overlap", 0, 0, 3, 3, bv.ErrAlias, "C", "stride 3 is less than the span of one C (4 elements)"},
		{"C stride 0", 0, 0, 0, 2, bv.ErrAlias, "C", "batches of C would overlap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bv.GemmStridedBatched(a, b, c, tc.sa, tc.sb, tc.sc, tc.count)
			refused(t, err, tc.kind, tc.operand, tc.msg)
		})
	}

	shared := col(0, 40, 0, 2, 2, 2)
	_, err = bv.GemmStridedBatched(shared, b, col(0, 40, 16, 2, 2, 2), 4, 0, 4, 5)
	refused(t, err, bv.ErrAlias, "C", "the batches of C overlap those of A")
	_, err = bv.GemmStridedBatched(shared, b, col(0, 40, 16, 2, 2, 2), 4, 0, 4, 4)
	require.NoError(t, err, "A's batches end where C's begin")
}

func TestGemmBatched(t *testing.T) {
	as := []bv.Matrix{col(0, 20, 0, 2, 3, 2), col(0, 20, 6, 2, 3, 2)}
	bs := []bv.Matrix{col(1, 20, 0, 3, 2, 3), col(1, 20, 9, 3, 2, 3)}
	cs := []bv.Matrix{col(2, 20, 0, 2, 2, 2), col(3, 20, 5, 2, 2, 2)}
	got, err := bv.GemmBatched(as, bs, cs)
	require.NoError(t, err)
	assert.Equal(t, bv.GemmArgs{TransA: opN, TransB: opN, M: 2, N: 2, K: 3, LDA: 2, LDB: 3, LDC: 2}, got.GemmArgs)
	assert.Equal(t, int64(2), got.Count)
	assert.Equal(t, []int64{0, 6}, got.OffA)
	assert.Equal(t, []int64{0, 9}, got.OffB)
	assert.Equal(t, []int64{0, 5}, got.OffC)

	rcs := []bv.Matrix{row(2, 20, 0, 2, 2, 2), row(3, 20, 5, 2, 2, 2)}
	ras := []bv.Matrix{op(col(0, 20, 0, 3, 2, 3), bv.Trans), op(col(0, 20, 6, 3, 2, 3), bv.Trans)}
	got, err = bv.GemmBatched(ras, bs, rcs)
	require.NoError(t, err)
	assert.True(t, got.Swapped)
	assert.Equal(t, []int64{0, 9}, got.OffA, "cuBLAS's A is the caller's B")
	assert.Equal(t, []int64{0, 6}, got.OffB)
	assert.Equal(t, opT, got.TransA)
	assert.Equal(t, opN, got.TransB, "a transposed column-major A against a row-major C")

	got, err = bv.GemmBatched(nil, nil, nil)
	require.NoError(t, err)
	assert.Zero(t, got.Count)

	_, err = bv.GemmBatched(as, bs, cs[:1])
	refused(t, err, bv.ErrShape, "", "2 A, 2 B and 1 C views")
	bad := []bv.Matrix{as[0], col(0, 20, 15, 2, 3, 2)}
	_, err = bv.GemmBatched(bad, bs, cs)
	refused(t, err, bv.ErrOutOfBounds, "A[1]", "past the end")
	bad = []bv.Matrix{as[0], col(0, 20, 6, 2, 3, 3)}
	_, err = bv.GemmBatched(bad, bs, cs)
	refused(t, err, bv.ErrShape, "A[1]", "leading dimension 3, but A[0]'s is 2")
	bad = []bv.Matrix{bs[0], col(1, 20, 9, 3, 2, 4)}
	_, err = bv.GemmBatched(as, bad, cs)
	refused(t, err, bv.ErrShape, "B[1]", "leading dimension 4, but B[0]'s is 3")
	bad = []bv.Matrix{bs[0], col(1, 20, 9, 3, 1, 3)}
	_, err = bv.GemmBatched(as, bad, cs)
	refused(t, err, bv.ErrShape, "C[1]", "C has 2 columns but op(B) has 1 (n)")
	bad = []bv.Matrix{cs[0], col(0, 20, 7, 2, 2, 2)}
	_, err = bv.GemmBatched(as, bs, bad)
	refused(t, err, bv.ErrAlias, "C[1]", "overlaps A[1]")
	bad = []bv.Matrix{cs[0], col(2, 20, 3, 2, 2, 2)}
	_, err = bv.GemmBatched(as, bs, bad)
	refused(t, err, bv.ErrAlias, "C[1]", "overlaps C[0]")
	bad = []bv.Matrix{cs[0], col(1, 20, 1, 2, 2, 2)}
	_, err = bv.GemmBatched(as, bs, bad)
	refused(t, err, bv.ErrAlias, "C[1]", "overlaps B[0]")
}
