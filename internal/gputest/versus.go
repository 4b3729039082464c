package gputest

import (
	"sort"
	"testing"
	"time"
)

// Variant is one way of doing the same work, for Versus: Run does it n
// times.
type Variant struct {
	Name string
	Run  func(n int) error
}

// Versus times each group's variants in interleaved rounds, rotating the
// order each round so that drift on the machine cancels out, and reports
// per variant the median ns per call ("<name>-ns/op") and, for all but the
// first (the baseline, usually C), the median over rounds of the ratio to
// the baseline of the same round ("<name>-xC").
func Versus(b *testing.B, rounds, n int, groups ...[]Variant) {
	for _, group := range groups {
		times := make([][]float64, len(group))
		for r := 0; r < rounds; r++ {
			for k := range group {
				i := (k + r) % len(group)
				start := time.Now()
				if err := group[i].Run(n); err != nil {
					b.Fatalf("%s: %v", group[i].Name, err)
				}
				times[i] = append(times[i], float64(time.Since(start).Nanoseconds())/float64(n))
			}
		}
		for k, v := range group {
			b.ReportMetric(Median(times[k]), v.Name+"-ns/op")
			if k > 0 {
				ratios := make([]float64, rounds)
				for r := range ratios {
					ratios[r] = times[k][r] / times[0][r]
				}
				b.ReportMetric(Median(ratios), v.Name+"-xC")
			}
		}
	}
}

// Median is the median of xs (xs is not changed).
func Median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// V makes a Variant.
func V(name string, run func(n int) error) Variant { return Variant{Name: name, Run: run} }
