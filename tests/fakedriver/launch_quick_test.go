//go:build linux

package fakedriver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// learnLaunch launches fn twice and waits: the first launch reads the
// kernel's parameters, the second remembers the buffer type, and later
// launches with the same types take Launch's quick path.
func learnLaunch(t *testing.T, s *driver.Stream, fn *driver.Function, args ...any) {
	t.Helper()
	for range 2 {
		require.NoError(t, s.Launch(fn, driver.Grid(1), driver.Block(1), args...))
	}
	require.NoError(t, s.Synchronize())
}

// Scalars of 1 and 2 bytes reach the kernel with their own bytes, through
// Launch's general path (the first launch of a kernel reads its
// parameters) and through its quick path (every later launch):
// pack(out, uchar a, ushort b, uchar c) stores a | b<<8 | c<<24.
func TestLaunchQuickSmallScalars(t *testing.T) {
	f := ltSetup(t)
	pack, err := f.mod.Function("pack")
	require.NoError(t, err)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	g := driver.Grid(1)
	got := make([]uint32, 1)
	for _, c := range []struct {
		a, b, c any
		want    uint32
	}{
		{uint8(0xab), uint16(0x1234), uint8(0x56), 0x561234ab},
		{int8(-1), int16(-2), true, 0x01fffeff},
		{false, uint16(0), int8(0x7f), 0x7f000000},
		{true, int16(0x7fff), false, 0x007fff01},
	} {
		for pass := range 3 { // the first two launches of all take the general path
			require.NoError(t, out.Memset32(0))
			require.NoError(t, f.s.Launch(pack, g, g, out, c.a, c.b, c.c))
			require.NoError(t, f.s.Synchronize())
			require.NoError(t, out.CopyToHost(got))
			assert.Equal(t, c.want, got[0], "%T %T %T, pass %d", c.a, c.b, c.c, pass)
		}
	}
	// A scalar of the wrong size is refused on either path, and explained.
	err = f.s.Launch(pack, g, g, out, uint16(1), uint16(2), uint8(3))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorContains(t, err, "argument 1: the kernel expects 1 bytes, got 2")
	err = f.s.Launch(pack, g, g, out, uint8(1), uint16(2), uint32(3))
	assert.ErrorContains(t, err, "argument 3: the kernel expects 1 bytes, got 4")
	err = f.s.Launch(pack, g, g, uint8(1), uint8(1), uint16(2), uint8(3))
	assert.ErrorContains(t, err, "argument 0: the kernel expects 8 bytes, got 1")
}

// A launch that CUDA refuses, on Launch's and LaunchArgs' quick paths,
// returns CUDA's error and holds nothing afterwards: the buffer, the Args
// and the stream close and free as if the launch had not happened.
func TestLaunchQuickFailedLaunchReleases(t *testing.T) {
	f := ltSetup(t)
	before := lifetime.ReadStats()
	liveBefore := fcall(t, "fake_live_allocations")
	g := driver.Grid(1)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	learnLaunch(t, s, f.add4, out, uint32(1), uint32(2), uint32(3))
	args, err := f.add4.NewArgs(out, uint32(4), uint32(5), uint32(6))
	require.NoError(t, err)

	faketest.FailCalls(t, "cuLaunchKernel", 1, 0, 2) // CUDA_ERROR_INVALID_VALUE, twice
	err = s.Launch(f.add4, g, g, out, uint32(1), uint32(2), uint32(3))
	assert.ErrorIs(t, err, driver.ErrInvalidValue)
	err = s.LaunchArgs(args, g, g)
	assert.ErrorIs(t, err, driver.ErrInvalidValue)

	require.NoError(t, s.LaunchArgs(args, g, g), "launches again")
	require.NoError(t, s.Synchronize())
	v := make([]uint32, 1)
	require.NoError(t, out.CopyToHost(v))
	assert.Equal(t, uint32(15), v[0])
	require.NoError(t, args.Close())
	require.NoError(t, out.Close())
	require.NoError(t, s.Close())
	lifetime.Flush()
	assert.Equal(t, before.Objects, lifetime.ReadStats().Objects, "nothing kept a reference")
	assert.Equal(t, liveBefore, fcall(t, "fake_live_allocations"), "the buffer was freed")
}

// Launches captured into a graph through the quick paths hand the graph
// their buffers and kernel: closed before the graph runs, they are still
// there when it does.
func TestLaunchQuickCaptured(t *testing.T) {
	f := ltSetup(t)
	g := driver.Grid(1)
	mod, err := f.ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	add4, err := mod.Function("add4")
	require.NoError(t, err)
	a, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	b, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	learnLaunch(t, f.s, add4, a, uint32(0), uint32(0), uint32(0))
	args, err := add4.NewArgs(b, uint32(10), uint32(20), uint32(30))
	require.NoError(t, err)
	require.NoError(t, f.s.Synchronize())

	sc, err := graph.BeginCapture(f.s, graph.CaptureRelaxed)
	require.NoError(t, err)
	require.NoError(t, f.s.Launch(add4, g, g, a, uint32(1), uint32(2), uint32(3)))
	require.NoError(t, f.s.LaunchArgs(args, g, g))
	gr, err := sc.End()
	require.NoError(t, err)
	defer gr.Close()
	ex, err := gr.Instantiate()
	require.NoError(t, err)
	defer ex.Close()

	// Everything the launches named is closed; the graph holds it.
	require.NoError(t, args.Close())
	require.NoError(t, mod.Close())
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, ex.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses"), "the graph's kernels wrote to live memory")
	assert.Zero(t, fcall(t, "fake_bad_handle_uses"), "the graph's kernels ran in a loaded module")
}
