package cublas_test

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

// zeroOnes is n random values in {0, 1}.
func zeroOnes(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.IntN(2))
	}
	return out
}

// TestGPUCaptured100GemmsReplayed: 100 GEMMs D += A_i·B_i captured with
// graph.Capture on a handle's stream; then the graph, the 200 operand
// buffers and the handle are closed and dropped (runtime.GC) and the
// executable is replayed 1000 times: D is exactly D0 + 1000·Σ A_i·B_i
// (entries of A_i and B_i in {0, 1}: every sum is an integer below 2^24,
// exact in float32). Inside the capture, a reduction whose result goes
// to the host is refused (driver.ErrStreamCaptureUnsupported) and the
// capture goes on.
func TestGPUCaptured100GemmsReplayed(t *testing.T) {
	g := newGPU(t, nil)
	r := rand.New(rand.NewPCG(41, 42))
	const gemms, replays, m, n, k = 100, 1000, 16, 16, 8
	hd := smallInts[float32](r, m*n)
	d, err := driver.AllocCopy(g.s, hd)
	require.NoError(t, err)
	defer d.Close()
	D := cublas.ColMajorMatrix(d, m, n)
	ha, hb := make([][]float32, gemms), make([][]float32, gemms)
	for i := range gemms {
		ha[i], hb[i] = zeroOnes(r, m*k), zeroOnes(r, k*n)
	}
	exe := captureGemms(t, g, D, ha, hb, k)
	defer exe.Close()
	// Nothing but the executable refers to the operands, the graph or the
	// handle any more.
	runtime.GC()
	runtime.GC()

	for range replays {
		require.NoError(t, exe.Launch(g.s))
	}
	require.NoError(t, g.s.Synchronize())
	require.NoError(t, exe.Err())

	want := slices.Clone(hd)
	for i := range gemms {
		for row := range m {
			for col := range n {
				var s float32
				for l := range k {
					s += ha[i][row+l*m] * hb[i][l+col*k]
				}
				want[row+col*m] += replays * s
			}
		}
	}
	assert.Equal(t, want, download(t, g, d))
}

// captureGemms uploads the m×k A_i (ha) and k×n B_i (hb), captures
// D += A_i·B_i for each i on a handle of its own, with a host-result
// reduction refused in the middle, instantiates the graph and closes
// everything but the executable, which it returns.
func captureGemms(t *testing.T, g *gpu, D cublas.Matrix[float32], ha, hb [][]float32, k int) *graph.Exec {
	m, n := D.Rows, D.Cols
	as, bs := make([]*driver.Buffer[float32], len(ha)), make([]*driver.Buffer[float32], len(hb))
	var err error
	for i := range ha {
		as[i], err = driver.AllocCopy(g.s, ha[i])
		require.NoError(t, err)
		bs[i], err = driver.AllocCopy(g.s, hb[i])
		require.NoError(t, err)
	}
	h, err := cublas.NewHandle(g.s, nil)
	require.NoError(t, err)
	// One GEMM of the shape before the capture, so that cuBLAS has loaded
	// its kernels.
	warm, err := driver.AllocZeroed[float32](g.s, m*n)
	require.NoError(t, err)
	require.NoError(t, cublas.Gemm(h, 1, cublas.ColMajorMatrix(as[0], m, k), cublas.ColMajorMatrix(bs[0], k, n), 0, cublas.ColMajorMatrix(warm, m, n)))
	require.NoError(t, g.s.Synchronize())
	require.NoError(t, warm.Close())

	gr, err := graph.Capture(g.s, graph.CaptureRelaxed, func(s *driver.Stream) error {
		for i := range as {
			if err := cublas.Gemm(h, 1, cublas.ColMajorMatrix(as[i], m, k), cublas.ColMajorMatrix(bs[i], k, n), 1, D); err != nil {
				return err
			}
			if i == len(as)/2 {
				_, err := cublas.Dot(h, cublas.VectorOf(as[0]), cublas.VectorOf(as[1]))
				assert.ErrorIs(t, err, driver.ErrStreamCaptureUnsupported, "a host result inside a capture")
			}
		}
		return nil
	})
	require.NoError(t, err)
	exe, err := gr.Instantiate()
	require.NoError(t, err)
	require.NoError(t, gr.Close())
	for i := range as {
		require.NoError(t, as[i].Close())
		require.NoError(t, bs[i].Close())
	}
	require.NoError(t, h.Close())
	return exe
}

// TestGPUHandleFromGoroutines: one handle used by 8 goroutines at once,
// each with its own operands and its own alpha, interleaving Gemm (queued)
// with Dot (which waits for its result): every result is exact, so no
// call ran with another goroutine's scalars or read another's result.
func TestGPUHandleFromGoroutines(t *testing.T) {
	g := newGPU(t, nil)
	const workers, rounds, m, n, k = 8, 50, 24, 20, 12
	type work struct {
		a, b, c, x *driver.Buffer[float32]
		want       []float32
		dot        float32
	}
	ws := make([]work, workers)
	for w := range ws {
		r := rand.New(rand.NewPCG(43, uint64(w)))
		ha, hb, hx := smallInts[float32](r, m*k), smallInts[float32](r, k*n), smallInts[float32](r, 64)
		alpha := float32(w + 1)
		ws[w] = work{a: upload(t, g, ha), b: upload(t, g, hb), c: upload(t, g, make([]float32, m*n)), x: upload(t, g, hx)}
		ws[w].want = make([]float32, m*n)
		for i := range m {
			for j := range n {
				var s float32
				for l := range k {
					s += ha[i+l*m] * hb[l+j*k]
				}
				ws[w].want[i+j*m] = alpha * s
			}
		}
		for _, v := range hx {
			ws[w].dot += v * v
		}
	}
	var wg sync.WaitGroup
	for w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := ws[w]
			for range rounds {
				if !assert.NoError(t, cublas.Gemm(g.h, float32(w+1), cublas.ColMajorMatrix(x.a, m, k), cublas.ColMajorMatrix(x.b, k, n), 0, cublas.ColMajorMatrix(x.c, m, n))) {
					return
				}
				dot, err := cublas.Dot(g.h, cublas.VectorOf(x.x), cublas.VectorOf(x.x))
				if !assert.NoError(t, err) || !assert.Equal(t, x.dot, dot, "worker %d's Dot", w) {
					return
				}
			}
		}()
	}
	wg.Wait()
	for w := range ws {
		assert.Equal(t, ws[w].want, download(t, g, ws[w].c), "worker %d's C", w)
	}
}
