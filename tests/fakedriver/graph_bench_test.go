//go:build linux

package fakedriver_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

// BenchmarkFakeNodeAdd is package graph's share of a kernel-node add with
// two buffer arguments and a scalar (fakecuda's copyi, the shape of
// BenchmarkNodeAdd's kernel on a GPU), on the fake driver (whose node add
// costs little), with -benchmem's allocation count. Graphs are replaced
// every 4096 nodes, outside the timer, so that they stay small.
func BenchmarkFakeNodeAdd(b *testing.B) {
	f, copyi, x := copyiBench(b)
	y, err := driver.Alloc[int32](f.ctx, 256)
	require.NoError(b, err)
	defer y.Close()
	g, err := graph.New(f.ctx)
	require.NoError(b, err)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i++; i%4096 == 0 {
			b.StopTimer()
			require.NoError(b, g.Close())
			g, err = graph.New(f.ctx)
			require.NoError(b, err)
			b.StartTimer()
		}
		if _, err := g.KernelWith(copyi, graphCfg, x, y, int32(256)); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, g.Close())
}

// BenchmarkFakeExecLaunch is package graph's share of an executable's
// launch (one kernel node) on the fake driver, with -benchmem's allocation
// count; the stream is synchronised every 4096 launches, outside the timer.
func BenchmarkFakeExecLaunch(b *testing.B) {
	f, copyi, x := copyiBench(b)
	g, err := graph.New(f.ctx)
	require.NoError(b, err)
	defer g.Close()
	_, err = g.KernelWith(copyi, graphCfg, x, x, int32(256))
	require.NoError(b, err)
	e, err := g.Instantiate()
	require.NoError(b, err)
	defer e.Close()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i++; i%4096 == 0 {
			b.StopTimer()
			require.NoError(b, f.s.Synchronize())
			b.StartTimer()
		}
		if err := e.Launch(f.s); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, f.s.Synchronize())
}

// copyiBench is the setup of the graph benchmarks: the fake driver,
// fakecuda's copyi kernel and a buffer of 256 int32 (closed by b's
// cleanup).
func copyiBench(b *testing.B) (*fixture, *driver.Function, *driver.Buffer[int32]) {
	f := setup(b)
	copyi, err := f.mod.Function("copyi")
	require.NoError(b, err)
	x, err := driver.Alloc[int32](f.ctx, 256)
	require.NoError(b, err)
	b.Cleanup(func() { _ = x.Close() })
	return f, copyi, x
}
