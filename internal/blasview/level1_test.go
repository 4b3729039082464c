package blasview_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bv "github.com/purecuda/cuda/internal/blasview"
)

func TestVectorPairs(t *testing.T) {
	x, y := vec(0, 12, 1, 4, 3), vec(1, 10, 3, 4, -2)
	for name, f := range map[string]func(x, y bv.Vector) (bv.VecArgs, error){
		"Axpy": bv.Axpy, "Copy": bv.Copy, "Swap": bv.Swap,
		"Dot": func(x, y bv.Vector) (bv.VecArgs, error) { return bv.Dot(x, y, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			got, err := f(x, y)
			require.NoError(t, err)
			assert.Equal(t, bv.VecArgs{N: 4, OffX: 1, IncX: 3, OffY: 3, IncY: -2}, got)
			_, err = f(x, vec(1, 10, 0, 3, 1))
			refused(t, err, bv.ErrShape, "y", "length 3, but x has 4")
			_, err = f(vec(0, 10, 0, 4, 0), y)
			refused(t, err, bv.ErrShape, "x", "increment is 0")
			_, err = f(x, vec(1, 10, 0, -1, 1))
			refused(t, err, bv.ErrShape, "y", "length -1 is negative")
			_, err = f(vec(0, 10, 2, 4, 3), y)
			refused(t, err, bv.ErrOutOfBounds, "x", "reach 11, past the end of its buffer of 10")
			_, err = f(x, vec(1, 10, 4, 4, -2))
			refused(t, err, bv.ErrOutOfBounds, "y", "reach 10")
			_, err = f(x, vec(1, 10, -2, 4, -2))
			refused(t, err, bv.ErrOutOfBounds, "y", "offset -2 is negative")
			_, err = f(vec(0, 10, 1, 4, math.MaxInt64), y)
			refused(t, err, bv.ErrOutOfBounds, "x", "beyond 2^63")
			_, err = f(vec(0, 10, 1, 4, math.MinInt64), y)
			refused(t, err, bv.ErrOutOfBounds, "x", "beyond 2^63")
			_, err = f(vec(0, 10, 11, 0, 1), vec(1, 10, 0, 0, 1))
			refused(t, err, bv.ErrOutOfBounds, "x", "offset 11 is past the end")
			got, err = f(vec(0, 10, 10, 0, 1), vec(1, 10, 0, 0, -1))
			require.NoError(t, err, "empty: nothing touched")
			assert.Zero(t, got.N)
			got, err = f(x, x)
			require.NoError(t, err, "y may be x itself")
			assert.Equal(t, x.Offset, got.OffY)
		})
	}
	for _, f := range []func(x, y bv.Vector) (bv.VecArgs, error){bv.Axpy, bv.Copy, bv.Swap} {
		_, err := f(x, vec(0, 14, 4, 4, 3))
		refused(t, err, bv.ErrAlias, "y", "y overlaps x in memory without being x")
		_, err = f(x, bv.Vector{Buf: x.Buf, Offset: 1, N: 4, Inc: -3})
		refused(t, err, bv.ErrAlias, "y", "without being x") // the same elements, the other way round
		_, err = f(x, vec(0, 14, 2, 4, 3))
		require.NoError(t, err, "between x's elements")
	}
	_, err := bv.Dot(x, bv.Vector{Buf: x.Buf, Offset: 1, N: 4, Inc: -3}, nil)
	require.NoError(t, err, "Dot reads both: they may overlap")

	got, err := bv.Dot(x, y, &bv.Vector{Buf: buf(3, 2), Offset: 1, N: 1, Inc: 1})
	require.NoError(t, err)
	assert.True(t, got.DevResult)
	assert.Equal(t, int64(1), got.OffResult)
	_, err = bv.Dot(x, y, &bv.Vector{Buf: buf(3, 2), Offset: 2, N: 1, Inc: 1})
	refused(t, err, bv.ErrOutOfBounds, "result", "past the end")
	_, err = bv.Dot(x, y, &bv.Vector{Buf: buf(3, 2), N: 2, Inc: 1})
	refused(t, err, bv.ErrShape, "result", "a result is one element")
	_, err = bv.Dot(x, y, &bv.Vector{Buf: x.Buf, Offset: 4, N: 1, Inc: 1})
	refused(t, err, bv.ErrAlias, "result", "overlaps an input")
}

func TestVectorSingles(t *testing.T) {
	x := vec(0, 12, 1, 4, 3)
	for name, f := range map[string]func(x bv.Vector, r *bv.Vector) (bv.VecArgs, error){
		"Nrm2": bv.Nrm2, "Asum": bv.Asum, "Iamax": bv.Iamax,
		"Scal": func(x bv.Vector, r *bv.Vector) (bv.VecArgs, error) {
			if r != nil {
				return bv.VecArgs{}, bv.ErrShape
			}
			return bv.Scal(x)
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := f(x, nil)
			require.NoError(t, err)
			assert.Equal(t, bv.VecArgs{N: 4, OffX: 1, IncX: 3}, got)
			_, err = f(vec(0, 10, 9, 4, -3), nil)
			refused(t, err, bv.ErrShape, "x", "increment -3 is negative: "+name+" needs a positive increment")
			_, err = f(vec(0, 10, 1, 4, 0), nil)
			refused(t, err, bv.ErrShape, "x", "increment is 0")
			_, err = f(vec(0, 9, 0, 4, 3), nil)
			refused(t, err, bv.ErrOutOfBounds, "x", "reach 9")
			_, err = f(vec(0, 9, 0, -4, 3), nil)
			refused(t, err, bv.ErrShape, "x", "length -4 is negative")
			_, err = f(bv.Vector{Buf: bv.Buffer{Len: -1}, N: 1, Inc: 1}, nil)
			refused(t, err, bv.ErrShape, "x", "buffer length -1 is negative")
		})
	}
	got, err := bv.Iamax(x, &bv.Vector{Buf: bv.Buffer{Len: 1, Addr: 5 * region, Elem: 4}, N: 1, Inc: 1})
	require.NoError(t, err)
	assert.True(t, got.DevResult)
	_, err = bv.Nrm2(x, &bv.Vector{Buf: x.Buf, Offset: 7, N: 1, Inc: 1})
	refused(t, err, bv.ErrAlias, "result", "overlaps an input")
	_, err = bv.Nrm2(x, &bv.Vector{Buf: x.Buf, Offset: 8, N: 1, Inc: 1})
	require.NoError(t, err, "between x's elements")

	big, err := bv.Scal(bv.Vector{Buf: buf(0, math.MaxInt32+2), N: math.MaxInt32 + 1, Inc: 1})
	require.NoError(t, err)
	assert.True(t, big.Needs64)
	big, err = bv.Scal(bv.Vector{Buf: buf(0, math.MaxInt32+2), N: 1, Inc: math.MaxInt32 + 1})
	require.NoError(t, err)
	assert.True(t, big.Needs64, "an increment beyond int32")
}
