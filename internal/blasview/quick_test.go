package blasview_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bv "github.com/purecuda/cuda/internal/blasview"
)

// QuickGemm's promise: true only where Gemm accepts, with Gemm's very
// arguments. quickAgrees checks it for one call, and reports whether the
// quick path took it.
func quickAgrees(t *testing.T, a, b, c bv.Matrix) bool {
	t.Helper()
	var q bv.GemmArgs
	if !bv.QuickGemm(&a, &b, &c, &q) {
		return false
	}
	g, err := bv.Gemm(a, b, c)
	require.NoError(t, err, "QuickGemm accepted what Gemm refuses:\nA %+v\nB %+v\nC %+v", a, b, c)
	require.Equal(t, g, q, "QuickGemm's arguments differ from Gemm's:\nA %+v\nB %+v\nC %+v", a, b, c)
	return true
}

// edgy draws a value near the limits QuickGemm and Gemm test, or a small one.
func edgy(r *rand.Rand) int64 {
	vals := []int64{-1, 0, 1, 2, 3, 4, 7, 8, 64, 1<<31 - 2, 1<<31 - 1, 1 << 31, 1<<31 + 1, 1 << 40, 1<<40 - 1, 1<<62 + 3, math.MaxInt64, math.MinInt64}
	if r.IntN(3) == 0 {
		return vals[r.IntN(len(vals))]
	}
	return int64(r.IntN(9))
}

// TestQuickGemmAgreesWithGemm: over random operands, small and at every
// limit, in every layout, operation and sharing of buffers, QuickGemm
// never accepts what Gemm refuses and always returns Gemm's arguments;
// and it does take most of the ordinary calls.
func TestQuickGemmAgreesWithGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// ordinary is a consistent product of small operands in separate
	// buffers, in any layouts, with any operations but the conjugate
	// transpose.
	ordinary := func() (a, b, c bv.Matrix) {
		m, n, k := int64(1+r.IntN(70)), int64(1+r.IntN(70)), int64(1+r.IntN(70))
		mk := func(i int, rows, cols int64, op bv.Op) bv.Matrix {
			if op == bv.Trans {
				rows, cols = cols, rows
			}
			l := bv.Layout(r.IntN(2))
			sr := rows
			if l == bv.RowMajor {
				sr = cols
			}
			ld := sr + int64(r.IntN(3))
			off := int64(r.IntN(5))
			return bv.Matrix{Buf: bv.Buffer{Len: off + ld*max(rows, cols), Addr: uint64(i) * region, Elem: 4},
				Offset: off, Rows: rows, Cols: cols, LD: ld, Layout: l, Op: op}
		}
		return mk(0, m, k, bv.Op(r.IntN(2))), mk(1, k, n, bv.Op(r.IntN(2))), mk(2, m, n, bv.NoTrans)
	}
	for range 20_000 {
		a, b, c := ordinary()
		require.True(t, quickAgrees(t, a, b, c), "an ordinary call took the slow path:\nA %+v\nB %+v\nC %+v", a, b, c)
	}

	// Ordinary calls with one to three fields pushed to a limit, a
	// buffer shared or moved: QuickGemm may decline, never disagree.
	mutate := func(m *bv.Matrix) {
		switch r.IntN(11) {
		case 0:
			m.Buf.Len = edgy(r)
		case 1:
			m.Offset = edgy(r)
		case 2:
			m.Rows = edgy(r)
		case 3:
			m.Cols = edgy(r)
		case 4:
			m.LD = edgy(r)
		case 5:
			m.Layout = bv.Layout(r.IntN(3))
		case 6:
			m.Op = bv.Op(r.IntN(4))
		case 7:
			m.Buf.Elem = []int64{0, 1, 2, 8, 16, 17, -1}[r.IntN(7)]
		case 8:
			m.Buf.Addr = []uint64{0, 1<<56 - 64, 1 << 56, math.MaxInt64, 1 << 63}[r.IntN(5)]
		case 9:
			m.Buf.Addr += uint64(r.IntN(2048)) // near another operand of its region
		default:
			m.Buf.Addr = 0 // A's region: possibly overlapping
		}
	}
	quick, declined := 0, 0
	for range 400_000 {
		a, b, c := ordinary()
		ops := []*bv.Matrix{&a, &b, &c}
		for range 1 + r.IntN(3) {
			mutate(ops[r.IntN(3)])
		}
		if quickAgrees(t, a, b, c) {
			quick++
		} else {
			declined++
		}
	}
	t.Logf("of the altered calls, the quick path took %d and left %d to Gemm", quick, declined)
	assert.Positive(t, quick)
	assert.Positive(t, declined)
}

// TestQuickGemmLeavesOverlapsToGemm: C overlapping A as intervals (even
// when Gemm's exact check finds no shared element) and empty operands go
// to Gemm.
func TestQuickGemmLeavesOverlapsToGemm(t *testing.T) {
	a := col(0, 64, 0, 4, 4, 8) // columns at 0-3, 8-11, ...
	b := col(1, 16, 0, 4, 4, 4)
	c := col(0, 64, 4, 4, 4, 8) // interleaved with A: no shared element
	var g bv.GemmArgs
	assert.False(t, bv.QuickGemm(&a, &b, &c, &g))
	_, err := bv.Gemm(a, b, c)
	require.NoError(t, err, "Gemm's exact check accepts the interleaving")
	empty := col(2, 16, 0, 0, 4, 1)
	assert.False(t, bv.QuickGemm(&a, &b, &empty, &g))
	conj := op(col(1, 16, 0, 4, 4, 4), bv.ConjTrans)
	c = col(2, 16, 0, 4, 4, 4)
	assert.False(t, bv.QuickGemm(&a, &conj, &c, &g))
}

// FuzzQuickGemm is TestQuickGemmAgreesWithGemm's promise over the fuzzer's
// operands.
func FuzzQuickGemm(f *testing.F) {
	f.Add(int64(12), int64(0), int64(4), int64(3), int64(4), uint8(0), uint8(0),
		int64(6), int64(0), int64(3), int64(2), int64(3), uint8(0), uint8(0),
		int64(8), int64(0), int64(4), int64(2), int64(4), uint8(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, na, oa, ra, ca, la int64, lya, opa uint8, nb, ob, rb, cb, lb int64, lyb, opb uint8,
		nc, oc, rc, cc, lc int64, lyc, opc, share uint8) {
		quickAgrees(t, fuzzMatrix(0, share, na, oa, ra, ca, la, lya, opa), fuzzMatrix(1, share, nb, ob, rb, cb, lb, lyb, opb),
			fuzzMatrix(2, share, nc, oc, rc, cc, lc, lyc, opc))
	})
}

// BenchmarkQuickGemm beside BenchmarkGemmChecks: the checks of a 64×64×64
// product.
func BenchmarkQuickGemm(b *testing.B) {
	A, B, C := col(0, 4096, 0, 64, 64, 64), col(1, 4096, 0, 64, 64, 64), col(2, 4096, 0, 64, 64, 64)
	var g bv.GemmArgs
	for range b.N {
		if !bv.QuickGemm(&A, &B, &C, &g) {
			b.Fatal("slow path")
		}
	}
}

func BenchmarkGemmChecks(b *testing.B) {
	A, B, C := col(0, 4096, 0, 64, 64, 64), col(1, 4096, 0, 64, 64, 64), col(2, 4096, 0, 64, 64, 64)
	for range b.N {
		if _, err := bv.Gemm(A, B, C); err != nil {
			b.Fatal(err)
		}
	}
}
