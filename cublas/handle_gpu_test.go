package cublas_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
)

// TestGPUVersionAndOptions: Version names a cuBLAS of 12 or later and
// where it came from; a handle reports the options it was made with, the
// default workspace filled in (32 MiB from compute capability 9.0, 4 MiB
// before), and a workspace of its own size when asked.
func TestGPUVersionAndOptions(t *testing.T) {
	g := newGPU(t, nil)
	major, minor, patch, path, err := cublas.Version()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, major, 12)
	assert.NotEmpty(t, path)
	t.Logf("cuBLAS %d.%d.%d from %s", major, minor, patch, path)

	cc, _ := g.ctx.Device().ComputeCapability()
	ws := 4 << 20
	if cc >= 9 {
		ws = 32 << 20
	}
	assert.Equal(t, cublas.Options{WorkspaceBytes: ws}, g.h.Options())
	assert.Same(t, g.s, g.h.Stream())
	assert.Same(t, g.ctx, g.h.Context())

	o := cublas.Options{Math: cublas.PedanticMath | cublas.DisallowReducedPrecisionReduction, Atomics: true, WorkspaceBytes: 1 << 20}
	h, err := cublas.NewHandle(g.s, &o)
	require.NoError(t, err)
	assert.Equal(t, o, h.Options())
	require.NoError(t, h.Close())
}

// TestGPUMathModes: the math mode reaches cuBLAS. With entries 1+2⁻¹², a
// 64×64×64 SGEMM gives k·(1+2⁻¹²)² rounded to float32 under PedanticMath
// (and DefaultMath: no TF32 unless NVIDIA_TF32_OVERRIDE); under TF32Math
// cuBLAS may use TF32 tensor cores, whose 10-bit mantissas round each
// entry to 1, giving exactly k (logged: cuBLAS may also choose a float32
// kernel there). Small integers are exact in every mode.
func TestGPUMathModes(t *testing.T) {
	g := newGPU(t, nil)
	const n = 64
	v := float32(1 + math.Ldexp(1, -12))
	fill := func(x float32) []float32 {
		s := make([]float32, n*n)
		for i := range s {
			s[i] = x
		}
		return s
	}
	full := float32(float64(n) * float64(v) * float64(v))
	for _, mode := range []struct {
		name string
		math cublas.Math
	}{{"DefaultMath", cublas.DefaultMath}, {"PedanticMath", cublas.PedanticMath}, {"TF32Math", cublas.TF32Math}} {
		h, err := cublas.NewHandle(g.s, &cublas.Options{Math: mode.math})
		require.NoError(t, err, mode.name)
		a := cublas.ColMajorMatrix(upload(t, g, fill(v)), n, n)
		c := cublas.ColMajorMatrix(upload(t, g, fill(0)), n, n)
		require.NoError(t, cublas.Gemm(h, 1, a, a, 0, c), mode.name)
		got := download(t, g, c.Buf)
		switch mode.math {
		case cublas.TF32Math:
			if got[0] == n {
				t.Logf("TF32Math: TF32 tensor cores used (%v)", got[0])
			} else {
				t.Logf("TF32Math: cuBLAS chose a float32 kernel (%v)", got[0])
			}
		default:
			assert.InDelta(t, full, got[0], float64(full)*1e-6, mode.name)
			assert.NotEqual(t, float32(n), got[0], "%s: the products were rounded to TF32", mode.name)
		}
		ints := cublas.ColMajorMatrix(upload(t, g, fill(3)), n, n)
		require.NoError(t, cublas.Gemm(h, 1, ints, ints, 0, c), mode.name)
		assert.Equal(t, fill(9*n), download(t, g, c.Buf), mode.name)
		require.NoError(t, h.Close())
	}
}
