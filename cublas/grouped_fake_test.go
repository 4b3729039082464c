//go:build linux

package cublas_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/internal/faketest"
)

// groupedEveryWay runs GemmGrouped for T with three groups of different
// shapes, layouts, operations and scalars (the second group empty of
// products in one dimension), against refGemmC per product.
func groupedEveryWay[T cublas.Real](t *testing.T, e *fenv) {
	type spec struct {
		m, n, k, count int
		la, lb, lc     cublas.Layout
		oa, ob         cublas.Op
		sub            bool
		alpha, beta    T
	}
	specs := []spec{
		{2, 3, 2, 2, cublas.ColMajor, cublas.ColMajor, cublas.ColMajor, cublas.NoTrans, cublas.NoTrans, false, 1, 0},
		{3, 2, 4, 3, cublas.RowMajor, cublas.ColMajor, cublas.RowMajor, cublas.Trans, cublas.NoTrans, true, 2, -1},
		{1, 4, 3, 1, cublas.RowMajor, cublas.RowMajor, cublas.ColMajor, cublas.NoTrans, cublas.Trans, false, -1, 3},
	}
	var groups []cublas.GemmGroup[T]
	var ah, bh, ch [][][]T
	for gi, sp := range specs {
		ar, ac := sp.m, sp.k
		if sp.oa != cublas.NoTrans {
			ar, ac = sp.k, sp.m
		}
		br, bc := sp.k, sp.n
		if sp.ob != cublas.NoTrans {
			br, bc = sp.n, sp.k
		}
		g := cublas.GemmGroup[T]{Alpha: sp.alpha, Beta: sp.beta}
		var xa, xb, xc [][]T
		for i := 0; i < sp.count; i++ {
			a, x := shape[T](t, e.s, ar, ac, sp.la, sp.oa, sp.sub, 10*gi+i)
			b, y := shape[T](t, e.s, br, bc, sp.lb, sp.ob, sp.sub, 100+10*gi+i)
			c, z := shape[T](t, e.s, sp.m, sp.n, sp.lc, cublas.NoTrans, sp.sub, 200+10*gi+i)
			g.A, g.B, g.C = append(g.A, a), append(g.B, b), append(g.C, c)
			xa, xb, xc = append(xa, x), append(xb, y), append(xc, z)
		}
		groups = append(groups, g)
		ah, bh, ch = append(ah, xa), append(bh, xb), append(ch, xc)
	}
	before := opsRun(t)
	require.NoError(t, cublas.GemmGrouped(e.h, groups))
	for gi, g := range groups {
		for i := range g.C {
			assert.Equal(t, refGemmC(g.Alpha, g.A[i], ah[gi][i], g.B[i], bh[gi][i], g.Beta, g.C[i], ch[gi][i]), down(t, e.s, g.C[i].Buf),
				"%T group %d product %d", *new(T), gi, i)
		}
	}
	assert.Equal(t, before+int64(len(groups)), opsRun(t), "the fake runs a group as one batched gemm")
}

// TestGemmGroupedFromFake: grouped GEMMs of float32 and float64 against
// plain Go; refusals name the problem by its number across the groups and
// reach no cuBLAS call; no groups, or groups of no products, do nothing.
func TestGemmGroupedFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	groupedEveryWay[float32](t, e)
	groupedEveryWay[float64](t, e)

	before := opsRun(t)
	require.NoError(t, cublas.GemmGrouped[float32](e.h, nil))
	require.NoError(t, cublas.GemmGrouped(e.h, []cublas.GemmGroup[float32]{{Alpha: 1}}))
	assert.Equal(t, before, opsRun(t), "nothing to compute, nothing queued")

	a, _ := shape[float32](t, e.s, 2, 2, cublas.ColMajor, cublas.NoTrans, false, 1)
	b, _ := shape[float32](t, e.s, 2, 2, cublas.ColMajor, cublas.NoTrans, false, 2)
	c, _ := shape[float32](t, e.s, 2, 2, cublas.ColMajor, cublas.NoTrans, false, 3)
	one := cublas.GemmGroup[float32]{Alpha: 1, A: []cublas.Matrix[float32]{a}, B: []cublas.Matrix[float32]{b}, C: []cublas.Matrix[float32]{c}}
	past := one
	past.A = []cublas.Matrix[float32]{{Buf: a.Buf, Offset: 1, Rows: 2, Cols: 2, LD: 2}}
	err := cublas.GemmGrouped(e.h, []cublas.GemmGroup[float32]{one, past})
	assert.ErrorIs(t, err, cublas.ErrOutOfBounds)
	assert.Contains(t, fmt.Sprint(err), "cublas: GemmGrouped: A[1]:")
	clash := one // the same C in two groups
	err = cublas.GemmGrouped(e.h, []cublas.GemmGroup[float32]{one, clash})
	assert.ErrorIs(t, err, cublas.ErrAlias)
	uneven := one
	uneven.C = nil
	err = cublas.GemmGrouped(e.h, []cublas.GemmGroup[float32]{one, uneven})
	assert.ErrorIs(t, err, cublas.ErrShape)
	assert.Contains(t, fmt.Sprint(err), "group 1")
	assert.Equal(t, before, opsRun(t), "refused calls queue nothing")
}
