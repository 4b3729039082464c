//go:build linux

package fakedriver_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// TestSliceNodesOnARegisteredSliceLeaveNoPins: a long-lived registration
// (a RegisterHost, or any graph kept alive) over some pages, and graphs
// made and closed over slices on those pages: once every such graph is
// gone, only the long-lived registration's pin is left (only a range's
// creator stays pinned past its release).
func TestSliceNodesOnARegisteredSliceLeaveNoPins(t *testing.T) {
	f := ltSetup(t)
	backing := make([]int32, 1024)
	r, err := driver.RegisterHost(f.ctx, backing)
	require.NoError(t, err)
	defer r.Close()
	dev, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	defer dev.Close()
	gcAll()
	before := lifetime.ReadStats().Pinned
	for range 50 {
		g, err := graph.New(f.ctx)
		require.NoError(t, err)
		_, err = g.Memcpy(graph.Slice(backing[:16]), graph.Device(dev))
		require.NoError(t, err)
		require.NoError(t, g.Close())
	}
	fcall(t, "fake_quiesce", 30000)
	ok := ltSettle(func() bool { lifetime.Flush(); return lifetime.ReadStats().Pinned == before })
	assert.True(t, ok, "%d pins left by 50 closed graphs", lifetime.ReadStats().Pinned-before)
	runtime.KeepAlive(backing)
}

// TestSliceCopiesAfterContextClose: a stream made before its context's
// Close keeps working, the stream-ordered copies of Go slices included,
// and so does a graph.Slice node in a graph made before Close: the stream
// and the graph hold the context.
func TestSliceCopiesAfterContextClose(t *testing.T) {
	f := ltSetup(t)
	ctx, err := f.ctx.Device().NewContext(0)
	require.NoError(t, err)
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	dev, err := driver.Alloc[int32](ctx, 16)
	require.NoError(t, err)
	defer dev.Close()
	g, err := graph.New(ctx)
	require.NoError(t, err)
	defer g.Close()
	require.NoError(t, ctx.Close())

	src := make([]int32, 16)
	require.NoError(t, dev.CopyFromHost(s, src), "a synchronous copy works")
	require.NoError(t, dev.MemsetFloat32Async(s, 1), "a stream-ordered memset works")
	assert.NoError(t, dev.CopyFromHostAsync(s, src), "a stream-ordered copy of a slice")
	assert.NoError(t, dev.CopyToHostAsync(s, src), "a stream-ordered copy into a slice")
	require.NoError(t, s.Synchronize())
	_, err = g.Memcpy(graph.Device(dev), graph.Slice(src))
	assert.NoError(t, err, "a Slice node in a graph made before Close")
}

// TestFailedUnregisterKeepsTheRange: when cuMemHostUnregister fails, CUDA
// keeps the pages registered, and so does the registry, with its creator
// pinned: the next Slice node on those pages counts on the range (no
// second registration, which CUDA would refuse) and pins its slice.
func TestFailedUnregisterKeepsTheRange(t *testing.T) {
	f := setup(t)
	dev, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	defer dev.Close()
	s := make([]int32, 16)
	g1, err := graph.New(f.ctx)
	require.NoError(t, err)
	_, err = g1.Memcpy(graph.Slice(s), graph.Device(dev))
	require.NoError(t, err)
	faketest.FailNext(t, "cuMemHostUnregister", 999)
	require.NoError(t, g1.Close())
	fcall(t, "fake_quiesce", 30000)
	lifetime.Flush()
	lifetime.Flush()
	_ = lifetime.Errors()

	pinned := lifetime.ReadStats().Pinned
	g2, err := graph.New(f.ctx)
	require.NoError(t, err)
	regs := registrations(t)
	_, err = g2.Memcpy(graph.Slice(s), graph.Device(dev)) // the node writes s at each launch
	require.NoError(t, err)
	assert.Equal(t, pinned+1, lifetime.ReadStats().Pinned, "the node's slice is pinned")
	assert.Equal(t, regs, registrations(t), "the kept range is counted on, not registered again")
	require.NoError(t, g2.Close())
	fcall(t, "fake_quiesce", 30000)
	assert.True(t, ltSettle(func() bool { lifetime.Flush(); return lifetime.ReadStats().Pinned < pinned }), "unregistered, and unpinned, at the next release")
	runtime.KeepAlive(s)
}

// TestSliceCopiesDuringAGlobalCapture: a staged copy that allocates a new
// page-locked block (cuMemHostAlloc, which a capture in global mode
// refuses on every thread) and a captured copy of a Go slice (registered)
// while another goroutine captures in global mode: neither fails nor
// invalidates the capture.
func TestSliceCopiesDuringAGlobalCapture(t *testing.T) {
	f := ltSetup(t)
	require.NoError(t, seam.TrimStaging(f.ctx))
	s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()
	dev, err := driver.Alloc[byte](f.ctx, 1<<20)
	require.NoError(t, err)
	defer dev.Close()
	src := make([]byte, 1<<20)
	inCapture, proceed, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var g *graph.Graph
	go func() {
		var err error
		g, err = graph.Capture(f.s, graph.CaptureGlobal, func(s *driver.Stream) error {
			close(inCapture)
			<-proceed
			return dev.CopyFromHostAsync(s, src[:100]) // registered, in global mode
		})
		done <- err
	}()
	<-inCapture
	for range 20 {
		assert.NoError(t, dev.CopyFromHostAsync(s2, src)) // a new 1 MiB block while the capture runs
		assert.NoError(t, seam.TrimStaging(f.ctx))
	}
	close(proceed)
	require.NoError(t, <-done)
	require.NoError(t, g.Close())
	require.NoError(t, s2.Synchronize())
}

// TestDroppedContextOfASharedRange: a context dropped without Close is
// destroyed by its cleanup once nothing uses it, also when a Slice node in
// it counted on a range another context registered (a RegisterHost that
// stays) beside a range of its own.
func TestDroppedContextOfASharedRange(t *testing.T) {
	f := ltSetup(t)
	ps := os.Getpagesize()
	big := make([]byte, 16*ps) // a large object: page-aligned
	r, err := driver.RegisterHost(f.ctx, big[ps:2*ps])
	require.NoError(t, err)
	defer r.Close()
	gcAll()
	contexts := fcall(t, "fake_live_contexts")
	func() {
		ctx, err := f.ctx.Device().NewContext(0)
		require.NoError(t, err)
		dev, err := driver.Alloc[byte](ctx, 2*ps)
		require.NoError(t, err)
		g, err := graph.New(ctx)
		require.NoError(t, err)
		_, err = g.Memcpy(graph.Device(dev), graph.Slice(big[:2*ps]))
		require.NoError(t, err)
		require.NoError(t, g.Close())
		require.NoError(t, dev.Close())
	}() // ctx dropped without Close
	ok := ltSettle(func() bool { runtime.GC(); return fcall(t, "fake_live_contexts") == contexts })
	assert.True(t, ok, "the dropped context was not destroyed")
	runtime.KeepAlive(big)
}

// TestSyncCopyKeepsThePagesRegistered: CUDA copies registered pages by DMA,
// without staging, so a synchronous copy into a slice on pages a graph
// registered keeps them registered until it is done, though the graph is
// closed during the copy; the pages are unregistered after it.
func TestSyncCopyKeepsThePagesRegistered(t *testing.T) {
	f := ltSetup(t)
	backing := make([]int32, 1024) // one registration covers both slices below
	dev, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	defer dev.Close()
	regs := fcall(t, "fake_live_registrations")
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	_, err = g.Memcpy(graph.Slice(backing[:16]), graph.Device(dev))
	require.NoError(t, err)
	require.Equal(t, regs+1, fcall(t, "fake_live_registrations"))

	// The copy is held inside the fake (past the Close and the flushes
	// below, however loaded the machine) until released.
	release := hold(t, "fake_set_copy_delay_us")
	copied := make(chan error, 1)
	go func() { copied <- dev.CopyToHost(f.s, backing[512:528]) }()
	waitGauge(t, "fake_copies_in_delay", 1) // the copy runs
	require.NoError(t, g.Close())
	for range 5 { // the graph's release and the unregistration it queues
		lifetime.Flush()
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, regs+1, fcall(t, "fake_live_registrations"), "unregistered under a copy into its pages")
	release()
	require.NoError(t, <-copied)
	assert.True(t, ltSettle(func() bool { lifetime.Flush(); return fcall(t, "fake_live_registrations") == regs }),
		"unregistered once the copy is done")
	runtime.KeepAlive(backing)
}

// TestSyncCopyWaitsForAnUnregistrationUnderWay: the registry takes a
// range off its list before CUDA's cuMemHostUnregister returns; a
// synchronous copy into those pages that begins meanwhile must wait for
// the call, or CUDA copies by DMA into pages whose registration goes away
// under it (the fake reports that as a bad use, which ltSetup checks).
func TestSyncCopyWaitsForAnUnregistrationUnderWay(t *testing.T) {
	f := ltSetup(t)
	backing := make([]int32, 1024)
	dev, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	defer dev.Close()
	regs := fcall(t, "fake_live_registrations")
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	_, err = g.Memcpy(graph.Slice(backing[:16]), graph.Device(dev))
	require.NoError(t, err)
	release := hold(t, "fake_set_unregister_delay_us")
	fcall(t, "fake_set_copy_delay_us", 300000)
	defer fcall(t, "fake_set_copy_delay_us", 0)
	bad := fcall(t, "fake_bad_ptr_uses")
	require.NoError(t, g.Close())
	// The graph's release queues the unregistration, which takes the
	// range off the registry's list and is held in cuMemHostUnregister.
	waitGauge(t, "fake_unregisters_in_delay", 1)
	require.Equal(t, regs+1, fcall(t, "fake_live_registrations"), "the fake still holds the registration")
	// The copy begins while the unregistration is under way; the
	// unregistration ends soon after, during the copy's 300 ms delay were
	// the copy not waiting for it.
	copied := make(chan error, 1)
	go func() { copied <- dev.CopyToHost(f.s, backing[512:528]) }()
	time.Sleep(50 * time.Millisecond)
	release()
	require.NoError(t, <-copied)
	assert.Equal(t, bad, fcall(t, "fake_bad_ptr_uses"), "a copy ran while its pages' registration was being removed")
	assert.True(t, ltSettle(func() bool { lifetime.Flush(); return fcall(t, "fake_live_registrations") == regs }))
	runtime.KeepAlive(backing)
}
