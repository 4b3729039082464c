package blasview_test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bv "github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
)

// The fuzz targets check what the checks promise, from the arguments
// alone: every element an accepted call makes cuBLAS touch lies in its
// buffer (computed with math/big, so that no overflow can hide one, and
// enumerated one by one for small sizes), the arguments are ones cuBLAS
// itself accepts (ld >= max(1, rows), sizes in int32 unless Needs64), and
// an output shares no element with the inputs of its buffer. Seeds are in
// testdata/fuzz.

// limit caps the elements enumerated one by one.
const limit = 1 << 12

// region of operand i, or of operand 0 when the bit i of share is set:
// shared buffers exercise the alias checks.
func at(i int, share uint8) int {
	if share&(1<<i) != 0 {
		return 0
	}
	return i
}

// stored checks a column-major r×c matrix at off with ld in a buffer of n
// elements as cuBLAS would address it, and returns its elements when few.
func storedIn(t *testing.T, name string, off, r, c, ld, n int64) []int64 {
	t.Helper()
	require.GreaterOrEqual(t, r, int64(0), name)
	require.GreaterOrEqual(t, c, int64(0), name)
	require.GreaterOrEqual(t, ld, max(1, r), "%s: cuBLAS needs ld >= max(1, rows)", name)
	require.GreaterOrEqual(t, off, int64(0), name)
	if r == 0 || c == 0 {
		require.LessOrEqual(t, off, n, name)
		return nil
	}
	last := new(big.Int).Mul(big.NewInt(c-1), big.NewInt(ld))
	last.Add(last, big.NewInt(r-1+off)) // r-1+off: both below n, no overflow
	require.Negative(t, last.Cmp(big.NewInt(n)), "%s: last element %v of a buffer of %d", name, last, n)
	if r*c > limit { // r*c <= n: no overflow
		return nil
	}
	var out []int64
	for j := range c {
		for i := range r {
			p := off + i + j*ld
			require.True(t, p >= 0 && p < n, "%s: element (%d,%d) at %d of %d", name, i, j, p, n)
			out = append(out, p)
		}
	}
	return out
}

// vectorIn does the same for a BLAS vector.
func vectorIn(t *testing.T, name string, off, count, inc, n int64) []int64 {
	t.Helper()
	require.NotZero(t, inc, name)
	require.GreaterOrEqual(t, count, int64(0), name)
	require.GreaterOrEqual(t, off, int64(0), name)
	if count == 0 {
		require.LessOrEqual(t, off, n, name)
		return nil
	}
	abs := new(big.Int).Abs(big.NewInt(inc))
	last := new(big.Int).Mul(big.NewInt(count-1), abs)
	last.Add(last, big.NewInt(off))
	require.Negative(t, last.Cmp(big.NewInt(n)), "%s: last element %v of a buffer of %d", name, last, n)
	if count > limit {
		return nil
	}
	var out []int64
	for k := range count {
		p := off + k*abs.Int64()
		require.True(t, p >= 0 && p < n, "%s: element %d at %d of %d", name, k, p, n)
		out = append(out, p)
	}
	return out
}

func disjoint(t *testing.T, what string, out, in []int64) {
	t.Helper()
	seen := map[int64]bool{}
	for _, p := range in {
		seen[p] = true
	}
	for _, p := range out {
		require.False(t, seen[p], "%s: element %d is read and written", what, p)
	}
}

func fits32(t *testing.T, needs64 bool, vs ...int64) {
	t.Helper()
	if needs64 {
		return
	}
	for _, v := range vs {
		require.True(t, v >= -1<<31 && v < 1<<31, "%d needs the _64 API, but Needs64 is false", v)
	}
}

func fuzzMatrix(i int, share uint8, n, off, rows, cols, ld int64, layout, op uint8) bv.Matrix {
	return bv.Matrix{Buf: buf(at(i, share), n), Offset: off, Rows: rows, Cols: cols, LD: ld, Layout: bv.Layout(layout % 3), Op: bv.Op(op % 4)}
}

func FuzzGemm(f *testing.F) {
	f.Add(int64(12), int64(0), int64(4), int64(3), int64(4), uint8(0), uint8(0),
		int64(6), int64(0), int64(3), int64(2), int64(3), uint8(0), uint8(0),
		int64(8), int64(0), int64(4), int64(2), int64(4), uint8(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, na, oa, ra, ca, la int64, lya, opa uint8, nb, ob, rb, cb, lb int64, lyb, opb uint8,
		nc, oc, rc, cc, lc int64, lyc, opc, share uint8) {
		a := fuzzMatrix(0, share, na, oa, ra, ca, la, lya, opa)
		b := fuzzMatrix(1, share, nb, ob, rb, cb, lb, lyb, opb)
		c := fuzzMatrix(2, share, nc, oc, rc, cc, lc, lyc, opc)
		g, err := bv.Gemm(a, b, c)
		if err != nil {
			var e *bv.Error
			require.ErrorAs(t, err, &e)
			assert.NotEmpty(t, e.Detail)
			return
		}
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
		fits32(t, g.Needs64, g.M, g.N, g.K, g.LDA, g.LDB, g.LDC)
		pa := storedIn(t, "A", g.OffA, ar, ac, g.LDA, a.Buf.Len)
		pb := storedIn(t, "B", g.OffB, br, bc, g.LDB, b.Buf.Len)
		pc := storedIn(t, "C", g.OffC, g.M, g.N, g.LDC, c.Buf.Len)
		if g.K == 0 {
			pa, pb = nil, nil
		}
		if a.Buf.Addr == c.Buf.Addr {
			disjoint(t, "C and A", pc, pa)
		}
		if b.Buf.Addr == c.Buf.Addr {
			disjoint(t, "C and B", pc, pb)
		}
	})
}

func fuzzVector(i int, share uint8, n, off, count, inc int64) bv.Vector {
	return bv.Vector{Buf: buf(at(i, share), n), Offset: off, N: count, Inc: inc}
}

func FuzzGemv(f *testing.F) {
	f.Add(int64(12), int64(0), int64(3), int64(4), int64(3), uint8(0), uint8(0),
		int64(4), int64(0), int64(4), int64(1), int64(3), int64(0), int64(3), int64(1), uint8(0))
	f.Fuzz(func(t *testing.T, na, oa, ra, ca, la int64, lya, opa uint8,
		nx, ox, cx, ix, ny, oy, cy, iy int64, share uint8) {
		a := fuzzMatrix(0, share, na, oa, ra, ca, la, lya, opa)
		x := fuzzVector(1, share, nx, ox, cx, ix)
		y := fuzzVector(2, share, ny, oy, cy, iy)
		g, err := bv.Gemv(a, x, y)
		if err != nil {
			var e *bv.Error
			require.ErrorAs(t, err, &e)
			return
		}
		fits32(t, g.Needs64, g.M, g.N, g.LDA, g.IncX, g.IncY)
		rows, cols := g.M, g.N
		if g.Trans != cublasraw.CUBLAS_OP_N {
			rows, cols = cols, rows
		}
		pa := storedIn(t, "A", g.OffA, g.M, g.N, g.LDA, a.Buf.Len)
		px := vectorIn(t, "x", g.OffX, cols, g.IncX, x.Buf.Len)
		py := vectorIn(t, "y", g.OffY, rows, g.IncY, y.Buf.Len)
		if a.Buf.Addr == y.Buf.Addr {
			disjoint(t, "y and A", py, pa)
		}
		if x.Buf.Addr == y.Buf.Addr {
			disjoint(t, "y and x", py, px)
		}
	})
}

func FuzzVector(f *testing.F) {
	f.Add(uint8(0), int64(10), int64(1), int64(4), int64(3), int64(10), int64(3), int64(4), int64(-2), uint8(0))
	f.Fuzz(func(t *testing.T, call uint8, nx, ox, cx, ix, ny, oy, cy, iy int64, share uint8) {
		x := fuzzVector(0, share, nx, ox, cx, ix)
		y := fuzzVector(1, share, ny, oy, cy, iy)
		r := fuzzVector(2, share, ny, oy, 1, 1) // a device result
		var (
			g        bv.VecArgs
			err      error
			pair     = true
			writesY  = true
			name     string
			positive bool
		)
		switch call % 8 {
		case 0:
			name = "Axpy"
			g, err = bv.Axpy(x, y)
		case 1:
			name = "Copy"
			g, err = bv.Copy(x, y)
		case 2:
			name = "Swap"
			g, err = bv.Swap(x, y)
		case 3:
			name, writesY = "Dot", false
			g, err = bv.Dot(x, y, &r)
		default:
			name, pair, positive = []string{"Scal", "Nrm2", "Asum", "Iamax"}[call%8-4], false, true
			g, err = map[string]func() (bv.VecArgs, error){
				"Scal":  func() (bv.VecArgs, error) { return bv.Scal(x) },
				"Nrm2":  func() (bv.VecArgs, error) { return bv.Nrm2(x, &r) },
				"Asum":  func() (bv.VecArgs, error) { return bv.Asum(x, nil) },
				"Iamax": func() (bv.VecArgs, error) { return bv.Iamax(x, &r) },
			}[name]()
		}
		if err != nil {
			var e *bv.Error
			require.ErrorAs(t, err, &e)
			return
		}
		fits32(t, g.Needs64, g.N, g.IncX, g.IncY)
		if positive {
			require.Positive(t, g.IncX, name)
		}
		px := vectorIn(t, name+" x", g.OffX, g.N, g.IncX, x.Buf.Len)
		if g.DevResult {
			pr := vectorIn(t, name+" result", g.OffResult, 1, 1, r.Buf.Len)
			if x.Buf.Addr == r.Buf.Addr {
				disjoint(t, name+" result and x", pr, px)
			}
			if pair && y.Buf.Addr == r.Buf.Addr {
				disjoint(t, name+" result and y", pr, vectorIn(t, name+" y", g.OffY, g.N, g.IncY, y.Buf.Len))
			}
		}
		if !pair {
			return
		}
		py := vectorIn(t, name+" y", g.OffY, g.N, g.IncY, y.Buf.Len)
		// y may be x itself: element k of each at one place (any
		// increments for a single element).
		self := g.OffX == g.OffY && (g.IncX == g.IncY || g.N <= 1)
		if writesY && x.Buf.Addr == y.Buf.Addr && !self {
			disjoint(t, name+" y and x", py, px)
		}
	})
}
