package cublas_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// TestGPUGemmGrouped: three groups of different shapes, layouts and
// scalars in one call, float64, exact against plain Go (small integers).
func TestGPUGemmGrouped(t *testing.T) {
	g := newGPU(t, nil)
	r := rand.New(rand.NewPCG(7, 8))
	type spec struct {
		m, n, k, count int
		layout         cublas.Layout
		alpha, beta    float64
	}
	specs := []spec{{4, 3, 5, 2, cublas.ColMajor, 1, 0}, {2, 6, 3, 3, cublas.RowMajor, 2, -1}, {5, 1, 2, 1, cublas.RowMajor, -1, 2}}
	var groups []cublas.GemmGroup[float64]
	type host struct{ a, b, c []float64 }
	var hosts [][]host
	for _, sp := range specs {
		grp := cublas.GemmGroup[float64]{Alpha: sp.alpha, Beta: sp.beta}
		var hs []host
		for range sp.count {
			h := host{smallInts[float64](r, sp.m*sp.k), smallInts[float64](r, sp.k*sp.n), smallInts[float64](r, sp.m*sp.n)}
			mk := func(b *driver.Buffer[float64], rows, cols int) cublas.Matrix[float64] {
				if sp.layout == cublas.RowMajor {
					return cublas.RowMajorMatrix(b, rows, cols)
				}
				return cublas.ColMajorMatrix(b, rows, cols)
			}
			grp.A = append(grp.A, mk(upload(t, g, h.a), sp.m, sp.k))
			grp.B = append(grp.B, mk(upload(t, g, h.b), sp.k, sp.n))
			grp.C = append(grp.C, mk(upload(t, g, h.c), sp.m, sp.n))
			hs = append(hs, h)
		}
		groups = append(groups, grp)
		hosts = append(hosts, hs)
	}
	require.NoError(t, cublas.GemmGrouped(g.h, groups))
	for gi, sp := range specs {
		at := func(x []float64, i, j, rows, cols int) float64 {
			if sp.layout == cublas.RowMajor {
				return x[i*cols+j]
			}
			return x[i+j*rows]
		}
		for pi, h := range hosts[gi] {
			want := make([]float64, sp.m*sp.n)
			for i := 0; i < sp.m; i++ {
				for j := 0; j < sp.n; j++ {
					var s float64
					for l := 0; l < sp.k; l++ {
						s += at(h.a, i, l, sp.m, sp.k) * at(h.b, l, j, sp.k, sp.n)
					}
					v := sp.alpha*s + sp.beta*at(h.c, i, j, sp.m, sp.n)
					if sp.layout == cublas.RowMajor {
						want[i*sp.n+j] = v
					} else {
						want[i+j*sp.m] = v
					}
				}
			}
			near(t, "GemmGrouped", want, download(t, g, groups[gi].C[pi].Buf), 0)
		}
	}
}
