package blasview_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bv "github.com/purecuda/cuda/internal/blasview"
)

// Operands of a test live 2^40 bytes apart, so that only views of one region
// can overlap.
const region = 1 << 40

func buf(at int, n int64) bv.Buffer { return bv.Buffer{Len: n, Addr: uint64(at) * region, Elem: 1} }

func col(at int, n, off, rows, cols, ld int64) bv.Matrix {
	return bv.Matrix{Buf: buf(at, n), Offset: off, Rows: rows, Cols: cols, LD: ld}
}

func row(at int, n, off, rows, cols, ld int64) bv.Matrix {
	m := col(at, n, off, rows, cols, ld)
	m.Layout = bv.RowMajor
	return m
}

func op(m bv.Matrix, o bv.Op) bv.Matrix { m.Op = o; return m }

func vec(at int, n, off, count, inc int64) bv.Vector {
	return bv.Vector{Buf: buf(at, n), Offset: off, N: count, Inc: inc}
}

// refused checks that err is a refusal of kind naming the operand, with
// msg in its message.
func refused(t *testing.T, err error, kind error, operand, msg string) {
	t.Helper()
	require.Error(t, err)
	var e *bv.Error
	require.True(t, errors.As(err, &e), "%T", err)
	assert.ErrorIs(t, err, kind)
	assert.Equal(t, operand, e.Operand, "%v", err)
	assert.Contains(t, err.Error(), msg)
}
