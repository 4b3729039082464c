package blasview_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bv "github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
)

// The triangular and symmetric calls, proved as Gemm is: the math on the
// views (their triangle, side and operation in the views' own terms)
// equals a column-major reference run on the mapped arguments alone.

type mat = [][]float64

func zeros(r, c int64) mat {
	m := make(mat, r)
	for i := range m {
		m[i] = make([]float64, c)
	}
	return m
}

func transpose(x mat, r, c int64) mat {
	t := zeros(c, r)
	for i := range r {
		for j := range c {
			t[j][i] = x[i][j]
		}
	}
	return t
}

func mul(x, y mat, r, k, c int64) mat {
	z := zeros(r, c)
	for i := range r {
		for j := range c {
			for l := range k {
				z[i][j] += x[i][l] * y[l][j]
			}
		}
	}
	return z
}

// triangle keeps x's lower (or upper) triangle, with ones on the diagonal
// for a unit one; symmetric mirrors it instead.
func triangle(x mat, n int64, lower, unit, symmetric bool) mat {
	t := zeros(n, n)
	for i := range n {
		for j := range n {
			in := (i >= j) == lower || i == j
			switch {
			case i == j && unit:
				t[i][j] = 1
			case in:
				t[i][j] = x[i][j]
			case symmetric:
				t[i][j] = x[j][i]
			}
		}
	}
	return t
}

// solve is x with t·x = b for a triangular t (forward or back
// substitution, whichever its zeros allow).
func solve(t mat, b []float64) []float64 {
	n := len(b)
	lower := true
	for i := range n {
		for j := i + 1; j < n; j++ {
			lower = lower && t[i][j] == 0
		}
	}
	x := make([]float64, n)
	for s := range n {
		i := s
		if !lower {
			i = n - 1 - s
		}
		v := b[i]
		for j := range n {
			if j != i {
				v -= t[i][j] * x[j]
			}
		}
		x[i] = v / t[i][i]
	}
	return x
}

// stored is the r×c column-major matrix at off with ld, read as C does.
func stored(d []float64, off, ld, r, c int64) mat {
	m := zeros(r, c)
	for i := range r {
		for j := range c {
			m[i][j] = d[off+i+j*ld]
		}
	}
	return m
}

func putStored(d []float64, off, ld int64, x mat) {
	for i := range x {
		for j := range x[i] {
			d[off+int64(i)+int64(j)*ld] = x[i][j]
		}
	}
}

func putView(d []float64, v bv.Matrix, x mat) {
	for i := range x {
		for j := range x[i] {
			d[v.At(int64(i), int64(j))] = x[i][j]
		}
	}
}

func rawOp(x mat, n int64, trans cublasraw.Operation) mat {
	if trans == cublasraw.CUBLAS_OP_N {
		return x
	}
	return transpose(x, n, n)
}

// nonsingular puts ±1 or ±2 on a square view's diagonal: exact divisions.
func (g gen) nonsingular(a bv.Matrix, d []float64) {
	for i := range a.Rows {
		d[a.At(i, i)] = float64([]int{-2, -1, 1, 2}[g.r.IntN(4)])
	}
}

func TestTrmmTrsmMappingMatchesRowMajorMath(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(9, 10))}
	for range 2000 {
		m, n := g.dim(), g.dim()
		side, uplo, diag := bv.Side(g.r.IntN(2)), bv.Uplo(g.r.IntN(2)), bv.Diag(g.r.IntN(2))
		k := m
		if side == bv.Right {
			k = n
		}
		a, ad := g.matrix(0, k, k)
		a.Op = g.op()
		g.nonsingular(a, ad)
		b, bd := g.matrix(1, m, n)
		c, _ := g.matrix(2, m, n)
		c.Layout, c.LD, c.Buf.Len = b.Layout, b.LD, b.Buf.Len // Trmm: B and C share a layout
		cd := g.data(c.Buf.Len)
		c.Offset = b.Offset

		tv := triangle(dense(bv.Matrix{Buf: a.Buf, Offset: a.Offset, Rows: k, Cols: k, LD: a.LD, Layout: a.Layout}, ad), k, uplo == bv.Lower, diag == bv.Unit, false)
		if a.Op == bv.Trans {
			tv = transpose(tv, k, k)
		}
		B := dense(b, bd)

		// Trmm: C = op(T)·B or B·op(T).
		args, err := bv.Trmm(side, uplo, diag, a, b, c)
		require.NoError(t, err)
		want, got := slices.Clone(cd), slices.Clone(cd)
		if side == bv.Left {
			putView(want, c, mul(tv, B, m, m, n))
		} else {
			putView(want, c, mul(B, tv, m, n, n))
		}
		ka := args.M
		if args.Side == cublasraw.CUBLAS_SIDE_RIGHT {
			ka = args.N
		}
		ts := rawOp(triangle(stored(ad, args.OffA, args.LDA, ka, ka), ka, args.Uplo == cublasraw.CUBLAS_FILL_MODE_LOWER, args.Diag == cublasraw.CUBLAS_DIAG_UNIT, false), ka, args.Trans)
		bs := stored(bd, args.OffB, args.LDB, args.M, args.N)
		if args.Side == cublasraw.CUBLAS_SIDE_LEFT {
			putStored(got, args.OffC, args.LDC, mul(ts, bs, args.M, args.M, args.N))
		} else {
			putStored(got, args.OffC, args.LDC, mul(bs, ts, args.M, args.N, args.N))
		}
		require.Equal(t, want, got, "Trmm A %+v B %+v C %+v side %d uplo %d args %+v", a, b, c, side, uplo, args)

		// Trsm: op(T)·X = B or X·op(T) = B, X over B.
		args, err = bv.Trsm(side, uplo, diag, a, b)
		require.NoError(t, err)
		want, got = slices.Clone(bd), slices.Clone(bd)
		var X mat
		if side == bv.Left {
			X = transpose(solveCols(tv, transpose(B, m, n), n), n, m)
		} else {
			X = solveCols(transpose(tv, k, k), B, m)
		}
		putView(want, b, X)
		ts = rawOp(triangle(stored(ad, args.OffA, args.LDA, ka, ka), ka, args.Uplo == cublasraw.CUBLAS_FILL_MODE_LOWER, args.Diag == cublasraw.CUBLAS_DIAG_UNIT, false), ka, args.Trans)
		if args.Side == cublasraw.CUBLAS_SIDE_LEFT {
			putStored(got, args.OffB, args.LDB, transpose(solveCols(ts, transpose(bs, args.M, args.N), args.N), args.N, args.M))
		} else {
			putStored(got, args.OffB, args.LDB, solveCols(transpose(ts, ka, ka), bs, args.M))
		}
		assert.InDeltaSlice(t, want, got, 1e-9, "Trsm A %+v B %+v side %d uplo %d args %+v", a, b, side, uplo, args)
	}
}

// solveCols solves t·x = r for each of the count right-hand sides r (rows
// of rhs) and returns the solutions as rows.
func solveCols(t mat, rhs mat, count int64) mat {
	out := make(mat, count)
	for i := range count {
		out[i] = solve(t, rhs[i])
	}
	return out
}

func TestSymmSyrkTrsvMappingMatchesRowMajorMath(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(11, 12))}
	for range 2000 {
		m, n := g.dim(), g.dim()
		side, uplo := bv.Side(g.r.IntN(2)), bv.Uplo(g.r.IntN(2))
		k := m
		if side == bv.Right {
			k = n
		}
		a, ad := g.matrix(0, k, k)
		b, _ := g.matrix(1, m, n)
		c, cd := g.matrix(2, m, n)
		b.Layout = c.Layout
		sb, sc := b.Stored()
		b.LD = max(b.LD, sb, 1)
		b.Buf.Len = b.Offset + (sc-1)*b.LD + sb
		if sb == 0 || sc == 0 {
			b.Buf.Len = b.Offset
		}
		bd := g.data(b.Buf.Len)

		// Symm: C = S·B + C or B·S + C.
		args, err := bv.Symm(side, uplo, a, b, c)
		require.NoError(t, err)
		S := triangle(dense(a, ad), k, uplo == bv.Lower, false, true)
		want, got := slices.Clone(cd), slices.Clone(cd)
		C := dense(c, cd)
		var P mat
		if side == bv.Left {
			P = mul(S, dense(b, bd), m, m, n)
		} else {
			P = mul(dense(b, bd), S, m, n, n)
		}
		for i := range m {
			for j := range n {
				want[c.At(i, j)] = P[i][j] + C[i][j]
			}
		}
		ka := args.M
		if args.Side == cublasraw.CUBLAS_SIDE_RIGHT {
			ka = args.N
		}
		Ss := triangle(stored(ad, args.OffA, args.LDA, ka, ka), ka, args.Uplo == cublasraw.CUBLAS_FILL_MODE_LOWER, false, true)
		bs, cs := stored(bd, args.OffB, args.LDB, args.M, args.N), stored(cd, args.OffC, args.LDC, args.M, args.N)
		var Ps mat
		if args.Side == cublasraw.CUBLAS_SIDE_LEFT {
			Ps = mul(Ss, bs, args.M, args.M, args.N)
		} else {
			Ps = mul(bs, Ss, args.M, args.N, args.N)
		}
		for i := range args.M {
			for j := range args.N {
				cs[i][j] += Ps[i][j]
			}
		}
		putStored(got, args.OffC, args.LDC, cs)
		require.Equal(t, want, got, "Symm A %+v B %+v C %+v args %+v", a, b, c, args)

		// Syrk: C += op(A)·op(A)ᵀ in uplo of the n×n C.
		sa, sad := g.opMatrix(0, n, m)
		sc2, scd := g.matrix(2, n, n)
		sargs, err := bv.Syrk(uplo, sa, sc2)
		require.NoError(t, err)
		want, got = slices.Clone(scd), slices.Clone(scd)
		OA := dense(sa, sad)
		for i := range n {
			for j := range n {
				if (i >= j) == (uplo == bv.Lower) || i == j {
					for l := range m {
						want[sc2.At(i, j)] += OA[i][l] * OA[j][l]
					}
				}
			}
		}
		ar, ac := sargs.N, sargs.K
		if sargs.Trans != cublasraw.CUBLAS_OP_N {
			ar, ac = ac, ar
		}
		OS := stored(sad, sargs.OffA, sargs.LDA, ar, ac)
		if sargs.Trans != cublasraw.CUBLAS_OP_N {
			OS = transpose(OS, ar, ac)
		}
		for i := range sargs.N {
			for j := range sargs.N {
				if (i >= j) == (sargs.Uplo == cublasraw.CUBLAS_FILL_MODE_LOWER) || i == j {
					for l := range sargs.K {
						got[sargs.OffC+i+j*sargs.LDC] += OS[i][l] * OS[j][l]
					}
				}
			}
		}
		require.Equal(t, want, got, "Syrk A %+v C %+v args %+v", sa, sc2, sargs)

		// Trsv: op(T)·x = b, x over b.
		diag := bv.Diag(g.r.IntN(2))
		ta, tad := g.matrix(0, k, k)
		ta.Op = g.op()
		g.nonsingular(ta, tad)
		x, xd := g.vector(1, k)
		targs, err := bv.Trsv(ta, uplo, diag, x)
		require.NoError(t, err)
		tv := triangle(dense(bv.Matrix{Buf: ta.Buf, Offset: ta.Offset, Rows: k, Cols: k, LD: ta.LD, Layout: ta.Layout}, tad), k, uplo == bv.Lower, diag == bv.Unit, false)
		if ta.Op == bv.Trans {
			tv = transpose(tv, k, k)
		}
		rhs := make([]float64, k)
		for i := range k {
			rhs[i] = xd[x.At(i)]
		}
		want, got = slices.Clone(xd), slices.Clone(xd)
		for i, v := range solve(tv, rhs) {
			want[x.At(int64(i))] = v
		}
		ts := rawOp(triangle(stored(tad, targs.OffA, targs.LDA, k, k), k, targs.Uplo == cublasraw.CUBLAS_FILL_MODE_LOWER, targs.Diag == cublasraw.CUBLAS_DIAG_UNIT, false), k, targs.Trans)
		for i := range k {
			rhs[i] = xd[vecAt(targs.OffX, targs.IncX, k, i)]
		}
		for i, v := range solve(ts, rhs) {
			got[vecAt(targs.OffX, targs.IncX, k, int64(i))] = v
		}
		assert.InDeltaSlice(t, want, got, 1e-9, "Trsv A %+v x %+v args %+v", ta, x, targs)
	}
}
