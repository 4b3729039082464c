package blasview_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	bv "github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/cublasraw"
)

// The tests here prove the mapping, not only the arithmetic: for random
// shapes, layouts, operations, leading dimensions, offsets and increments,
// the math written on the views (row-major or not, element (i, j) read
// through Matrix.At) and a plain column-major BLAS reference run on the
// mapped arguments alone must leave the buffers bit for bit equal.

// gen makes random views whose buffers hold small integers, so that the
// float64 arithmetic is exact.
type gen struct{ r *rand.Rand }

func (g gen) matrix(at int, rows, cols int64) (bv.Matrix, []float64) {
	m := bv.Matrix{Rows: rows, Cols: cols, Offset: g.r.Int64N(4), Layout: bv.Layout(g.r.IntN(2))}
	sr, sc := m.Stored()
	m.LD = max(1, sr) + g.r.Int64N(3)
	n := m.Offset + g.r.Int64N(3)
	if sr > 0 && sc > 0 {
		n += (sc-1)*m.LD + sr
	}
	m.Buf = buf(at, n)
	return m, g.data(n)
}

func (g gen) vector(at int, n int64) (bv.Vector, []float64) {
	v := bv.Vector{N: n, Offset: g.r.Int64N(3), Inc: g.r.Int64N(3) + 1}
	if g.r.IntN(2) == 0 {
		v.Inc = -v.Inc
	}
	l := v.Offset + g.r.Int64N(2)
	if n > 0 {
		l += (n-1)*max(v.Inc, -v.Inc) + 1
	}
	v.Buf = buf(at, l)
	return v, g.data(l)
}

func (g gen) data(n int64) []float64 {
	d := make([]float64, n)
	for i := range d {
		d[i] = float64(g.r.IntN(7) - 3)
	}
	return d
}

func (g gen) op() bv.Op { return bv.Op(g.r.IntN(2)) }

// opMatrix is a random view with a random operation whose op(view) is
// rows×cols.
func (g gen) opMatrix(at int, rows, cols int64) (bv.Matrix, []float64) {
	o := g.op()
	if o == bv.Trans {
		rows, cols = cols, rows
	}
	m, d := g.matrix(at, rows, cols)
	m.Op = o
	return m, d
}

func (g gen) dim() int64 { return g.r.Int64N(5) }

// dense is op(m) read from d through the view's own addressing.
func dense(m bv.Matrix, d []float64) [][]float64 {
	r, c := m.Rows, m.Cols
	if m.Op != bv.NoTrans {
		r, c = c, r
	}
	out := make([][]float64, r)
	for i := range out {
		out[i] = make([]float64, c)
		for j := range out[i] {
			if m.Op == bv.NoTrans {
				out[i][j] = d[m.At(int64(i), int64(j))]
			} else {
				out[i][j] = d[m.At(int64(j), int64(i))]
			}
		}
	}
	return out
}

// colAt is element (i, j) of the column-major matrix at off with ld lda,
// after trans, as a C programmer indexes it.
func colAt(trans cublasraw.Operation, d []float64, off, ld, i, j int64) float64 {
	if trans == cublasraw.CUBLAS_OP_N {
		return d[off+i+j*ld]
	}
	return d[off+j+i*ld]
}

// refGemm is a column-major BLAS gemm over flat buffers.
func refGemm(g bv.GemmArgs, a, b, c []float64, alpha, beta float64) {
	for j := range g.N {
		for i := range g.M {
			s := 0.0
			for l := range g.K {
				s += colAt(g.TransA, a, g.OffA, g.LDA, i, l) * colAt(g.TransB, b, g.OffB, g.LDB, l, j)
			}
			c[g.OffC+i+j*g.LDC] = alpha*s + beta*c[g.OffC+i+j*g.LDC]
		}
	}
}

// vecAt is element k of the BLAS vector of length n at off with inc.
func vecAt(off, inc, n, k int64) int64 {
	if inc < 0 {
		return off + (n-1-k)*-inc
	}
	return off + k*inc
}

// refGemv is a column-major BLAS gemv over flat buffers.
func refGemv(g bv.GemvArgs, a, x, y []float64, alpha, beta float64) {
	rows, cols := g.M, g.N
	if g.Trans != cublasraw.CUBLAS_OP_N {
		rows, cols = cols, rows
	}
	for i := range rows {
		s := 0.0
		for j := range cols {
			s += colAt(g.Trans, a, g.OffA, g.LDA, i, j) * x[vecAt(g.OffX, g.IncX, cols, j)]
		}
		p := vecAt(g.OffY, g.IncY, rows, i)
		y[p] = alpha*s + beta*y[p]
	}
}

func TestGemmMappingMatchesRowMajorMath(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(1, 2))}
	for range 3000 {
		m, n, k := g.dim(), g.dim(), g.dim()
		a, ad := g.opMatrix(0, m, k)
		b, bd := g.opMatrix(1, k, n)
		c, cd := g.matrix(2, m, n)
		args, err := bv.Gemm(a, b, c)
		require.NoError(t, err, "%+v %+v %+v", a, b, c)

		want := slices.Clone(cd)
		oa, ob := dense(a, ad), dense(b, bd)
		for i := range m {
			for j := range n {
				s := 0.0
				for l := range k {
					s += oa[i][l] * ob[l][j]
				}
				p := c.At(i, j)
				want[p] = 2*s - want[p]
			}
		}
		got := slices.Clone(cd)
		ca, cb := ad, bd
		if args.Swapped {
			ca, cb = bd, ad
		}
		refGemm(args, ca, cb, got, 2, -1)
		require.Equal(t, want, got, "A %+v\nB %+v\nC %+v\nargs %+v", a, b, c, args)
	}
}

func TestGemmStridedBatchedMapping(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(3, 4))}
	for range 500 {
		m, n, k, count := g.dim()+1, g.dim()+1, g.dim()+1, g.r.Int64N(4)
		a, _ := g.opMatrix(0, m, k)
		b, _ := g.opMatrix(1, k, n)
		c, _ := g.matrix(2, m, n)
		strides := [3]int64{}
		bufs := [3][]float64{}
		for i, x := range []*bv.Matrix{&a, &b, &c} {
			span := (x.LD)*(max(x.Rows, x.Cols)) + 1 // at least one view's extent
			strides[i] = span + g.r.Int64N(3)
			if i < 2 && g.r.IntN(3) == 0 {
				strides[i] = 0 // one operand for every batch
			}
			x.Buf.Len += strides[i] * max(count-1, 0)
			bufs[i] = g.data(x.Buf.Len)
		}
		args, err := bv.GemmStridedBatched(a, b, c, strides[0], strides[1], strides[2], count)
		require.NoError(t, err)
		want, got := slices.Clone(bufs[2]), slices.Clone(bufs[2])
		for i := range count {
			ai, bi, ci := a, b, c
			ai.Offset += i * strides[0]
			bi.Offset += i * strides[1]
			ci.Offset += i * strides[2]
			oa, ob := dense(ai, bufs[0]), dense(bi, bufs[1])
			for r := range m {
				for s := range n {
					sum := 0.0
					for l := range k {
						sum += oa[r][l] * ob[l][s]
					}
					want[ci.At(r, s)] = sum
				}
			}
			one := args.GemmArgs
			one.OffA += i * args.StrideA
			one.OffB += i * args.StrideB
			one.OffC += i * args.StrideC
			ca, cb := bufs[0], bufs[1]
			if args.Swapped {
				ca, cb = cb, ca
			}
			refGemm(one, ca, cb, got, 1, 0)
		}
		require.Equal(t, want, got)
	}
}

func TestGemvMappingMatchesRowMajorMath(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(5, 6))}
	for range 3000 {
		m, n := g.dim(), g.dim()
		rows, cols := m, n
		a, ad := g.opMatrix(0, rows, cols)
		x, xd := g.vector(1, cols)
		y, yd := g.vector(2, rows)
		args, err := bv.Gemv(a, x, y)
		require.NoError(t, err)
		want, got := slices.Clone(yd), slices.Clone(yd)
		oa := dense(a, ad)
		for i := range rows {
			s := 0.0
			for j := range cols {
				s += oa[i][j] * xd[x.At(j)]
			}
			want[y.At(i)] = 3*s + want[y.At(i)]
		}
		refGemv(args, ad, xd, got, 3, 1)
		require.Equal(t, want, got, "A %+v x %+v y %+v args %+v", a, x, y, args)
	}
}

func TestGerMappingMatchesRowMajorMath(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(7, 8))}
	for range 2000 {
		m, n := g.dim(), g.dim()
		a, ad := g.matrix(0, m, n)
		x, xd := g.vector(1, m)
		y, yd := g.vector(2, n)
		args, err := bv.Ger(a, x, y, false)
		require.NoError(t, err)
		want, got := slices.Clone(ad), slices.Clone(ad)
		for i := range m {
			for j := range n {
				want[a.At(i, j)] += xd[x.At(i)] * yd[y.At(j)]
			}
		}
		cx, cy := xd, yd
		if args.Swapped {
			cx, cy = yd, xd
		}
		for i := range args.M {
			for j := range args.N {
				got[args.OffA+i+j*args.LDA] += cx[vecAt(args.OffX, args.IncX, args.M, i)] * cy[vecAt(args.OffY, args.IncY, args.N, j)]
			}
		}
		require.Equal(t, want, got)
	}
}
