//go:build linux

package cublas_test

import (
	"errors"
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

// gemmWant is A·B for the column-major m×k A and k×n B, in plain Go.
func gemmWant(a, b []float32, m, n, k int) []float32 {
	out := make([]float32, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			for l := 0; l < k; l++ {
				out[i+j*m] += a[i+l*m] * b[l+j*k]
			}
		}
	}
	return out
}

// await waits for done (30 s at most) and returns what it sent.
func await(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never returned", what)
	}
	return nil
}

// TestOperandsHeldUntilRunFromFake: the buffers of routines queued behind
// a gate (not run yet) and closed right after the calls stay allocated
// until the routines have run, and the results are right: the fake checks
// every pointer again when an operation runs. C itself is closed too, its
// result copied out by a second routine queued behind the first.
func TestOperandsHeldUntilRunFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const m, n, k = 3, 4, 2
	ah, bh := data[float32](m*k, 1), data[float32](k*n, 2)
	a, err := driver.AllocCopy(e.s, ah)
	require.NoError(t, err)
	b, err := driver.AllocCopy(e.s, bh)
	require.NoError(t, err)
	c, err := driver.Alloc[float32](e.ctx, m*n)
	require.NoError(t, err)
	d := up(t, e.s, make([]float32, m*n))
	r := up(t, e.s, []float32{0})
	x := up(t, e.s, data[float32](5, 3))

	open := gate(t, e.s, 21)
	before := opsRun(t)
	require.NoError(t, cublas.Gemm(e.h, 1, cublas.ColMajorMatrix(a, m, k), cublas.ColMajorMatrix(b, k, n), 0, cublas.ColMajorMatrix(c, m, n)))
	require.NoError(t, cublas.Copy(e.h, cublas.VectorOf(c), cublas.VectorOf(d)))
	require.NoError(t, cublas.AsumTo(e.h, cublas.VectorOf(x), cublas.VectorOf(r)))
	// A buffer's free waits for its context's work: close on another
	// goroutine.
	closed := make(chan error, 1)
	go func() { closed <- errors.Join(a.Close(), b.Close(), c.Close(), x.Close()) }()
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, before, opsRun(t), "the gate holds the routines")
	open()
	require.NoError(t, await(t, closed, "closing the buffers"))
	assert.Equal(t, gemmWant(ah, bh, m, n, k), down(t, e.s, d))
	var asum float32
	for _, v := range data[float32](5, 3) {
		asum += max(v, -v)
	}
	assert.Equal(t, []float32{asum}, down(t, e.s, r))
	assert.Equal(t, before+3, opsRun(t))
	noBadUses(t)
}

// TestCloseWithWorkQueuedFromFake: a Handle closed with routines queued
// behind a gate destroys the cuBLAS handle only once they have run (cuBLAS
// waits for the device), and they compute with its workspace alive.
func TestCloseWithWorkQueuedFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	h, err := cublas.NewHandle(e.s, &cublas.Options{WorkspaceBytes: 1 << 12})
	require.NoError(t, err)
	require.EqualValues(t, 2, liveHandles(t))
	const m, n, k = 2, 2, 3
	ah, bh := data[float32](m*k, 4), data[float32](k*n, 5)
	a, b, c := up(t, e.s, ah), up(t, e.s, bh), up(t, e.s, make([]float32, m*n))
	open := gate(t, e.s, 22)
	for i := 0; i < 3; i++ {
		require.NoError(t, cublas.Gemm(h, 1, cublas.ColMajorMatrix(a, m, k), cublas.ColMajorMatrix(b, k, n), 1, cublas.ColMajorMatrix(c, m, n)))
	}
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	time.Sleep(20 * time.Millisecond)
	assert.EqualValues(t, 2, liveHandles(t), "the handle waits for its routines")
	assert.ErrorIs(t, cublas.Gemm(h, 1, cublas.ColMajorMatrix(a, m, k), cublas.ColMajorMatrix(b, k, n), 1, cublas.ColMajorMatrix(c, m, n)), driver.ErrClosed)
	open()
	require.NoError(t, await(t, closed, "Close"))
	waitFor(t, "fake_cublas_live_handles", 1)
	want := gemmWant(ah, bh, m, n, k)
	for i := range want {
		want[i] *= 3
	}
	assert.Equal(t, want, down(t, e.s, c))
	assert.NoError(t, h.Close())
	noBadUses(t)
}

// TestHandleDroppedFromFake: a Handle dropped without Close, with a
// routine queued behind a gate, is destroyed by its cleanup once the
// routine has run; its lifetime object is gone too.
func TestHandleDroppedFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	x := up(t, e.s, data[float64](8, 1))
	xh := data[float64](8, 1)
	objects := lifetime.ReadStats().Objects
	allocs := faketest.Call(t, "fake_live_allocations")
	open := gate(t, e.s, 23)
	func() {
		h, err := cublas.NewHandle(e.s, &cublas.Options{WorkspaceBytes: 1 << 12})
		require.NoError(t, err)
		require.NoError(t, cublas.Scal(h, 2, cublas.VectorOf(x)))
	}()
	require.EqualValues(t, 2, liveHandles(t))
	// Collected, its cleanup queued: the destroy waits for the device's
	// work (cuBLAS's implicit synchronisation), held by the gate. (No
	// lifetime.Flush here: it would wait for that destroy.)
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	time.Sleep(20 * time.Millisecond)
	assert.EqualValues(t, 2, liveHandles(t), "destroyed before its routine ran")
	open()
	deadline := time.Now().Add(20 * time.Second)
	for liveHandles(t) != 1 && time.Now().Before(deadline) {
		runtime.GC()
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, 1, liveHandles(t), "the dropped handle was not destroyed")
	for i := range xh {
		xh[i] *= 2
	}
	assert.Equal(t, xh, down(t, e.s, x))
	assert.Equal(t, objects, lifetime.ReadStats().Objects)
	waitFor(t, "fake_live_allocations", allocs) // the workspace is freed
	noBadUses(t)
}

// TestCapturedGemmsFromFake: 100 chained Gemms and device-result
// reductions captured on the handle's stream are held by the graph: the
// operands, the handle and the capture's graph are all closed before the
// executable is launched, 1000 times, each replay recomputing the results
// exactly. A
// host-result reduction inside the capture is refused
// (ErrStreamCaptureUnsupported) and the capture goes on. The handle is
// destroyed once the executable is.
func TestCapturedGemmsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	h, err := cublas.NewHandle(e.s, &cublas.Options{WorkspaceBytes: 1 << 12})
	require.NoError(t, err)
	const m, n, k, chain = 3, 3, 3, 100
	// B a signed permutation: the products stay small integers, exact.
	ah, bh := data[float32](m*k, 1), []float32{0, 0, 1, 1, 0, 0, 0, -1, 0}
	a, err := driver.AllocCopy(e.s, ah)
	require.NoError(t, err)
	b, err := driver.AllocCopy(e.s, bh)
	require.NoError(t, err)
	// chain buffers: c[0] = A·B, c[i] = c[i-1]·B (RowMajor views of
	// column-major data would do as well: the results are compared to the
	// same products computed here).
	cs := make([]*driver.Buffer[float32], chain)
	for i := range cs {
		cs[i], err = driver.Alloc[float32](e.ctx, m*n)
		require.NoError(t, err)
	}
	out := up(t, e.s, make([]float32, m*n))
	norm := up(t, e.s, []float32{0})
	var hostErr error
	before := opsRun(t)
	g, err := graph.Capture(e.s, graph.CaptureGlobal, func(s *driver.Stream) error {
		require.Same(t, h.Stream(), s)
		if err := cublas.Gemm(h, 1, cublas.ColMajorMatrix(a, m, k), cublas.ColMajorMatrix(b, k, n), 0, cublas.ColMajorMatrix(cs[0], m, n)); err != nil {
			return err
		}
		_, hostErr = cublas.Nrm2(h, cublas.VectorOf(cs[0]))
		for i := 1; i < chain; i++ {
			if err := cublas.Gemm(h, 1, cublas.ColMajorMatrix(cs[i-1], m, k), cublas.ColMajorMatrix(b, k, n), 0, cublas.ColMajorMatrix(cs[i], m, n)); err != nil {
				return err
			}
		}
		if err := cublas.AsumTo(h, cublas.VectorOf(cs[chain-1]), cublas.VectorOf(norm)); err != nil {
			return err
		}
		return cublas.Copy(h, cublas.VectorOf(cs[chain-1]), cublas.VectorOf(out))
	})
	require.NoError(t, err)
	assert.ErrorIs(t, hostErr, driver.ErrStreamCaptureUnsupported)
	assert.Contains(t, hostErr.Error(), "cublas: Nrm2:")
	assert.Equal(t, before, opsRun(t), "captured, not run")
	x, err := g.Instantiate()
	require.NoError(t, err)
	// Close everything the graph names.
	require.NoError(t, g.Close())
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	for _, c := range cs {
		require.NoError(t, c.Close())
	}
	require.NoError(t, h.Close())
	assert.EqualValues(t, 2, liveHandles(t), "the executable holds the handle")

	want := gemmWant(ah, bh, m, n, k)
	for i := 1; i < chain; i++ {
		want = gemmWant(want, bh, m, n, k)
	}
	var asum float32
	for _, v := range want {
		asum += max(v, -v)
	}
	const replays = 1000
	for i := 0; i < replays; i++ {
		if i%250 == 0 || i == replays-1 {
			require.NoError(t, out.Memset32(e.s, 0))
			require.NoError(t, norm.Memset32(e.s, 0))
		}
		require.NoError(t, x.Launch(e.s))
		if i%250 == 0 || i == replays-1 {
			assert.Equal(t, want, down(t, e.s, out), "replay %d", i)
			assert.Equal(t, []float32{asum}, down(t, e.s, norm), "replay %d", i)
		}
	}
	require.NoError(t, e.s.Synchronize())
	assert.Equal(t, before+replays*(chain+2), opsRun(t))
	require.NoError(t, x.Close())
	waitFor(t, "fake_cublas_live_handles", 1)
	noBadUses(t)
}

// TestCaptureOnAnotherStreamFromFake: a handle's routines are queued on its
// own stream whatever stream is being captured: inside a capture of
// another stream they run at once and the graph gets nothing.
func TestCaptureOnAnotherStreamFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	other, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer other.Close()
	x := up(t, e.s, []float64{1, 2, 3})
	g, err := graph.Capture(other, graph.CaptureRelaxed, func(*driver.Stream) error {
		return cublas.Scal(e.h, 3, cublas.VectorOf(x))
	})
	require.NoError(t, err)
	defer g.Close()
	assert.Equal(t, []float64{3, 6, 9}, down(t, e.s, x))
	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Empty(t, nodes)
}

// TestStreamClosedBeforeHandleFromFake: the handle holds its stream and
// context: closed by the caller first, they stay usable by the handle's
// routines, and are destroyed once the handle is closed.
func TestStreamClosedBeforeHandleFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.NewContext(0)
	require.NoError(t, err)
	streams := faketest.Call(t, "fake_live_streams")
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	h, err := cublas.NewHandle(s, &cublas.Options{WorkspaceBytes: 1 << 12})
	require.NoError(t, err)
	x, err := driver.AllocCopy(s, []float32{1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, ctx.Close())
	assert.EqualValues(t, streams+1, faketest.Call(t, "fake_live_streams"), "held by the handle")
	require.NoError(t, cublas.Scal(h, 2, cublas.VectorOf(x)))
	got, err := cublas.Asum(h, cublas.VectorOf(x))
	require.NoError(t, err)
	assert.Equal(t, 12.0, got)
	require.NoError(t, x.Close())
	require.NoError(t, h.Close())
	waitNoHandles(t)
	waitFor(t, "fake_live_streams", streams)
	waitFor(t, "fake_live_contexts", 0)
	noBadUses(t)
}
