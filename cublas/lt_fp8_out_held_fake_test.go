//go:build linux

package cublas_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
)

// fp8OutFixture is an E4M3×E4M3→E4M3 plan's operands (m×n×k, "TN",
// column-major) of small integers, and D's values before D's scale.
func fp8OutFixture(t *testing.T, e *fenv, m, n, k int) (A, B cublas.Matrix[cublas.Float8E4M3], dd *driver.Buffer[cublas.Float8E4M3], want []float64) {
	type E4 = cublas.Float8E4M3
	ah, bh := make([]E4, m*k), make([]E4, k*n)
	for i := range ah {
		ah[i] = cublas.Float8E4M3Of(float32(i%3 - 1))
	}
	for i := range bh {
		bh[i] = cublas.Float8E4M3Of(float32(i%4 - 2))
	}
	dd = up(t, e.s, make([]E4, m*n))
	A, B, _ = fp8Views(up(t, e.s, ah), up(t, e.s, bh), dd, m, n, k, false)
	want = fp8Want(m, n, k,
		func(i, j int) float64 { return opv(ah, A, i, j, f8Val[E4]) },
		func(i, j int) float64 { return opv(bh, B, i, j, f8Val[E4]) }, nil, 1, 1, 1, 0, nil, false, cublas.EpilogueNone)
	return A, B, dd, want
}

// checkFP8Out compares D (column-major m×n in dd) with want times ds,
// rounded to E4M3, and returns want's amax.
func checkFP8Out(t *testing.T, name string, got []cublas.Float8E4M3, want []float64, ds float64, m, n int) float32 {
	t.Helper()
	var amax float64
	D := cublas.ColMajorMatrix[cublas.Float8E4M3](nil, m, n)
	for i := range m {
		for j := range n {
			v := want[i*n+j]
			amax = max(amax, v, -v)
			if w, g := f8Sat[cublas.Float8E4M3](v*ds), got[idx(D, i, j)]; g != w {
				t.Fatalf("%s: D[%d,%d] = %v, want %v", name, i, j, f8Val(g), f8Val(w))
			}
		}
	}
	return float32(amax)
}

// TestMatmulPlanFP8OutHeldFromFake: a RunWith of an 8-bit D queued
// behind a closed gate keeps D's scale and amax buffers through their
// Close (the fakes count no use of freed memory), and D lands scaled.
func TestMatmulPlanFP8OutHeldFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 16, 16, 16
	A, B, dd, want := fp8OutFixture(t, e, m, n, k)
	D := cublas.ColMajorMatrix(dd, m, n)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{AmaxD: true})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	sd, err := driver.AllocCopy(e.s, []float32{0.5})
	require.NoError(t, err)
	amax, err := driver.AllocCopy(e.s, []float32{-1})
	require.NoError(t, err)
	open := gate(t, e.s, 5)
	require.NoError(t, p.RunWith(1, A, B, 0, D, D, cublas.MatmulExtras[cublas.Float8E4M3]{Scales: cublas.MatmulScales{D: sd, AmaxD: amax}}))
	require.NoError(t, sd.Close())
	require.NoError(t, amax.Close())
	open()
	checkFP8Out(t, "held", down(t, e.s, dd), want, 0.5, m, n)
	noBadUses(t)
}

// TestMatmulPlanFP8OutCapturedFromFake: a captured RunWith of an 8-bit
// D keeps the D scale and amax it named, for good: Runs after the
// capture with others (which change the plan's descriptor) leave the
// graph's alone, and the graph holds its buffers, closed, through the
// replays.
func TestMatmulPlanFP8OutCapturedFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 16, 16, 16
	A, B, dd, want := fp8OutFixture(t, e, m, n, k)
	D := cublas.ColMajorMatrix(dd, m, n)
	d2 := up(t, e.s, make([]cublas.Float8E4M3, m*n))
	D2 := cublas.ColMajorMatrix(d2, m, n)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{AmaxD: true})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	sd1, err := driver.AllocCopy(e.s, []float32{0.5})
	require.NoError(t, err)
	amax1, err := driver.AllocCopy(e.s, []float32{-1})
	require.NoError(t, err)
	sd2, amax2 := up(t, e.s, []float32{0.25}), up(t, e.s, []float32{-1})
	type X = cublas.MatmulExtras[cublas.Float8E4M3]
	g, err := graph.Capture(e.s, graph.CaptureGlobal, func(*driver.Stream) error {
		return p.RunWith(1, A, B, 0, D, D, X{Scales: cublas.MatmulScales{D: sd1, AmaxD: amax1}})
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, g.Close()) }()
	x, err := g.Instantiate()
	require.NoError(t, err)
	defer func() { assert.NoError(t, x.Close()) }()
	require.NoError(t, sd1.Close())
	require.NoError(t, amax1.Close())
	for range 3 {
		require.NoError(t, amax2.Memset32(e.s, 0xffffffff))
		require.NoError(t, p.RunWith(1, A, B, 0, D2, D2, X{Scales: cublas.MatmulScales{D: sd2, AmaxD: amax2}}))
		require.NoError(t, x.Launch(e.s))
		// The graph writes its own amax, not amax2.
		assert.Equal(t, checkFP8Out(t, "the later Runs'", down(t, e.s, d2), want, 0.25, m, n), down(t, e.s, amax2)[0], "the later Runs' amax")
	}
	checkFP8Out(t, "the graph's", down(t, e.s, dd), want, 0.5, m, n)
	noBadUses(t)
}

// TestMatmulPlanFP8OutAutotuneFromFake: an 8-bit D's plan made with
// AmaxD times every candidate (C NULL with a 16-bit layout there too,
// the amax written to scratch), runs, and leaves no descriptor or layout
// behind when closed.
func TestMatmulPlanFP8OutAutotuneFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	faketest.CUBLAS(t, "fake_cublaslt_set_algos", 3)
	t.Cleanup(func() { faketest.CUBLAS(t, "fake_cublaslt_set_algos", 1) })
	const m, n, k = 32, 16, 16
	A, B, dd, want := fp8OutFixture(t, e, m, n, k)
	D := cublas.ColMajorMatrix(dd, m, n)
	amax := up(t, e.s, []float32{-1})
	descs := faketest.CUBLAS(t, "fake_cublaslt_live_descs")
	for _, withAmax := range []bool{true, false} {
		p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{AmaxD: withAmax, Autotune: 3})
		require.NoError(t, err, "AmaxD %v", withAmax)
		tuned := p.Tuned()
		if assert.Len(t, tuned, 3, "AmaxD %v", withAmax) {
			for i, d := range tuned {
				assert.GreaterOrEqual(t, d, time.Duration(0), "AmaxD %v: candidate %d ran", withAmax, i)
			}
		}
		x := cublas.MatmulExtras[cublas.Float8E4M3]{}
		if withAmax {
			x.Scales.AmaxD = amax
		}
		require.NoError(t, p.RunWith(1, A, B, 0, D, D, x))
		wmax := checkFP8Out(t, "autotuned", down(t, e.s, dd), want, 1, m, n)
		if withAmax {
			assert.Equal(t, wmax, down(t, e.s, amax)[0], "D's amax")
		}
		require.NoError(t, p.Close())
		assert.Equal(t, descs, faketest.CUBLAS(t, "fake_cublaslt_live_descs"), "AmaxD %v: the plan's descriptors and layouts destroyed", withAmax)
	}
	noBadUses(t)
}
