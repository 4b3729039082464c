package graph

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/lifetime"
)

// A memcpy node on a Go slice reads and writes the slice when it runs, in
// stream order, as it would pinned memory. CUDA copies pageable memory out
// of order: an H200 replaying "copy in → copy out → host node that changes
// the input" back to back copied stale input in 99 of 100 replays before
// Slice registered its memory.

// TestGPUSliceNodesReplayInOrder: 100 replays launched back to back; each
// replay's host node checks that the output is the input of that replay,
// then changes the input for the next one.
func TestGPUSliceNodesReplayInOrder(t *testing.T) {
	gputest.Require(t)
	e, s := setup(t)
	const n = 1 << 16 // 256 KiB: past CUDA's call-time read of small pageable copies
	ran, wrong := replays(t, e, s, n, Slice[int32])
	assert.EqualValues(t, 100, ran)
	assert.Zero(t, wrong, "replays that copied another replay's input")
	// The same graph on unregistered Go memory (RawHost), which is what
	// Slice named before it registered its memory: CUDA decides how many
	// replays go wrong, so this is reported, not checked.
	_, pageable := replays(t, e, s, n, func(p []int32) Operand {
		return RawHost(uintptr(unsafe.Pointer(&p[0])), 4*len(p), nil)
	})
	t.Logf("the same graph on pageable memory (what Slice was before it registered): %d of 100 replays wrong", pageable)
}

// replays builds "copy in → copy out → host node that checks the output
// and changes the input" on n-element Go slices named through operand,
// launches it 100 times back to back, and returns how many replays ran and
// how many copied another replay's input.
func replays(t *testing.T, e *testEnv, s *driver.Stream, n int, operand func([]int32) Operand) (ran int32, wrong int) {
	in, out := make([]int32, n), make([]int32, n)
	dev, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	defer dev.Close()
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	up, err := g.Memcpy(Device(dev), operand(in))
	require.NoError(t, err)
	down, err := g.After(up).Memcpy(operand(out), Device(dev))
	require.NoError(t, err)
	_, err = g.After(down).HostFunc(func() {
		for i := range out {
			if out[i] != ran+int32(i) {
				wrong++
				break
			}
		}
		ran++
		for i := range in {
			in[i] = ran + int32(i)
		}
	})
	require.NoError(t, err)
	for i := range in {
		in[i] = int32(i)
	}
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	for range 100 {
		require.NoError(t, exe.Launch(s))
	}
	require.NoError(t, s.Synchronize())
	require.NoError(t, exe.Err())
	runtime.KeepAlive(in)
	runtime.KeepAlive(out)
	return ran, wrong
}

// TestGPUSliceNodesHostNodeBetweenLaunches is the shape of the C probe: a
// host node increments the input after each replay; after 5 launches back
// to back the last copy out holds the input after 4 increments.
func TestGPUSliceNodesHostNodeBetweenLaunches(t *testing.T) {
	gputest.Require(t)
	e, s := setup(t)
	const n = 1 << 20 // 4 MiB, pieces of which CUDA would read at different times if pageable
	in, out := make([]int32, n), make([]int32, n)
	dev, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	defer dev.Close()
	g, err := New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	up, err := g.Memcpy(Device(dev), Slice(in))
	require.NoError(t, err)
	down, err := g.After(up).Memcpy(Slice(out), Device(dev))
	require.NoError(t, err)
	_, err = g.After(down).HostFunc(func() {
		for i := range in {
			in[i]++
		}
	})
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	for range 5 {
		require.NoError(t, exe.Launch(s))
	}
	require.NoError(t, s.Synchronize())
	bad := 0
	for i := range out {
		if out[i] != 4 {
			bad++
		}
	}
	assert.Zero(t, bad, "elements of the last copy out not 4 (first: %d)", out[0])
	assert.EqualValues(t, 5, in[0])
}

// TestGPUSlicesSharingAPage: two small slices on one page, each in a node
// of its own graph, and one dropped while the other is still used: pages
// are registered once and stay registered while one of them needs them.
func TestGPUSlicesSharingAPage(t *testing.T) {
	gputest.Require(t)
	e, s := setup(t)
	backing := make([]int32, 64) // one small object: both slices on one page
	a, b := backing[:16], backing[32:48]
	dev, err := driver.Alloc[int32](e.ctx, 16)
	require.NoError(t, err)
	defer dev.Close()
	build := func(dst []int32, v int32) (*Graph, *Exec) {
		g, err := New(e.ctx)
		require.NoError(t, err)
		k, err := g.Kernel(e.fn["fill"], driver.Grid(1), driver.Block(16), dev, v, int32(16))
		require.NoError(t, err)
		_, err = g.After(k).Memcpy(Slice(dst), Device(dev))
		require.NoError(t, err)
		exe, err := g.Instantiate()
		require.NoError(t, err)
		return g, exe
	}
	ga, ea := build(a, 100)
	gb, eb := build(b, 200)
	require.NoError(t, ea.Launch(s))
	require.NoError(t, eb.Launch(s))
	require.NoError(t, s.Synchronize())
	assert.EqualValues(t, 100, a[0])
	assert.EqualValues(t, 215, b[15])
	// Close a's graph: b's node still needs the shared page registered.
	require.NoError(t, ea.Close())
	require.NoError(t, ga.Close())
	lifetime.Flush()
	clear(backing)
	require.NoError(t, eb.Launch(s))
	require.NoError(t, s.Synchronize())
	assert.EqualValues(t, 200, b[0])
	assert.Zero(t, a[0], "a's graph is gone")
	require.NoError(t, eb.Close())
	require.NoError(t, gb.Close())
}

// BenchmarkGraphSliceMemcpy: a launch of a graph of one 64 KiB host-to-
// device memcpy node and its wait, from a Go slice (registered by Slice),
// from a HostBuffer, and from the same Go slice unregistered (Raw: what
// Slice was before it registered its memory).
func BenchmarkGraphSliceMemcpy(b *testing.B) {
	gputest.Require(b)
	e, s := setup(b)
	const n = 16 << 10
	dev, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(b, err)
	defer dev.Close()
	host := make([]int32, n)
	pinned, err := driver.AllocHost[int32](e.ctx, n, driver.HostAllocDefault)
	require.NoError(b, err)
	defer pinned.Close()
	for _, c := range []struct {
		name string
		src  Operand
	}{
		{"Slice", Slice(host)},
		{"HostBuffer", Host(pinned)},
		{"pageable", RawHost(uintptr(unsafe.Pointer(&host[0])), 4*n, nil)},
	} {
		b.Run(c.name, func(b *testing.B) {
			g, err := New(e.ctx)
			require.NoError(b, err)
			defer g.Close()
			_, err = g.Memcpy(Device(dev), c.src)
			require.NoError(b, err)
			exe, err := g.Instantiate()
			require.NoError(b, err)
			defer exe.Close()
			b.ReportAllocs()
			for b.Loop() {
				if err := exe.Launch(s); err != nil {
					b.Fatal(err)
				}
				if err := s.Synchronize(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestGPUCapturedSliceCopiesReplayInOrder: stream copies of Go slices
// captured into a graph read and write the slices at every replay, in
// stream order, like the nodes Slice makes.
func TestGPUCapturedSliceCopiesReplayInOrder(t *testing.T) {
	gputest.Require(t)
	e, s := setup(t)
	const n = 1 << 16
	in, out := make([]int32, n), make([]int32, n)
	dev, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	defer dev.Close()
	replay, wrong := int32(0), 0
	g, err := Capture(s, CaptureThreadLocal, func(s *driver.Stream) error {
		if err := dev.CopyFromHostAsync(s, in); err != nil {
			return err
		}
		if err := dev.CopyToHostAsync(s, out); err != nil {
			return err
		}
		return s.LaunchHostFunc(func() {
			if out[n-1] != replay+n-1 || out[0] != replay {
				wrong++
			}
			replay++
			for i := range in {
				in[i] = replay + int32(i)
			}
		})
	})
	require.NoError(t, err)
	defer g.Close()
	for i := range in {
		in[i] = int32(i)
	}
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	for range 50 {
		require.NoError(t, exe.Launch(s))
	}
	require.NoError(t, s.Synchronize())
	require.NoError(t, exe.Err())
	assert.EqualValues(t, 50, replay)
	assert.Zero(t, wrong, "replays that copied another replay's input")
}
