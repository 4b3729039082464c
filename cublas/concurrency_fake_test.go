//go:build linux

package cublas_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestConcurrentCallsKeepTheirScalarsFromFake: goroutines calling one
// handle at once, each with alphas and betas of its own, each get their
// own: no call runs with another's scalars (cuBLAS reads them at the
// call, from memory the handle shares), and a host result goes to its
// caller.
func TestConcurrentCallsKeepTheirScalarsFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	const workers, rounds, n = 16, 25, 4
	type work struct {
		x, y *driver.Buffer[float64]
		a, c *driver.Buffer[float32]
		dots []float64
	}
	ws := make([]work, workers)
	for g := range ws {
		ws[g] = work{x: up(t, e.s, data[float64](n, g)), y: up(t, e.s, make([]float64, n)),
			a: up(t, e.s, data[float32](n*n, g)), c: up(t, e.s, make([]float32, n*n))}
	}
	var wg sync.WaitGroup
	for g := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &ws[g]
			alpha := float64(g + 1)
			for i := 0; i < rounds; i++ {
				if !assert.NoError(t, cublas.Axpy(e.h, alpha, cublas.VectorOf(w.x), cublas.VectorOf(w.y))) {
					return
				}
				a := cublas.ColMajorMatrix(w.a, n, n)
				if !assert.NoError(t, cublas.Gemm(e.h, float32(g), a, cublas.ColMajorMatrix(w.a, n, n).T(), 1, cublas.ColMajorMatrix(w.c, n, n))) {
					return
				}
				d, err := cublas.Dot(e.h, cublas.VectorOf(w.x), cublas.VectorOf(w.x))
				if !assert.NoError(t, err) {
					return
				}
				w.dots = append(w.dots, d)
			}
		}()
	}
	wg.Wait()
	for g, w := range ws {
		xh, ah := data[float64](n, g), data[float32](n*n, g)
		want := make([]float64, n)
		var dot float64
		for i, v := range xh {
			want[i] = rounds * float64(g+1) * v
			dot += v * v
		}
		assert.Equal(t, want, down(t, e.s, w.y), "worker %d: Axpy", g)
		wc := make([]float32, n*n)
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				for l := 0; l < n; l++ {
					wc[i+j*n] += rounds * float32(g) * ah[i+l*n] * ah[j+l*n]
				}
			}
		}
		assert.Equal(t, wc, down(t, e.s, w.c), "worker %d: Gemm", g)
		for _, d := range w.dots {
			assert.Equal(t, dot, d, "worker %d: Dot", g)
		}
	}
	noBadUses(t)
}

// TestCallsLeaveTheThreadAsFoundFromFake: a routine called on a thread
// with another context current (or none) runs in the handle's context
// (the fake counts a routine in another as a bad use) and leaves the
// thread's context as it was.
func TestCallsLeaveTheThreadAsFoundFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	other, err := dev.NewContext(0)
	require.NoError(t, err)
	defer other.Close()
	var oh cu.CUcontext
	require.NoError(t, other.Raw(func(h uintptr) error { oh = cu.CUcontext(h); return nil }))
	x := up(t, e.s, []float32{1, 2, 3, 4})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, current := range []cu.CUcontext{oh, 0} {
		require.NoError(t, cu.CtxSetCurrent(current))
		require.NoError(t, cublas.Scal(e.h, 2, cublas.VectorOf(x)))
		s, err := cublas.Asum(e.h, cublas.VectorOf(x))
		require.NoError(t, err)
		assert.Positive(t, s)
		var now cu.CUcontext
		require.NoError(t, cu.CtxGetCurrent(&now))
		assert.Equal(t, current, now, "the thread's context is as it was")
	}
	require.NoError(t, cu.CtxSetCurrent(0))
	assert.Equal(t, []float32{4, 8, 12, 16}, down(t, e.s, x))
	noBadUses(t)
}
