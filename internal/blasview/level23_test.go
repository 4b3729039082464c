package blasview_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bv "github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
)

const (
	lower = cublasraw.CUBLAS_FILL_MODE_LOWER
	upper = cublasraw.CUBLAS_FILL_MODE_UPPER
	left  = cublasraw.CUBLAS_SIDE_LEFT
	right = cublasraw.CUBLAS_SIDE_RIGHT
	unit  = cublasraw.CUBLAS_DIAG_UNIT
	nonU  = cublasraw.CUBLAS_DIAG_NON_UNIT
)

func TestGemvArguments(t *testing.T) {
	got, err := bv.Gemv(col(0, 30, 2, 3, 4, 5), vec(1, 10, 1, 4, 2), vec(2, 10, 0, 3, -3))
	require.NoError(t, err)
	assert.Equal(t, bv.GemvArgs{Trans: opN, M: 3, N: 4, LDA: 5, OffA: 2, OffX: 1, IncX: 2, OffY: 0, IncY: -3}, got)
	got, err = bv.Gemv(row(0, 30, 2, 3, 4, 5), vec(1, 10, 1, 4, 2), vec(2, 10, 0, 3, 1))
	require.NoError(t, err)
	assert.Equal(t, bv.GemvArgs{Trans: opT, M: 4, N: 3, LDA: 5, OffA: 2, OffX: 1, IncX: 2, IncY: 1}, got, "row-major A: its 4×3 storage, transposed")

	a, x, y := col(0, 12, 0, 3, 4, 3), vec(1, 4, 0, 4, 1), vec(2, 3, 0, 3, 1)
	for _, tc := range []struct {
		name       string
		a          bv.Matrix
		x, y       bv.Vector
		kind       error
		operand, m string
	}{
		{"A rows", col(0, 12, 0, -3, 4, 3), x, y, bv.ErrShape, "A", "rows -3 is negative"},
		{"A ld", col(0, 12, 0, 3, 4, 2), x, y, bv.ErrShape, "A", "leading dimension 2 is less than its 3 rows"},
		{"A bounds", col(0, 11, 0, 3, 4, 3), x, y, bv.ErrOutOfBounds, "A", "past the end"},
		{"x length", a, vec(1, 4, 0, 3, 1), y, bv.ErrShape, "x", "length 3, but op(A) has 4 columns"},
		{"y length", a, x, vec(2, 4, 0, 4, 1), bv.ErrShape, "y", "length 4, but op(A) has 3 rows"},
		{"x inc", a, vec(1, 4, 0, 4, 0), y, bv.ErrShape, "x", "increment is 0"},
		{"x bounds", a, vec(1, 4, 1, 4, 1), y, bv.ErrOutOfBounds, "x", "past the end of its buffer of 4"},
		{"y negative inc bounds", a, x, vec(2, 3, 0, 3, -2), bv.ErrOutOfBounds, "y", "reach 4"},
		{"y offset", a, x, vec(2, 3, -1, 3, 1), bv.ErrOutOfBounds, "y", "offset -1 is negative"},
		{"y over A", a, x, bv.Vector{Buf: a.Buf, Offset: 6, N: 3, Inc: 1}, bv.ErrAlias, "y", "y overlaps A"},
		{"y over x", a, vec(1, 8, 0, 4, 2), vec(1, 8, 2, 3, 2), bv.ErrAlias, "y", "y overlaps x"},
		{"conjugate of row-major", op(row(0, 12, 0, 4, 3, 3), bv.ConjTrans), x, y, bv.ErrShape, "A", "conjugate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bv.Gemv(tc.a, tc.x, tc.y)
			refused(t, err, tc.kind, tc.operand, tc.m)
		})
	}
	_, err = bv.Gemv(a, vec(1, 8, 0, 4, 2), vec(1, 8, 1, 3, 2))
	require.NoError(t, err, "y between x's elements, one stride: exact")
	_, err = bv.Gemv(a, vec(1, 8, 0, 4, 2), vec(1, 20, 1, 3, 6))
	refused(t, err, bv.ErrAlias, "y", "y overlaps x") // different strides: conservative
	_, err = bv.Gemv(a, vec(1, 8, 0, 4, 2), vec(1, 20, 7, 3, 3))
	require.NoError(t, err, "apart")
}

func TestGer(t *testing.T) {
	got, err := bv.Ger(col(0, 20, 1, 3, 2, 4), vec(1, 9, 0, 3, 3), vec(2, 9, 2, 2, -1), true)
	require.NoError(t, err)
	assert.Equal(t, bv.GerArgs{M: 3, N: 2, OffX: 0, IncX: 3, OffY: 2, IncY: -1, LDA: 4, OffA: 1}, got)
	got, err = bv.Ger(row(0, 20, 1, 3, 2, 4), vec(1, 9, 0, 3, 3), vec(2, 9, 2, 2, -1), false)
	require.NoError(t, err)
	assert.Equal(t, bv.GerArgs{M: 2, N: 3, OffX: 2, IncX: -1, OffY: 0, IncY: 3, LDA: 4, OffA: 1, Swapped: true}, got)

	a, x, y := col(0, 6, 0, 3, 2, 3), vec(1, 3, 0, 3, 1), vec(2, 2, 0, 2, 1)
	_, err = bv.Ger(a, vec(1, 3, 0, 2, 1), y, false)
	refused(t, err, bv.ErrShape, "x", "length 2, but A has 3 rows")
	_, err = bv.Ger(a, x, vec(2, 3, 0, 3, 1), false)
	refused(t, err, bv.ErrShape, "y", "length 3, but A has 2 columns")
	_, err = bv.Ger(op(a, bv.Trans), x, y, false)
	refused(t, err, bv.ErrShape, "A", "takes no operation")
	_, err = bv.Ger(row(0, 6, 0, 3, 2, 2), x, y, true)
	refused(t, err, bv.ErrShape, "A", "conjugated")
	_, err = bv.Ger(a, bv.Vector{Buf: a.Buf, Offset: 5, N: 3, Inc: -2}, y, false)
	refused(t, err, bv.ErrOutOfBounds, "x", "reach 9")
	_, err = bv.Ger(a, bv.Vector{Buf: a.Buf, Offset: 3, N: 3, Inc: 1}, y, false)
	refused(t, err, bv.ErrAlias, "A", "A overlaps x")
	_, err = bv.Ger(a, x, bv.Vector{Buf: a.Buf, Offset: 2, N: 2, Inc: 3}, false)
	refused(t, err, bv.ErrAlias, "A", "A overlaps y")
}

func TestTrsv(t *testing.T) {
	got, err := bv.Trsv(col(0, 20, 1, 3, 3, 4), bv.Upper, bv.Unit, vec(1, 9, 2, 3, -2))
	require.NoError(t, err)
	assert.Equal(t, bv.TrsvArgs{Uplo: upper, Trans: opN, Diag: unit, N: 3, LDA: 4, OffA: 1, OffX: 2, IncX: -2}, got)
	got, err = bv.Trsv(op(row(0, 20, 1, 3, 3, 4), bv.Trans), bv.Upper, bv.NonUnit, vec(1, 9, 2, 3, 1))
	require.NoError(t, err)
	assert.Equal(t, bv.TrsvArgs{Uplo: lower, Trans: opN, Diag: nonU, N: 3, LDA: 4, OffA: 1, OffX: 2, IncX: 1}, got, "row-major: triangle and operation flip")

	_, err = bv.Trsv(col(0, 20, 0, 3, 4, 3), bv.Lower, bv.Unit, vec(1, 9, 0, 3, 1))
	refused(t, err, bv.ErrShape, "A", "3×4 is not square")
	_, err = bv.Trsv(col(0, 20, 0, 3, 3, 3), bv.Lower, bv.Unit, vec(1, 9, 0, 4, 1))
	refused(t, err, bv.ErrShape, "x", "length 4, but A is 3×3")
	_, err = bv.Trsv(col(0, 20, 0, 3, 3, 3), 2, bv.Unit, vec(1, 9, 0, 3, 1))
	refused(t, err, bv.ErrShape, "A", "unknown triangle 2")
	_, err = bv.Trsv(col(0, 20, 0, 3, 3, 3), bv.Lower, 5, vec(1, 9, 0, 3, 1))
	refused(t, err, bv.ErrShape, "A", "unknown diagonal 5")
	_, err = bv.Trsv(col(0, 20, 0, 3, 3, 3), bv.Lower, bv.Unit, bv.Vector{Buf: buf(0, 20), Offset: 7, N: 3, Inc: 1})
	refused(t, err, bv.ErrAlias, "x", "x overlaps A")
	_, err = bv.Trsv(op(row(0, 20, 0, 3, 3, 3), bv.ConjTrans), bv.Lower, bv.Unit, vec(1, 9, 0, 3, 1))
	refused(t, err, bv.ErrShape, "A", "conjugate")
}

func TestTrsmTrmm(t *testing.T) {
	a, b := col(0, 20, 0, 3, 3, 3), col(1, 20, 1, 3, 2, 4)
	got, err := bv.Trsm(bv.Left, bv.Lower, bv.NonUnit, op(a, bv.Trans), b)
	require.NoError(t, err)
	assert.Equal(t, bv.TriArgs{Side: left, Uplo: lower, Trans: opT, Diag: nonU, M: 3, N: 2, LDA: 3, LDB: 4, OffB: 1}, got)
	rb := row(1, 20, 1, 3, 2, 4)
	got, err = bv.Trsm(bv.Left, bv.Lower, bv.Unit, a, rb)
	require.NoError(t, err)
	assert.Equal(t, bv.TriArgs{Side: right, Uplo: lower, Trans: opT, Diag: unit, M: 2, N: 3, LDA: 3, LDB: 4, OffB: 1}, got,
		"row-major B: Bᵀ = Xᵀ·op(A)ᵀ, A on the right, its operation transposed")
	got, err = bv.Trsm(bv.Right, bv.Upper, bv.Unit, row(0, 20, 0, 2, 2, 2), rb)
	require.NoError(t, err)
	assert.Equal(t, bv.TriArgs{Side: left, Uplo: lower, Trans: opN, Diag: unit, M: 2, N: 3, LDA: 2, LDB: 4, OffB: 1}, got)

	_, err = bv.Trsm(bv.Left, bv.Lower, bv.Unit, col(0, 20, 0, 2, 2, 2), b)
	refused(t, err, bv.ErrShape, "A", "2×2, but B has 3 rows")
	_, err = bv.Trsm(bv.Right, bv.Lower, bv.Unit, a, b)
	refused(t, err, bv.ErrShape, "A", "3×3, but B has 2 columns")
	_, err = bv.Trsm(3, bv.Lower, bv.Unit, a, b)
	refused(t, err, bv.ErrShape, "A", "unknown side 3")
	_, err = bv.Trsm(bv.Left, bv.Lower, bv.Unit, a, op(b, bv.Trans))
	refused(t, err, bv.ErrShape, "B", "takes no operation")
	_, err = bv.Trsm(bv.Left, bv.Lower, bv.Unit, a, col(1, 20, 1, 3, 2, 2))
	refused(t, err, bv.ErrShape, "B", "leading dimension 2 is less than its 3 rows")
	_, err = bv.Trsm(bv.Left, bv.Lower, bv.Unit, a, col(0, 20, 8, 3, 2, 4))
	refused(t, err, bv.ErrAlias, "B", "B overlaps A")
	_, err = bv.Trsm(bv.Left, bv.Lower, bv.Unit, op(a, bv.ConjTrans), rb)
	refused(t, err, bv.ErrShape, "A", "conjugate")

	c := col(2, 20, 0, 3, 2, 4)
	got, err = bv.Trmm(bv.Left, bv.Upper, bv.NonUnit, a, b, c)
	require.NoError(t, err)
	assert.Equal(t, bv.TriArgs{Side: left, Uplo: upper, Trans: opN, Diag: nonU, M: 3, N: 2, LDA: 3, LDB: 4, OffB: 1, LDC: 4}, got)
	got, err = bv.Trmm(bv.Left, bv.Upper, bv.NonUnit, a, b, b)
	require.NoError(t, err)
	assert.True(t, got.InPlaceTrm, "C may be B itself")
	_, err = bv.Trmm(bv.Left, bv.Upper, bv.NonUnit, a, b, col(1, 20, 2, 3, 2, 4))
	refused(t, err, bv.ErrAlias, "C", "C overlaps B in memory without being B")
	_, err = bv.Trmm(bv.Left, bv.Upper, bv.NonUnit, a, b, col(0, 20, 6, 3, 2, 4))
	refused(t, err, bv.ErrAlias, "C", "C overlaps A")
	_, err = bv.Trmm(bv.Left, bv.Upper, bv.NonUnit, a, rb, c)
	refused(t, err, bv.ErrShape, "B", "B is row-major but C is column-major")
	_, err = bv.Trmm(bv.Left, bv.Upper, bv.NonUnit, a, col(1, 20, 1, 3, 1, 4), c)
	refused(t, err, bv.ErrShape, "B", "B has 1 columns, C 2")
	_, err = bv.Trmm(bv.Left, bv.Upper, bv.NonUnit, a, col(1, 20, 1, 3, 2, 4), col(2, 6, 0, 3, 2, 4))
	refused(t, err, bv.ErrOutOfBounds, "C", "past the end")
}

func TestSymmSyrk(t *testing.T) {
	a, b, c := col(0, 20, 0, 3, 3, 3), col(1, 20, 0, 3, 2, 3), col(2, 20, 1, 3, 2, 3)
	got, err := bv.Symm(bv.Left, bv.Lower, a, b, c)
	require.NoError(t, err)
	assert.Equal(t, bv.SymmArgs{Side: left, Uplo: lower, M: 3, N: 2, LDA: 3, LDB: 3, LDC: 3, OffC: 1}, got)
	got, err = bv.Symm(bv.Left, bv.Lower, a, row(1, 20, 0, 3, 2, 2), row(2, 20, 1, 3, 2, 2))
	require.NoError(t, err)
	assert.Equal(t, bv.SymmArgs{Side: right, Uplo: lower, M: 2, N: 3, LDA: 3, LDB: 2, LDC: 2, OffC: 1}, got)
	_, err = bv.Symm(bv.Right, bv.Lower, a, b, c)
	refused(t, err, bv.ErrShape, "A", "3×3, but C has 2 columns")
	_, err = bv.Symm(bv.Left, bv.Lower, op(a, bv.Trans), b, c)
	refused(t, err, bv.ErrShape, "A", "a symmetric matrix takes no operation")
	_, err = bv.Symm(bv.Left, bv.Lower, a, row(1, 20, 0, 3, 2, 2), c)
	refused(t, err, bv.ErrShape, "B", "B is row-major but C is column-major")
	_, err = bv.Symm(bv.Left, bv.Lower, a, b, col(1, 20, 2, 3, 2, 3))
	refused(t, err, bv.ErrAlias, "C", "C overlaps B")
	_, err = bv.Symm(bv.Left, bv.Lower, a, b, col(0, 20, 2, 3, 2, 3))
	refused(t, err, bv.ErrAlias, "C", "C overlaps A")
	_, err = bv.Symm(bv.Left, bv.Lower, a, b, op(c, bv.Trans))
	refused(t, err, bv.ErrShape, "C", "the result takes no operation")

	sa, sc := col(0, 20, 0, 3, 5, 3), col(2, 20, 0, 3, 3, 4)
	sg, err := bv.Syrk(bv.Upper, sa, sc)
	require.NoError(t, err)
	assert.Equal(t, bv.SyrkArgs{Uplo: upper, Trans: opN, N: 3, K: 5, LDA: 3, LDC: 4}, sg)
	sg, err = bv.Syrk(bv.Upper, row(0, 20, 0, 3, 5, 5), row(2, 20, 0, 3, 3, 4))
	require.NoError(t, err)
	assert.Equal(t, bv.SyrkArgs{Uplo: lower, Trans: opT, N: 3, K: 5, LDA: 5, LDC: 4}, sg)
	_, err = bv.Syrk(bv.Upper, op(sa, bv.ConjTrans), sc)
	refused(t, err, bv.ErrShape, "A", "Herk")
	_, err = bv.Syrk(bv.Upper, op(sa, bv.Trans), sc)
	refused(t, err, bv.ErrShape, "A", "op(A) has 5 rows, but C is 3×3 (n)")
	_, err = bv.Syrk(bv.Upper, sa, col(2, 20, 0, 3, 2, 4))
	refused(t, err, bv.ErrShape, "C", "3×2 is not square")
	_, err = bv.Syrk(bv.Upper, sa, col(0, 20, 2, 3, 3, 4))
	refused(t, err, bv.ErrAlias, "C", "C overlaps A")
}

func TestLevel3Needs64(t *testing.T) {
	const big = math.MaxInt32 + 1
	g, err := bv.Syrk(bv.Lower, col(0, big, 0, 1, big, 1), col(1, 1, 0, 1, 1, 1))
	require.NoError(t, err)
	assert.True(t, g.Needs64, "k beyond int32")
	s, err := bv.Symm(bv.Left, bv.Lower, col(0, 1, 0, 1, 1, 1), col(1, big, 0, 1, big, 1), col(2, big, 0, 1, big, 1))
	require.NoError(t, err)
	assert.True(t, s.Needs64)
}
