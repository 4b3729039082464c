package blasview_test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	bv "github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
)

// batchesIn checks count batches of a column-major r×c matrix at off +
// i*stride as cuBLAS addresses them: the last batch's last element with
// math/big, every element when few. It returns the elements of each batch.
func batchesIn(t *testing.T, name string, off, stride, count, r, c, ld, n int64) [][]int64 {
	t.Helper()
	require.GreaterOrEqual(t, stride, int64(0), name)
	if count == 0 || r == 0 || c == 0 {
		storedIn(t, name, off, r, c, ld, n)
		return nil
	}
	last := new(big.Int).Mul(big.NewInt(count-1), big.NewInt(stride))
	last.Add(last, new(big.Int).Mul(big.NewInt(c-1), big.NewInt(ld)))
	last.Add(last, big.NewInt(off+r-1))
	require.Negative(t, last.Cmp(big.NewInt(n)), "%s: the last batch's last element %v of a buffer of %d", name, last, n)
	if count > 64 || r*c > limit/64 {
		storedIn(t, name, off, r, c, ld, n)
		return nil
	}
	out := make([][]int64, count)
	for i := range count {
		out[i] = storedIn(t, name, off+i*stride, r, c, ld, n)
	}
	return out
}

func FuzzGemmStridedBatched(f *testing.F) {
	f.Add(int64(12), int64(0), int64(2), int64(2), int64(2), uint8(0), uint8(0),
		int64(8), int64(0), int64(2), int64(2), int64(2), uint8(0), uint8(0),
		int64(12), int64(0), int64(2), int64(2), int64(2), uint8(0), uint8(0),
		int64(4), int64(0), int64(4), int64(3), uint8(0))
	f.Fuzz(func(t *testing.T, na, oa, ra, ca, la int64, lya, opa uint8, nb, ob, rb, cb, lb int64, lyb, opb uint8,
		nc, oc, rc, cc, lc int64, lyc, opc uint8, sa, sb, sc, count int64, share uint8) {
		a := fuzzMatrix(0, share, na, oa, ra, ca, la, lya, opa)
		b := fuzzMatrix(1, share, nb, ob, rb, cb, lb, lyb, opb)
		c := fuzzMatrix(2, share, nc, oc, rc, cc, lc, lyc, opc)
		g, err := bv.GemmStridedBatched(a, b, c, sa, sb, sc, count)
		if err != nil {
			var e *bv.Error
			require.ErrorAs(t, err, &e)
			return
		}
		require.GreaterOrEqual(t, g.Count, int64(0))
		fits32(t, g.Needs64, g.M, g.N, g.K, g.LDA, g.LDB, g.LDC, g.Count)
		if g.Swapped {
			a, b = b, a
		}
		ar, ac := g.M, g.K
		if g.TransA != cublasraw.CUBLAS_OP_N {
			ar, ac = ac, ar
		}
		br, bc := g.K, g.N
		if g.TransB != cublasraw.CUBLAS_OP_N {
			br, bc = bc, br
		}
		pa := batchesIn(t, "A", g.OffA, g.StrideA, g.Count, ar, ac, g.LDA, a.Buf.Len)
		pb := batchesIn(t, "B", g.OffB, g.StrideB, g.Count, br, bc, g.LDB, b.Buf.Len)
		pc := batchesIn(t, "C", g.OffC, g.StrideC, g.Count, g.M, g.N, g.LDC, c.Buf.Len)
		if len(pc) == 0 {
			return
		}
		var all []int64
		for _, batch := range pc {
			disjoint(t, "C batches", batch, all)
			all = append(all, batch...)
		}
		if g.K == 0 {
			return
		}
		if a.Buf.Addr == c.Buf.Addr {
			for _, in := range pa {
				disjoint(t, "C and A", all, in)
			}
		}
		if b.Buf.Addr == c.Buf.Addr {
			for _, in := range pb {
				disjoint(t, "C and B", all, in)
			}
		}
	})
}
