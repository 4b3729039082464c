package cublas_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// TestGPUMatmulPlanAlignedOffsets: a plan runs on matrices and a bias that
// start 16 bytes into their buffers, as Run allows: A, B, C and D views
// at Offset 4 (float32), the bias, or the bias gradient, a Buffer.Slice
// 4 elements in; column-major and row-major, the epilogues Bias, ReLUBias
// and BGradA (where cuBLASLt offers it), beta 1 with C apart from D.
// Exact (small integers, halves): D as plain Go computes it, nothing
// written before D's view or the gradient's slice, C only read.
func TestGPUMatmulPlanAlignedOffsets(t *testing.T) { matmulAtOffsets(t, 4) }

// TestGPUMatmulPlanBiasAnyElement: the bias, or the bias gradient, may
// start at any element (Run's doc): slices 1, 2 and 3 float32 elements
// in, the matrices as in TestGPUMatmulPlanAlignedOffsets. It runs in a
// process of its own: were cuBLASLt to assume more alignment than the
// plan promised it, the misaligned access would be a sticky error, the
// end of every later GPU test of the process.
func TestGPUMatmulPlanBiasAnyElement(t *testing.T) {
	if os.Getenv(biasChild) == "" {
		newGPU(t, nil) // skips without a GPU or cuBLAS
		cmd := exec.Command(os.Args[0], "-test.run", "^TestGPUMatmulPlanBiasAnyElement$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), biasChild+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a child process:\n%s", out)
		require.NoError(t, err)
		require.Contains(t, string(out), "--- PASS: TestGPUMatmulPlanBiasAnyElement")
		return
	}
	for _, boff := range []int{1, 2, 3} {
		matmulAtOffsets(t, boff)
	}
}

// biasChild is set in the process TestGPUMatmulPlanBiasAnyElement runs
// its body in.
const biasChild = "PURECUDA_BIAS_ANY_ELEMENT_CHILD"

// matmulAtOffsets is TestGPUMatmulPlanAlignedOffsets with the bias (or
// the gradient) boff elements into its buffer.
func matmulAtOffsets(t *testing.T, boff int) {
	g := newGPU(t, nil)
	const m, n, k, off = 64, 48, 32, 4
	fill := func(n int, f func(i int) float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = f(i)
		}
		return v
	}
	ah := fill(m*k+off, func(i int) float32 { return float32(i%5 - 2) })
	bh := fill(k*n+off, func(i int) float32 { return float32(i%3 - 1) })
	ch := fill(m*n+off, func(i int) float32 { return float32(i%7 - 3) })
	da, db, dc := upload(t, g, ah), upload(t, g, bh), upload(t, g, ch)
	dd := upload(t, g, make([]float32, m*n+off))
	for _, l := range []cublas.Layout{cublas.ColMajor, cublas.RowMajor} {
		view := func(b *driver.Buffer[float32], rows, cols int) cublas.Matrix[float32] {
			return cublas.Matrix[float32]{Buf: b, Offset: off, Rows: rows, Cols: cols, Layout: l}
		}
		A, B, C, D := view(da, m, k), view(db, k, n), view(dc, m, n), view(dd, m, n)
		for _, epi := range []cublas.Epilogue{cublas.EpilogueBias, cublas.EpilogueReLUBias, cublas.EpilogueBGradA} {
			name := fmt.Sprintf("layout %d epilogue %d bias offset %d", l, epi, boff)
			p, err := cublas.NewMatmulPlan(g.h, A, B, D, &cublas.MatmulOptions{Epilogue: epi})
			if epi == cublas.EpilogueBGradA && errors.Is(err, cublas.ErrNotSupported) {
				t.Logf("%s: cuBLASLt offers no algorithm: %v", name, err) // as the training epilogues' test allows
				continue
			}
			require.NoError(t, err, name)
			// The bias: one element per row of a column-major D, per column
			// of a row-major one; BGradA's gradient: one per row of D.
			nb := m
			if l == cublas.RowMajor && epi != cublas.EpilogueBGradA {
				nb = n
			}
			biasH := fill(nb+boff, func(i int) float32 { return float32(i%4) - 1.5 })
			if epi == cublas.EpilogueBGradA {
				biasH = fill(nb+boff, func(int) float32 { return 999 })
			}
			full := upload(t, g, biasH)
			bias, err := full.Slice(boff, boff+nb)
			require.NoError(t, err, name)
			require.NoError(t, dd.Memset8(g.s, 0xff), name) // NaN: D must be written, the rest not
			require.NoError(t, p.Run(1, A, B, 1, C, D, bias), name)
			got := download(t, g, dd)
			bad := 0
			for i := range m {
				for j := range n {
					var want float64
					for x := range k {
						want += float64(ah[idx(A, i, x)]) * float64(bh[idx(B, x, j)])
					}
					want += float64(ch[idx(C, i, j)])
					bi := i
					if l == cublas.RowMajor {
						bi = j
					}
					if epi != cublas.EpilogueBGradA {
						want += float64(biasH[boff+bi])
					}
					if epi == cublas.EpilogueReLUBias {
						want = math.Max(want, 0)
					}
					if gv := float64(got[idx(D, i, j)]); gv != want && bad < 3 {
						t.Errorf("%s: D[%d,%d] = %v, want %v", name, i, j, gv, want)
						bad++
					}
				}
			}
			for x := range off {
				assert.True(t, math.IsNaN(float64(got[x])), "%s: element %d, before D's view, written", name, x)
			}
			assert.Equal(t, ch, download(t, g, dc), "%s: C is only read", name)
			if epi == cublas.EpilogueBGradA { // g[i] = Σ_l A[i, l]
				gh := download(t, g, full)
				assert.Equal(t, biasH[:boff], gh[:boff], "%s: before the gradient's slice", name)
				for i := range m {
					var want float32
					for x := range k {
						want += ah[idx(A, i, x)]
					}
					assert.Equal(t, want, gh[boff+i], "%s: gradient[%d]", name, i)
				}
			}
			assert.NoError(t, bias.Close(), name)
			assert.NoError(t, p.Close(), name)
		}
	}
}
