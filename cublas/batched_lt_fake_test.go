//go:build linux

package cublas_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// batchedEveryWay runs GemmBatched for T over every layout of A, B and C
// and every operation of A and B, three batches whose matrices lie in
// buffers of their own (blocks of larger matrices, or packed), against
// refGemmC per batch; a conjugate transpose of a complex operand whose
// layout is not C's is refused (ErrShape).
func batchedEveryWay[T cublas.Float](t *testing.T, e *fenv) {
	const m, n, k, count = 2, 3, 2, 3
	alpha, beta := scalar[T](1, 1), scalar[T](-2, 0)
	for _, la := range layouts {
		for _, lb := range layouts {
			for _, lc := range layouts {
				for _, oa := range ops {
					for _, ob := range ops {
						sub := (la == lb) != (oa == ob)
						name := fmt.Sprintf("%T A%s%s B%s%s C%s sub=%v", *new(T), layoutName(la), opName(oa), layoutName(lb), opName(ob), layoutName(lc), sub)
						ar, ac := m, k
						if oa != cublas.NoTrans {
							ar, ac = k, m
						}
						br, bc := k, n
						if ob != cublas.NoTrans {
							br, bc = n, k
						}
						var as, bs, cs []cublas.Matrix[T]
						var ah, bh, ch [][]T
						for i := 0; i < count; i++ {
							a, x := shape[T](t, e.s, ar, ac, la, oa, sub, 10+i)
							b, y := shape[T](t, e.s, br, bc, lb, ob, sub, 20+i)
							c, z := shape[T](t, e.s, m, n, lc, cublas.NoTrans, sub, 30+i)
							as, bs, cs = append(as, a), append(bs, b), append(cs, c)
							ah, bh, ch = append(ah, x), append(bh, y), append(ch, z)
						}
						before := opsRun(t)
						err := cublas.GemmBatched(e.h, alpha, as, bs, beta, cs)
						if isCplx[T]() && ((oa == cublas.ConjTrans && la != lc) || (ob == cublas.ConjTrans && lb != lc)) {
							assert.ErrorIs(t, err, cublas.ErrShape, name)
							assert.Equal(t, before, opsRun(t), name)
							continue
						}
						require.NoError(t, err, name)
						for i := 0; i < count; i++ {
							assert.Equal(t, refGemmC(alpha, as[i], ah[i], bs[i], bh[i], beta, cs[i], ch[i]), down(t, e.s, cs[i].Buf), "%s: batch %d", name, i)
						}
						assert.Equal(t, before+1, opsRun(t), name)
					}
				}
			}
		}
	}
}

// TestGemmBatchedFromFake: GemmBatched for the four types; the pinned
// pointer arrays are freed once the routines have run.
func TestGemmBatchedFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	hosts := faketest.Call(t, "fake_live_host_allocs")
	batchedEveryWay[float32](t, e)
	batchedEveryWay[float64](t, e)
	batchedEveryWay[complex64](t, e)
	batchedEveryWay[complex128](t, e)
	require.NoError(t, e.s.Synchronize())
	waitFor(t, "fake_live_host_allocs", hosts)
}

// TestGemmBatchedRefusalsFromFake: batches of different counts or shapes,
// a view past its buffer (named by its index), outputs overlapping each
// other or an input: refused before cuBLAS; no batch is nothing.
func TestGemmBatchedRefusalsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	k := newKit(t)
	two := func(rows, cols int) []cublas.Matrix[float32] {
		return []cublas.Matrix[float32]{k.mat(t, rows, cols, cublas.ColMajor), k.mat(t, rows, cols, cublas.ColMajor)}
	}
	A, B, C := two(2, 3), two(3, 4), two(2, 4)
	g := func(a, b, c []cublas.Matrix[float32]) error { return cublas.GemmBatched(k.h, 1, a, b, 0, c) }
	require.NoError(t, g(A, B, C))
	require.NoError(t, g(nil, nil, nil), "no batch")
	const w = "cublas: GemmBatched:"
	k.refused(t, "counts", cublas.ErrShape, w, func() error { return g(A, B, C[:1]) })
	k.matrixCases(t, "GemmBatched", "A[1]", A[1], func(m cublas.Matrix[float32]) error {
		return g([]cublas.Matrix[float32]{A[0], m}, B, C)
	})
	k.matrixCases(t, "GemmBatched", "C[0]", C[0], func(m cublas.Matrix[float32]) error {
		return g(A, B, []cublas.Matrix[float32]{m, C[1]})
	})
	wide := A[1]
	wide.Buf = up(t, k.s, make([]float32, 9))
	wide.LD = 3
	k.refused(t, "another leading dimension", cublas.ErrShape, w+" A[1]:", func() error {
		return g([]cublas.Matrix[float32]{A[0], wide}, B, C)
	})
	k.refused(t, "another shape", cublas.ErrShape, w, func() error {
		return g(A, B, []cublas.Matrix[float32]{C[0], k.mat(t, 2, 3, cublas.ColMajor)})
	})
	k.refused(t, "C[1] is C[0]", cublas.ErrAlias, w+" C[1]:", func() error {
		return g(A, B, []cublas.Matrix[float32]{C[0], C[0]})
	})
	big := up(t, k.s, make([]float32, 20))
	k.refused(t, "C[1] over A[0]", cublas.ErrAlias, w+" C[1]:", func() error {
		a0 := cublas.ColMajorMatrix(big, 2, 3)
		c1 := cublas.Matrix[float32]{Buf: big, Offset: 4, Rows: 2, Cols: 4}
		return g([]cublas.Matrix[float32]{a0, A[1]}, B, []cublas.Matrix[float32]{C[0], c1})
	})
	noBadUses(t)
}

// TestGemmBatchedHeldFromFake: the operands and the pinned pointer arrays
// of a GemmBatched queued behind a gate and closed at once stay until it
// has run (the fake reads the arrays and checks every matrix then).
func TestGemmBatchedHeldFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	hosts := faketest.Call(t, "fake_live_host_allocs")
	ah, bh := data[float32](8, 1), data[float32](8, 2)
	a, err := driver.AllocCopy(e.s, ah)
	require.NoError(t, err)
	b, err := driver.AllocCopy(e.s, bh)
	require.NoError(t, err)
	c, err := driver.Alloc[float32](e.ctx, 8)
	require.NoError(t, err)
	out := up(t, e.s, make([]float32, 8))
	two := func(x *driver.Buffer[float32]) []cublas.Matrix[float32] {
		return []cublas.Matrix[float32]{{Buf: x, Offset: 4, Rows: 2, Cols: 2}, cublas.ColMajorMatrix(x, 2, 2)}
	}
	open := gate(t, e.s, 24)
	require.NoError(t, cublas.GemmBatched(e.h, 1, two(a), two(b), 0, two(c)))
	require.NoError(t, cublas.Copy(e.h, cublas.VectorOf(c), cublas.VectorOf(out)))
	closed := make(chan error, 1)
	go func() { closed <- errors.Join(a.Close(), b.Close(), c.Close()) }()
	time.Sleep(20 * time.Millisecond)
	assert.Greater(t, faketest.Call(t, "fake_live_host_allocs"), hosts, "the pointer arrays wait for the routine")
	open()
	require.NoError(t, await(t, closed, "closing the buffers"))
	want := append(gemmWant(ah[:4], bh[:4], 2, 2, 2), gemmWant(ah[4:], bh[4:], 2, 2, 2)...) // batch 1, then batch 0
	assert.Equal(t, want, down(t, e.s, out))
	waitFor(t, "fake_live_host_allocs", hosts)
	noBadUses(t)
}

// epilogues are the ones MatmulPlan offers.
var epilogues = []cublas.Epilogue{cublas.EpilogueNone, cublas.EpilogueReLU, cublas.EpilogueBias, cublas.EpilogueReLUBias, cublas.EpilogueGELU, cublas.EpilogueGELUBias}

// refEpilogue is the epilogue e applied to v with the bias b, in float64.
func refEpilogue(e cublas.Epilogue, v, b float64) float64 {
	if e == cublas.EpilogueBias || e == cublas.EpilogueReLUBias || e == cublas.EpilogueGELUBias {
		v += b
	}
	if (e == cublas.EpilogueReLU || e == cublas.EpilogueReLUBias) && v < 0 {
		v = 0
	}
	if e == cublas.EpilogueGELU || e == cublas.EpilogueGELUBias {
		v = 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	return v
}

// planEveryWay makes a MatmulPlan for T for every layout of A, B and D,
// the operations N and T on A, and every epilogue, and runs each twice
// (into a separate D from C, then in place), against plain Go: the bias
// has one element per row of a column-major D, per column of a row-major
// one.
func planEveryWay[T cublas.Real](t *testing.T, e *fenv, compute cublas.ComputeType, tol float64) {
	const m, n, k = 3, 4, 2
	for _, la := range layouts {
		for _, lb := range layouts {
			for _, ld := range layouts {
				for _, oa := range ops[:2] {
					for _, epi := range epilogues {
						name := fmt.Sprintf("%T A%s%s B%s D%s epilogue %d", *new(T), layoutName(la), opName(oa), layoutName(lb), layoutName(ld), epi)
						ar, ac := m, k
						if oa != cublas.NoTrans {
							ar, ac = k, m
						}
						a, ah := shape16[T](t, e.s, ar, ac, la, oa, true, 1)
						b, bh := shape16[T](t, e.s, k, n, lb, cublas.NoTrans, false, 2)
						c, ch := shape16[T](t, e.s, m, n, ld, cublas.NoTrans, true, 3)
						d, dh := shape16[T](t, e.s, m, n, ld, cublas.NoTrans, true, 4)
						p, err := cublas.NewMatmulPlan(e.h, a, b, d, &cublas.MatmulOptions{Compute: compute, Epilogue: epi})
						require.NoError(t, err, name)
						var bias *driver.Buffer[T]
						nb := m // per row of a column-major D
						if ld == cublas.RowMajor {
							nb = n // per column of a row-major D
						}
						biash := data[T](nb, 5)
						if epi == cublas.EpilogueBias || epi == cublas.EpilogueReLUBias || epi == cublas.EpilogueGELUBias {
							bias = up(t, e.s, biash)
						}
						want := func(cHost []T, alpha, beta float64) []T {
							out := append([]T(nil), dh...)
							for i := 0; i < m; i++ {
								for j := 0; j < n; j++ {
									var s float64
									for l := 0; l < k; l++ {
										s += real(opAtC(ah, a, i, l)) * float64(bh[idx(b, l, j)])
									}
									v := alpha*s + beta*float64(cHost[idx(c, i, j)])
									bi := i
									if ld == cublas.RowMajor {
										bi = j
									}
									out[idx(d, i, j)] = T(refEpilogue(epi, v, float64(biash[bi])))
								}
							}
							return out
						}
						require.NoError(t, p.Run(2, a, b, -1, c, d, bias), name)
						assert.InDeltaSlice(t, want(ch, 2, -1), down(t, e.s, d.Buf), tol, name)
						assert.Equal(t, ch, down(t, e.s, c.Buf), "%s: C is only read", name)
						// In place: D is C.
						dh = ch
						require.NoError(t, p.Run(1, a, b, 1, c, c, bias), name)
						d = c
						assert.InDeltaSlice(t, want(ch, 1, 1), down(t, e.s, c.Buf), tol, "%s: in place", name)
						require.NoError(t, p.Close())
						assert.Nil(t, p.Tuned())
					}
				}
			}
		}
	}
}

// TestMatmulPlanFromFake: MatmulPlan for float32 and float64, every
// layout and epilogue, each plan run twice.
func TestMatmulPlanFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	planEveryWay[float32](t, e, 0, 1e-5) // Compute32F
	planEveryWay[float64](t, e, cublas.Compute64F, 1e-12)
	waitFor(t, "fake_cublaslt_live_handles", 0)
	waitFor(t, "fake_cublaslt_live_descs", 0)
}

// TestMatmulPlanRefusalsFromFake: NewMatmulPlan refuses unknown options,
// complex types and bad template views; Run refuses views that are not
// the plan's, a missing or unwanted bias, a bias past its buffer, C
// overlapping D, and a closed plan; nil and zero plans fail cleanly.
// Nothing reaches cuBLAS.
func TestMatmulPlanRefusalsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	k := newKit(t)
	h := k.h
	A, B, D := k.mat(t, 3, 2, cublas.ColMajor), k.mat(t, 2, 4, cublas.ColMajor), k.mat(t, 3, 4, cublas.ColMajor)
	const np = "cublas: NewMatmulPlan:"
	for what, o := range map[string]*cublas.MatmulOptions{
		"compute type": {Compute: 99}, "epilogue": {Epilogue: 3}, "autotune": {Autotune: -1},
	} {
		k.refused(t, "NewMatmulPlan: "+what, nil, np, func() error {
			_, err := cublas.NewMatmulPlan(h, A, B, D, o)
			return err
		})
	}
	k.refused(t, "NewMatmulPlan: complex", nil, np+" complex", func() error {
		z := cublas.Matrix[complex64]{Rows: 3, Cols: 4}
		_, err := cublas.NewMatmulPlan(h, A, B, z, nil)
		return err
	})
	k.refused(t, "NewMatmulPlan: k", cublas.ErrShape, np+" B:", func() error {
		_, err := cublas.NewMatmulPlan(h, A, k.mat(t, 3, 4, cublas.ColMajor), D, nil)
		return err
	})
	k.refused(t, "NewMatmulPlan: D's ld", cublas.ErrShape, np+" D:", func() error {
		bad := D
		bad.LD = 2
		_, err := cublas.NewMatmulPlan(h, A, B, bad, nil)
		return err
	})
	p, err := cublas.NewMatmulPlan(h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueBias})
	require.NoError(t, err)
	bias := cublas.VectorOf(up(t, k.s, []float32{1, 2, 3}))
	run := func(a, b, c, d cublas.Matrix[float32], bias *driver.Buffer[float32]) error {
		return p.Run(1, a, b, 0, c, d, bias)
	}
	require.NoError(t, run(A, B, D, D, bias.Buf))
	const w = "cublas: MatmulPlan.Run:"
	k.matrixCases(t, "MatmulPlan.Run", "A", A, func(m cublas.Matrix[float32]) error { return run(m, B, D, D, bias.Buf) })
	k.matrixCases(t, "MatmulPlan.Run", "D", D, func(m cublas.Matrix[float32]) error { return run(A, B, D, m, bias.Buf) })
	k.refused(t, "Run: another shape", cublas.ErrShape, w, func() error {
		return run(k.mat(t, 2, 2, cublas.ColMajor), k.mat(t, 2, 4, cublas.ColMajor), k.mat(t, 2, 4, cublas.ColMajor), k.mat(t, 2, 4, cublas.ColMajor), bias.Buf)
	})
	k.refused(t, "Run: another layout", cublas.ErrShape, w, func() error {
		return run(A, B, D, k.mat(t, 3, 4, cublas.RowMajor), bias.Buf)
	})
	k.refused(t, "Run: another leading dimension", cublas.ErrShape, w+" D:", func() error {
		wide := cublas.Matrix[float32]{Buf: up(t, k.s, make([]float32, 16)), Rows: 3, Cols: 4, LD: 4}
		return run(A, B, D, wide, bias.Buf)
	})
	k.refused(t, "Run: no bias", nil, w, func() error { return run(A, B, D, D, nil) })
	k.refused(t, "Run: a short bias", cublas.ErrOutOfBounds, w+" bias:", func() error {
		return run(A, B, D, D, up(t, k.s, []float32{1, 2}))
	})
	k.refused(t, "Run: a closed bias", driver.ErrClosed, w+" bias:", func() error { return run(A, B, D, D, k.closed(t, 3)) })
	k.refused(t, "Run: the bias in D", cublas.ErrAlias, w+" bias:", func() error {
		return run(A, B, D, D, D.Buf)
	})
	k.refused(t, "Run: C over D", cublas.ErrAlias, w+" C:", func() error {
		big := up(t, k.s, make([]float32, 14))
		return run(A, B, cublas.Matrix[float32]{Buf: big, Rows: 3, Cols: 4}, cublas.Matrix[float32]{Buf: big, Offset: 2, Rows: 3, Cols: 4}, bias.Buf)
	})
	k.refused(t, "Run: D over A", cublas.ErrAlias, w+" D:", func() error {
		big := up(t, k.s, make([]float32, 14))
		return run(cublas.ColMajorMatrix(big, 3, 2), B, D, cublas.Matrix[float32]{Buf: big, Offset: 2, Rows: 3, Cols: 4}, bias.Buf)
	})
	plain, err := cublas.NewMatmulPlan(h, A, B, D, nil)
	require.NoError(t, err)
	k.refused(t, "Run: an unwanted bias", nil, w, func() error { return plain.Run(1, A, B, 0, D, D, bias.Buf) })
	require.NoError(t, plain.Close())
	k.refused(t, "Run: a closed plan", driver.ErrClosed, w, func() error { return plain.Run(1, A, B, 0, D, D, nil) })
	assert.NoError(t, plain.Close(), "a second Close returns the first's result")
	var nilP *cublas.MatmulPlan[float32, float32, float32]
	k.refused(t, "Run: a nil plan", nil, w, func() error { return nilP.Run(1, A, B, 0, D, D, nil) })
	k.refused(t, "Run: a zero plan", nil, w, func() error {
		return (&cublas.MatmulPlan[float32, float32, float32]{}).Run(1, A, B, 0, D, D, nil)
	})
	assert.ErrorIs(t, nilP.Close(), driver.ErrInvalidArgument)
	assert.Nil(t, nilP.Tuned())
	closedH, err := cublas.NewHandle(k.s, &cublas.Options{WorkspaceBytes: 256})
	require.NoError(t, err)
	require.NoError(t, closedH.Close())
	k.refused(t, "NewMatmulPlan: a closed handle", driver.ErrClosed, np, func() error {
		_, err := cublas.NewMatmulPlan(closedH, A, B, D, nil)
		return err
	})
	require.NoError(t, p.Close())
	waitFor(t, "fake_cublaslt_live_handles", 0)
	waitFor(t, "fake_cublaslt_live_descs", 0)
	noBadUses(t)
}

// TestMatmulPlanLifetimeFromFake: a plan holds its handle (closed
// first, the cuBLAS handle stays for the plan, whose Runs are then
// refused with ErrClosed, as the handle's routines are); a Run captured
// into a graph is held by it, plan, handle and operands closed before 100
// replays; a plan dropped without Close is released by its cleanup.
func TestMatmulPlanLifetimeFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 2, 2, 3
	ah, bh := data[float64](m*k, 1), data[float64](k*n, 2)
	h, err := cublas.NewHandle(e.s, &cublas.Options{WorkspaceBytes: 1 << 12})
	require.NoError(t, err)
	a, err := driver.AllocCopy(e.s, ah)
	require.NoError(t, err)
	b, err := driver.AllocCopy(e.s, bh)
	require.NoError(t, err)
	d := up(t, e.s, make([]float64, m*n))
	A, B, D := cublas.ColMajorMatrix(a, m, k), cublas.ColMajorMatrix(b, k, n), cublas.ColMajorMatrix(d, m, n)
	p, err := cublas.NewMatmulPlan(h, A, B, D, &cublas.MatmulOptions{Compute: cublas.Compute64F})
	require.NoError(t, err)
	require.NoError(t, p.Run(1, A, B, 0, D, D, nil))
	assert.Equal(t, gemmWant64(ah, bh, m, n, k), down(t, e.s, d))

	// Captured, then everything closed.
	g, err := graph.Capture(e.s, graph.CaptureGlobal, func(*driver.Stream) error {
		return p.Run(2, A, B, 0, D, D, nil)
	})
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	require.NoError(t, h.Close())
	assert.EqualValues(t, 2, liveHandles(t), "the plan holds the handle")
	assert.ErrorIs(t, p.Run(1, A, B, 0, D, D, nil), driver.ErrClosed, "the handle is closed")
	require.NoError(t, p.Close())
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	assert.EqualValues(t, 2, liveHandles(t), "the executable holds the handle")
	want := gemmWant64(ah, bh, m, n, k)
	for i := range want {
		want[i] *= 2
	}
	for i := 0; i < 100; i++ {
		if i%50 == 0 {
			require.NoError(t, d.Memset32(e.s, 0))
		}
		require.NoError(t, x.Launch(e.s))
		if i%50 == 0 {
			assert.Equal(t, want, down(t, e.s, d), "replay %d", i)
		}
	}
	require.NoError(t, x.Close())
	waitFor(t, "fake_cublas_live_handles", 1)
	waitFor(t, "fake_cublaslt_live_handles", 0)

	// Dropped.
	objects := lifetime.ReadStats().Objects
	func() {
		q, err := cublas.NewMatmulPlan(e.h, D, D, D, &cublas.MatmulOptions{Compute: cublas.Compute64F})
		require.NoError(t, err)
		out := cublas.ColMajorMatrix(up(t, e.s, make([]float64, 4)), 2, 2)
		require.NoError(t, q.Run(1, D, cublas.ColMajorMatrix(up(t, e.s, []float64{1, 0, 0, 1}), 2, 2), 0, out, out, nil))
	}()
	deadline := time.Now().Add(20 * time.Second)
	for faketest.CUBLAS(t, "fake_cublaslt_live_handles") != 0 && time.Now().Before(deadline) {
		runtime.GC()
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, faketest.CUBLAS(t, "fake_cublaslt_live_handles"), "the dropped plan was not released")
	assert.Zero(t, faketest.CUBLAS(t, "fake_cublaslt_live_descs"))
	assert.Equal(t, objects+2, lifetime.ReadStats().Objects, "the two buffers made meanwhile only")
	noBadUses(t)
}

// gemmWant64 is gemmWant in float64.
func gemmWant64(a, b []float64, m, n, k int) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			for l := 0; l < k; l++ {
				out[i+j*m] += a[i+l*m] * b[l+j*k]
			}
		}
	}
	return out
}

// TestCapturedGemmBatchedFromFake: a GemmBatched captured into a graph is
// held by it, pointer arrays included: operands and handle closed, the
// executable replays it exactly; the arrays are freed once it is closed.
func TestCapturedGemmBatchedFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	hosts := faketest.Call(t, "fake_live_host_allocs")
	h, err := cublas.NewHandle(e.s, &cublas.Options{WorkspaceBytes: 1 << 12})
	require.NoError(t, err)
	ah, bh := data[float32](8, 3), data[float32](8, 4)
	a, err := driver.AllocCopy(e.s, ah)
	require.NoError(t, err)
	b, err := driver.AllocCopy(e.s, bh)
	require.NoError(t, err)
	c := up(t, e.s, make([]float32, 8))
	two := func(x *driver.Buffer[float32]) []cublas.Matrix[float32] {
		return []cublas.Matrix[float32]{cublas.ColMajorMatrix(x, 2, 2), {Buf: x, Offset: 4, Rows: 2, Cols: 2}}
	}
	// Relaxed: GemmBatched allocates its pinned arrays during the call,
	// which a global or thread-local capture refuses (and is invalidated).
	g, err := graph.Capture(e.s, graph.CaptureRelaxed, func(*driver.Stream) error {
		return cublas.GemmBatched(h, 1, two(a), two(b), 0, two(c))
	})
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, errors.Join(g.Close(), a.Close(), b.Close(), h.Close()))
	want := append(gemmWant(ah[:4], bh[:4], 2, 2, 2), gemmWant(ah[4:], bh[4:], 2, 2, 2)...)
	for i := 0; i < 20; i++ {
		require.NoError(t, c.Memset32(e.s, 0))
		require.NoError(t, x.Launch(e.s))
		assert.Equal(t, want, down(t, e.s, c), "replay %d", i)
	}
	assert.Greater(t, faketest.Call(t, "fake_live_host_allocs"), hosts, "the graph holds the pointer arrays")
	require.NoError(t, x.Close())
	waitFor(t, "fake_live_host_allocs", hosts)
	waitFor(t, "fake_cublas_live_handles", 1)
	noBadUses(t)
}
