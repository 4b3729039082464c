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

// TestAutotuneFromFake: with several candidates from the heuristic, an
// autotuned plan times each (Tuned) and computes right.
func TestAutotuneFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	faketest.CUBLAS(t, "fake_cublaslt_set_algos", 3)
	t.Cleanup(func() { faketest.CUBLAS(t, "fake_cublaslt_set_algos", 1) })
	const m, n, k = 3, 2, 4
	ah, bh := data[float32](m*k, 1), data[float32](k*n, 2)
	A, B := cublas.ColMajorMatrix(up(t, e.s, ah), m, k), cublas.ColMajorMatrix(up(t, e.s, bh), k, n)
	d := up(t, e.s, make([]float32, m*n))
	D := cublas.ColMajorMatrix(d, m, n)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Autotune: 5})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	assert.Len(t, p.Tuned(), 3)
	require.NoError(t, p.Run(1, A, B, 0, D, D, nil))
	assert.Equal(t, gemmWant(ah, bh, m, n, k), down(t, e.s, d))
}

// TestAutotuneRacingCaptureFromFake: a capture that begins on the handle's
// stream while NewMatmulPlan autotunes (past its check that the stream is
// not being captured) gets none of autotune's matmuls, which name scratch
// buffers that autotune frees, and is not broken by autotune's waits: the
// capture begins once the timing in progress is done, NewMatmulPlan then
// fails with ErrStreamCaptureUnsupported, the capture ends well and its
// graph runs no cuBLAS operation and uses no freed memory.
func TestAutotuneRacingCaptureFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	faketest.CUBLAS(t, "fake_cublaslt_set_algos", 2)
	t.Cleanup(func() { faketest.CUBLAS(t, "fake_cublaslt_set_algos", 1) })
	const m, n, k = 3, 2, 4
	var none *driver.Buffer[float32]
	A, B, D := cublas.ColMajorMatrix(none, m, k), cublas.ColMajorMatrix(none, k, n), cublas.ColMajorMatrix(none, m, n)

	// Autotune's first event record is held inside cuEventRecord: past
	// the capture check, with the stream in use.
	faketest.Call(t, "fake_set_record_call_delay_us", ^uintptr(0))
	unhold := func() { faketest.Call(t, "fake_set_record_call_delay_us", 0) }
	t.Cleanup(unhold)
	planned := make(chan error, 1)
	go func() {
		p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Autotune: 2})
		if err == nil {
			_ = p.Close()
		}
		planned <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for faketest.Call(t, "fake_record_calls_in_delay") < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.EqualValues(t, 1, faketest.Call(t, "fake_record_calls_in_delay"), "autotune's first record")

	var planErr error
	captured := make(chan struct{})
	var g *graph.Graph
	var capErr error
	go func() {
		defer close(captured)
		g, capErr = graph.Capture(e.s, graph.CaptureRelaxed, func(*driver.Stream) error {
			planErr = await(t, planned, "NewMatmulPlan")
			return nil
		})
	}()
	// The capture waits for the record in progress (and, with the fix,
	// for the timing it is part of); then it begins, and autotune goes on
	// (within 100 ms, the capture has got as far as waiting).
	time.Sleep(100 * time.Millisecond)
	unhold()
	<-captured
	assert.ErrorIs(t, planErr, driver.ErrStreamCaptureUnsupported)
	require.NoError(t, capErr, "the capture ends well")
	defer func() { assert.NoError(t, g.Close()) }()
	x, err := g.Instantiate()
	require.NoError(t, err)
	defer func() { assert.NoError(t, x.Close()) }()
	require.NoError(t, e.s.Synchronize())
	before := opsRun(t)
	require.NoError(t, x.Launch(e.s))
	require.NoError(t, e.s.Synchronize())
	assert.Equal(t, before, opsRun(t), "the graph holds no matmul of autotune's")
}

// TestNewMatmulPlanFailingFromFake: cuBLASLt failing at each step of
// NewMatmulPlan leaves nothing: no cuBLASLt handle or descriptor, and no
// hold on the Handle, which is destroyed by its Close. A candidate whose
// warm-up fails is timed -1 and passed over.
func TestNewMatmulPlanFailingFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 3, 2, 4
	var none *driver.Buffer[float32]
	A, B, D := cublas.ColMajorMatrix(none, m, k), cublas.ColMajorMatrix(none, k, n), cublas.ColMajorMatrix(none, m, n)
	lt, descs, handles := faketest.CUBLAS(t, "fake_cublaslt_live_handles"), faketest.CUBLAS(t, "fake_cublaslt_live_descs"), liveHandles(t)
	for _, fn := range []string{"cublasLtCreate", "cublasLtMatmulDescCreate", "cublasLtMatmulDescSetAttribute", "cublasLtMatrixLayoutCreate",
		"cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceSetAttribute", "cublasLtMatmulAlgoGetHeuristic"} {
		h, err := cublas.NewHandle(e.s, &cublas.Options{WorkspaceBytes: 1 << 10})
		require.NoError(t, err)
		faketest.CUBLASFailNext(t, fn, 14)
		p, err := cublas.NewMatmulPlan(h, A, B, D, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLU})
		assert.Nil(t, p, fn)
		assert.ErrorIs(t, err, cublas.StatusInternalError, fn)
		assert.Equal(t, lt, faketest.CUBLAS(t, "fake_cublaslt_live_handles"), "%s: no cuBLASLt handle left", fn)
		assert.Equal(t, descs, faketest.CUBLAS(t, "fake_cublaslt_live_descs"), "%s: no descriptor left", fn)
		require.NoError(t, h.Close())
		assert.Equal(t, handles, liveHandles(t), "%s: the plan let the handle go", fn)
	}

	faketest.CUBLAS(t, "fake_cublaslt_set_algos", 2)
	t.Cleanup(func() { faketest.CUBLAS(t, "fake_cublaslt_set_algos", 1) })
	faketest.CUBLASFailNext(t, "cublasLtMatmul", 15)
	p, err := cublas.NewMatmulPlan(e.h, A, B, D, &cublas.MatmulOptions{Autotune: 2})
	require.NoError(t, err)
	tuned := p.Tuned()
	if assert.Len(t, tuned, 2) {
		assert.Equal(t, time.Duration(-1), tuned[0], "the first candidate failed")
		assert.GreaterOrEqual(t, tuned[1], time.Duration(0))
	}
	require.NoError(t, p.Close())
	assert.Equal(t, descs, faketest.CUBLAS(t, "fake_cublaslt_live_descs"))
}
