//go:build linux

package cublas_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// The alignment a plan's algorithm may assume: fakecublas's heuristic
// gives algorithms that assume the preference's minimum alignment of A,
// B, C and D (256 bytes unless set) and the alignment of the bias,
// auxiliary and scale pointers it saw (NULL: 256); a matmul with a less
// aligned pointer is a bad use (on the GPU, a misaligned-address fault).

// TestMatmulPlanMatrixAlignmentFromFake: a plan's algorithm takes A, B, C
// and D at any 16-byte boundary (views 16 bytes into their buffers run,
// the fake counting no misaligned address), and Run refuses a matrix
// whose first element is not on one, naming it (as the caller knows it,
// whatever the layout), nothing queued.
func TestMatmulPlanMatrixAlignmentFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 8, 4, 2
	for _, l := range []cublas.Layout{cublas.ColMajor, cublas.RowMajor} {
		ah, bh, ch := data[float32](m*k+4, 1), data[float32](k*n+4, 2), data[float32](m*n+4, 3)
		view := func(b *driver.Buffer[float32], off, rows, cols int) cublas.Matrix[float32] {
			return cublas.Matrix[float32]{Buf: b, Offset: off, Rows: rows, Cols: cols, Layout: l}
		}
		abuf, bbuf, cbuf := up(t, e.s, ah), up(t, e.s, bh), up(t, e.s, ch)
		dbuf := up(t, e.s, make([]float32, m*n+4))
		p, err := cublas.NewMatmulPlan(e.h, view(nil, 0, m, k), view(nil, 0, k, n), view(nil, 0, m, n), nil)
		require.NoError(t, err)
		// Every matrix 16 bytes (4 elements) in.
		A, B, C, D := view(abuf, 4, m, k), view(bbuf, 4, k, n), view(cbuf, 4, m, n), view(dbuf, 4, m, n)
		require.NoError(t, p.Run(1, A, B, 1, C, D, nil), "layout %d", l)
		got := down(t, e.s, dbuf)
		at := func(h []float32, mm cublas.Matrix[float32], i, j int) float32 { return h[idx(mm, i, j)] }
		for i := range m {
			for j := range n {
				var want float32
				for x := range k {
					want += at(ah, A, i, x) * at(bh, B, x, j)
				}
				want += at(ch, C, i, j)
				assert.Equal(t, want, got[idx(D, i, j)], "layout %d: D[%d,%d]", l, i, j)
			}
		}
		noBadUses(t)
		for _, off := range []int{1, 2, 3} {
			for _, c := range []struct {
				name       string
				a, b, c, d cublas.Matrix[float32]
			}{
				{"A", view(abuf, off, m, k), B, C, D},
				{"B", A, view(bbuf, off, k, n), C, D},
				{"C", A, B, view(cbuf, off, m, n), D},
				{"D", A, B, C, view(dbuf, off, m, n)},
			} {
				what := fmt.Sprintf("layout %d: %s %d bytes past a 16-byte boundary", l, c.name, 4*off)
				refusedRun(t, e, what, driver.ErrInvalidArgument, "", c.name+": a MatmulPlan needs each matrix to start on a 16-byte boundary", dbuf,
					func() error { return p.Run(1, c.a, c.b, 1, c.c, c.d, nil) })
			}
		}
		assert.NoError(t, p.Close())
	}
}

// TestMatmulPlanBiasAlignmentFromFake: the algorithm chosen takes a bias,
// or a bias gradient, at any element boundary (a Buffer.Slice one
// element in): the heuristic saw a stand-in with only that alignment.
// Results as plain Go's, no misaligned address counted.
func TestMatmulPlanBiasAlignmentFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	biasAligned[float32](t, e, 0)
	biasAligned[float64](t, e, cublas.Compute64F)
}

func biasAligned[T interface{ float32 | float64 }](t *testing.T, e *fenv, compute cublas.ComputeType) {
	const m, n, k = 8, 4, 2
	ah, bh := data[T](m*k, 1), data[T](k*n, 2)
	A, B := cublas.ColMajorMatrix(up(t, e.s, ah), m, k), cublas.ColMajorMatrix(up(t, e.s, bh), k, n)
	dbuf := up(t, e.s, make([]T, m*n))
	D := cublas.ColMajorMatrix(dbuf, m, n)
	prod := make([]T, m*n)
	for i := range m {
		for j := range n {
			for l := range k {
				prod[i+j*m] += ah[i+l*m] * bh[l+j*k]
			}
		}
	}
	for _, epi := range []cublas.Epilogue{cublas.EpilogueBias, cublas.EpilogueReLUBias, cublas.EpilogueBGradA, cublas.EpilogueBGradB} {
		name := fmt.Sprintf("%T epilogue %d", *new(T), epi)
		p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: epi, Compute: compute})
		require.NoError(t, err, name)
		biasH := data[T](m+1, 5)
		bias := slice(t, up(t, e.s, biasH), 1, m+1) // one element past the allocation's alignment
		require.NoError(t, p.Run(1, A, B, 0, D, D, bias), name)
		got, gotBias := down(t, e.s, dbuf), down(t, e.s, bias)
		switch epi {
		case cublas.EpilogueBias, cublas.EpilogueReLUBias:
			want := make([]T, m*n)
			for x := range want {
				want[x] = T(refEpilogue(epi, float64(prod[x]), float64(biasH[1+x%m])))
			}
			assert.Equal(t, want, got, name)
		case cublas.EpilogueBGradA: // g[i] = Σ_l A[i, l]
			assert.Equal(t, prod, got, name)
			for i := range m {
				assert.Equal(t, ah[i]+ah[i+m], gotBias[i], "%s: gradient[%d]", name, i)
			}
		case cublas.EpilogueBGradB: // g[j] = Σ_l B[l, j]
			assert.Equal(t, prod, got, name)
			for j := range n {
				assert.Equal(t, bh[2*j]+bh[2*j+1], gotBias[j], "%s: gradient[%d]", name, j)
			}
		}
		noBadUses(t)
		assert.NoError(t, p.Close())
	}
}

// TestMatmulPlanAutotuneAlignmentFromFake: autotune times each candidate
// with the matrices 16 bytes and the bias one element into their scratch
// (no more alignment than Run requires), and every candidate runs there;
// the plan then runs with a bias one element in.
func TestMatmulPlanAutotuneAlignmentFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	faketest.CUBLAS(t, "fake_cublaslt_set_algos", 3)
	t.Cleanup(func() { faketest.CUBLAS(t, "fake_cublaslt_set_algos", 1) })
	const m, n, k = 8, 4, 2
	ah, bh := data[float32](m*k, 1), data[float32](k*n, 2)
	A, B := cublas.ColMajorMatrix(up(t, e.s, ah), m, k), cublas.ColMajorMatrix(up(t, e.s, bh), k, n)
	D := cublas.ColMajorMatrix(up(t, e.s, make([]float32, m*n)), m, n)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueBias, Autotune: 3})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	tuned := p.Tuned()
	require.Len(t, tuned, 3)
	for i, d := range tuned {
		assert.GreaterOrEqual(t, d, 0*tuned[0], "candidate %d ran", i)
	}
	noBadUses(t)
	biasH := data[float32](m+1, 5)
	require.NoError(t, p.Run(1, A, B, 0, D, D, slice(t, up(t, e.s, biasH), 1, m+1)))
	want := gemmWant(ah, bh, m, n, k)
	for x := range want {
		want[x] += biasH[1+x%m]
	}
	assert.Equal(t, want, down(t, e.s, D.Buf))
}

// TestMatmulPlanFP8ScaleAlignmentFromFake: an FP8 plan's algorithm takes
// its scale factors at any float32 boundary (slices one element in).
func TestMatmulPlanFP8ScaleAlignmentFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 16, 16, 16
	type E4 = cublas.Float8E4M3
	ah, bh := make([]E4, m*k), make([]E4, k*n)
	for i := range ah {
		ah[i] = cublas.Float8E4M3Of(float32(i%5 - 2))
	}
	for i := range bh {
		bh[i] = cublas.Float8E4M3Of(float32(i%3 - 1))
	}
	dbuf := up(t, e.s, make([]float32, m*n))
	A, B, D := fp8Views(up(t, e.s, ah), up(t, e.s, bh), dbuf, m, n, k, false)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	sc := up(t, e.s, []float32{0, 2, 3})
	require.NoError(t, p.RunWith(1, A, B, 0, D, D, cublas.MatmulExtras[float32]{Scales: cublas.MatmulScales{A: slice(t, sc, 1, 2), B: slice(t, sc, 2, 3)}}))
	got := down(t, e.s, dbuf)
	for i := range m {
		for j := range n {
			var want float32
			for l := range k {
				want += ah[l+i*k].Float32() * bh[l+j*k].Float32()
			}
			assert.Equal(t, 6*want, got[i+j*m], "D[%d,%d]", i, j)
		}
	}
	noBadUses(t)
}

// TestMatmulPlanFP8BiasAlignmentFromFake: an FP8 plan's bias starts on a
// 16-byte boundary (cuBLASLt has no FP8 kernel with a bias for less: its
// heuristic answers NOT_SUPPORTED on an H200 when promised less). One
// element in is refused, naming the bias, with nothing queued; 16 bytes
// in runs, and the result adds that bias.
func TestMatmulPlanFP8BiasAlignmentFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 16, 16, 16
	type E4 = cublas.Float8E4M3
	ah, bh := make([]E4, m*k), make([]E4, k*n)
	for i := range ah {
		ah[i] = cublas.Float8E4M3Of(float32(i%5 - 2))
	}
	for i := range bh {
		bh[i] = cublas.Float8E4M3Of(float32(i%3 - 1))
	}
	dbuf := up(t, e.s, make([]cublas.Half, m*n))
	A, B, D := fp8Views(up(t, e.s, ah), up(t, e.s, bh), dbuf, m, n, k, false)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueBias})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	bh16 := make([]cublas.Half, m+8)
	for i := range bh16 {
		bh16[i] = cublas.HalfOf(float32(i))
	}
	bias := up(t, e.s, bh16)
	err = p.Run(1, A, B, 0, D, D, slice(t, bias, 1, m+1))
	require.Error(t, err)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "bias")
	assert.Contains(t, err.Error(), "16 bytes")
	require.NoError(t, p.Run(1, A, B, 0, D, D, slice(t, bias, 8, m+8)))
	got := down(t, e.s, dbuf)
	for i := range m {
		for j := range n {
			var want float32
			for l := range k {
				want += ah[l+i*k].Float32() * bh[l+j*k].Float32()
			}
			assert.Equal(t, want+float32(i+8), got[i+j*m].Float32(), "D[%d,%d]", i, j)
		}
	}
	noBadUses(t)
}
