//go:build linux

package fakedriver_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Go slices in graph nodes are registered with CUDA (page by page, shared
// between slices on one page); stream copies of Go slices go through
// page-locked blocks the context keeps.

func registrations(t *testing.T) int64 { return fcall(t, "fake_live_registrations") }

// registrationsSettle waits until fakecuda counts n registrations (graph
// owners are released after CUDA runs the graph's destructor, and the
// unregistration is queued after that).
func registrationsSettle(t *testing.T, n int64) bool {
	return ltSettle(func() bool {
		lifetime.Flush()
		return registrations(t) == n
	})
}

// TestSliceNodesShareTheirPages: slices on one page are registered once;
// the registration lives until the last node that needs it is gone, and
// RegisterHost on the same memory shares it too (CUDA refuses two
// registrations that overlap).
func TestSliceNodesShareTheirPages(t *testing.T) {
	f := ltSetup(t)
	base := registrations(t)
	backing := make([]int32, 64)
	a, b := backing[:16], backing[32:48]
	dev, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	defer dev.Close()

	ga, err := graph.New(f.ctx)
	require.NoError(t, err)
	_, err = ga.Memcpy(graph.Slice(a), graph.Device(dev))
	require.NoError(t, err)
	assert.Equal(t, base+1, registrations(t), "a's page is registered")
	gb, err := graph.New(f.ctx)
	require.NoError(t, err)
	_, err = gb.Memcpy(graph.Device(dev), graph.Slice(b))
	require.NoError(t, err)
	assert.Equal(t, base+1, registrations(t), "b shares a's page")
	r, err := driver.RegisterHost(f.ctx, backing[16:20])
	require.NoError(t, err, "RegisterHost on the same page")
	assert.Equal(t, base+1, registrations(t))

	require.NoError(t, ga.Close())
	require.NoError(t, r.Close())
	fcall(t, "fake_quiesce", 30000)
	lifetime.Flush()
	lifetime.Flush()
	assert.Equal(t, base+1, registrations(t), "b's node still needs the page")
	exe, err := gb.Instantiate()
	require.NoError(t, err)
	require.NoError(t, exe.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	require.NoError(t, exe.Close())
	require.NoError(t, gb.Close())
	assert.True(t, registrationsSettle(t, base), "unregistered once no node needs it: %d left", registrations(t)-base)
	runtime.KeepAlive(backing)
}

// TestSliceRegistrationsGrowAroundOthers: a large slice over pages some of
// which are registered already registers only the rest, and every page is
// let go at the end.
func TestSliceRegistrationsGrowAroundOthers(t *testing.T) {
	f := ltSetup(t)
	base := registrations(t)
	big := make([]byte, 64<<10) // 16 pages
	dev, err := driver.Alloc[byte](f.ctx, len(big))
	require.NoError(t, err)
	defer dev.Close()
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	for _, part := range [][]byte{big[10000:10100], big[40000:40100]} {
		_, err = g.Memcpy(graph.Device(dev), graph.Slice(part))
		require.NoError(t, err)
	}
	assert.Equal(t, base+2, registrations(t))
	_, err = g.Memcpy(graph.Device(dev), graph.Slice(big))
	require.NoError(t, err, "registers the gaps between the two")
	assert.Greater(t, registrations(t), base+2)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, exe.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	require.NoError(t, exe.Close())
	require.NoError(t, g.Close())
	assert.True(t, registrationsSettle(t, base), "every page let go: %d left", registrations(t)-base)
}

// TestSliceCopiesPinNothing: uncaptured stream copies of Go slices are
// staged: nothing is pinned or registered, the source may change as soon
// as the call returns, and the blocks are kept for the next copies and
// freed by TrimStaging.
func TestSliceCopiesPinNothing(t *testing.T) {
	f := ltSetup(t)
	require.NoError(t, seam.TrimStaging(f.ctx))
	hosts, base := fcall(t, "fake_live_host_allocs"), registrations(t)
	before := lifetime.ReadStats()
	dev, err := driver.Alloc[int32](f.ctx, 1024)
	require.NoError(t, err)
	defer dev.Close()
	fcall(t, "fake_set_copy_delay_us", 20000) // the copies queue and run late
	src := make([]int32, 1024)
	for i := range src {
		src[i] = int32(i)
	}
	require.NoError(t, dev.CopyFromHostAsync(f.s, src))
	clear(src) // read at the call: this does not reach the device
	dst := make([]int32, 1024)
	require.NoError(t, dev.CopyToHostAsync(f.s, dst))
	assert.Equal(t, before.Pinned, lifetime.ReadStats().Pinned, "nothing pinned")
	assert.Equal(t, base, registrations(t), "nothing registered")
	require.NoError(t, f.s.Synchronize())
	for i, v := range dst {
		require.Equal(t, int32(i), v, "element %d", i)
	}
	fcall(t, "fake_set_copy_delay_us", 0)
	for range 10 { // blocks are reused, not allocated per copy
		require.NoError(t, dev.CopyFromHostAsync(f.s, src))
		require.NoError(t, dev.CopyToHostAsync(f.s, dst))
	}
	require.NoError(t, f.s.Synchronize())
	lifetime.Flush() // blocks beyond those kept are freed on the release queue
	assert.LessOrEqual(t, fcall(t, "fake_live_host_allocs"), hosts+4, "at most four blocks of a size are kept")
	require.NoError(t, seam.TrimStaging(f.ctx))
	lifetime.Flush()
	assert.Equal(t, hosts, fcall(t, "fake_live_host_allocs"))
}

// TestSliceCopiesOfAClosedContext: a context destroyed with blocks kept
// frees them; a big copy's block of its own is freed after the copy.
func TestSliceCopiesOfAClosedContext(t *testing.T) {
	f := ltSetup(t)
	hosts := fcall(t, "fake_live_host_allocs")
	ctx, err := f.ctx.Device().NewContext(0)
	require.NoError(t, err)
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	dev, err := driver.Alloc[byte](ctx, 32<<20)
	require.NoError(t, err)
	big := make([]byte, 32<<20) // larger than any kept block
	require.NoError(t, dev.CopyFromHostAsync(s, big[:100]))
	require.NoError(t, dev.CopyFromHostAsync(s, big))
	require.NoError(t, dev.CopyToHostAsync(s, big))
	require.NoError(t, s.Synchronize())
	lifetime.Flush()
	assert.Equal(t, hosts+1, fcall(t, "fake_live_host_allocs"), "the small block is kept, the big ones freed")
	require.NoError(t, dev.Close())
	require.NoError(t, s.Close())
	require.NoError(t, ctx.Close())
	lifetime.Flush()
	assert.Equal(t, hosts, fcall(t, "fake_live_host_allocs"), "the context's destroy freed what it kept")
}
