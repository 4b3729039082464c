//go:build linux

package fakedriver_test

import (
	"sort"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
)

// BenchmarkFakeVersusRaw times, on the fake driver, what LaunchArgs and
// Launch cost beyond the raw table call with the same kernel and
// arguments, in interleaved rounds (-test.benchtime=1x): "-minus-raw-ns"
// is the median over rounds of the difference, "-ns" the median time per
// call. With FAKE_EVICT_KB=64 FAKE_EVICT_CODE=1 each fake launch evicts the
// caller's data and code from the CPU caches, as libcuda's does. It is
// for studying purecuda's own share of a launch without a GPU; timings
// against C on a GPU are BenchmarkVersusC's (driver).
func BenchmarkFakeVersusRaw(b *testing.B) {
	f := setup(b)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(b, err)
	defer out.Close()
	var fh, eh, sh uintptr
	require.NoError(b, f.add4.Raw(func(h uintptr) error { fh = h; return nil }))
	require.NoError(b, f.empty.Raw(func(h uintptr) error { eh = h; return nil }))
	require.NoError(b, f.s.Raw(func(h uintptr) error { sh = h; return nil }))
	p, x, y, z := uint64(out.Ptr()), uint32(1), uint32(2), uint32(3)
	params := []unsafe.Pointer{unsafe.Pointer(&p), unsafe.Pointer(&x), unsafe.Pointer(&y), unsafe.Pointer(&z)}
	a4, err := f.add4.NewArgs(out, uint32(1), uint32(2), uint32(3))
	require.NoError(b, err)
	ae, err := f.empty.NewArgs()
	require.NoError(b, err)
	vs := []struct {
		name string
		fn   func() error
	}{
		{"rawE", func() error {
			return cu.LaunchKernel(cu.CUfunction(eh), 1, 1, 1, 1, 1, 1, 0, cu.CUstream(sh), nil, nil)
		}},
		{"ArgsE", func() error { return f.s.LaunchArgs(ae, g1, b1) }},
		{"LaunchE", func() error { return f.s.Launch(f.empty, g1, b1) }},
		{"raw4", func() error {
			return cu.LaunchKernel(cu.CUfunction(fh), 1, 1, 1, 1, 1, 1, 0, cu.CUstream(sh), &params[0], nil)
		}},
		{"Args4", func() error { return f.s.LaunchArgs(a4, g1, b1) }},
		{"Launch4", func() error { return f.s.Launch(f.add4, g1, b1, out, uint32(1), uint32(2), uint32(3)) }},
	}
	const rounds, n = 61, 2000
	times := make([][]float64, len(vs))
	for b.Loop() {
		for r := 0; r < rounds; r++ {
			for k := range vs {
				i := (k + r) % len(vs)
				t := time.Now()
				for j := 0; j < n; j++ {
					_ = vs[i].fn()
				}
				times[i] = append(times[i], float64(time.Since(t).Nanoseconds())/n)
			}
			require.NoError(b, f.s.Synchronize())
		}
	}
	med := func(xs []float64) float64 {
		ys := append([]float64(nil), xs...)
		sort.Float64s(ys)
		return ys[len(ys)/2]
	}
	for i, v := range vs {
		b.ReportMetric(med(times[i]), v.name+"-ns")
		base := 0 // rawE for the empty kernel, raw4 for add4
		if i >= 3 {
			base = 3
		}
		if i != base {
			d := make([]float64, len(times[i]))
			for r := range d {
				d[r] = times[i][r] - times[base][r]
			}
			b.ReportMetric(med(d), v.name+"-minus-raw-ns")
		}
	}
	require.NoError(b, a4.Close())
	require.NoError(b, ae.Close())
}
