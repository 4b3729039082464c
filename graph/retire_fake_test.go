//go:build linux

package graph

import (
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// launchHoldingStreamOrdered makes an executable whose kernel node names
// stream-ordered memory that only the executable holds, and launches it on
// env.s, where it runs for 300 ms writing that memory. It returns the
// executable, the node, and a plain buffer to point the node at.
func launchHoldingStreamOrdered(t *testing.T, env *fakeEnv) (*Exec, Node, *driver.Buffer[int32]) {
	t.Helper()
	allocStream, err := env.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	bufA, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	g, err := New(env.ctx)
	require.NoError(t, err)
	k, err := g.KernelWith(env.fill, one, bufA, int32(1), int32(16))
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	sb, err := driver.AllocAsync[int32](allocStream, 16)
	require.NoError(t, err)
	require.NoError(t, allocStream.Synchronize())
	require.NoError(t, e.SetKernelWith(k, env.fill, one, sb, int32(2), int32(16)))
	require.NoError(t, sb.Close()) // the executable holds it now
	faketest.Call(t, "fake_set_kernel_delay_us", 300000)
	t.Cleanup(func() { faketest.Call(t, "fake_set_kernel_delay_us", 0) })
	require.NoError(t, e.Launch(env.s)) // runs for 300 ms, writing sb
	return e, k, bufA
}

// Exec.retire does not take a cuEventSynchronize error for "nothing more
// runs": after a non-sticky error (an event recorded on a stream that is
// being captured, or any transient failure) the retired owners are still
// held until the launch that uses them is done. Here the retired owner is
// stream-ordered memory, whose free is not ordered after the graph's
// stream: released early, it would be written by the running kernel.
func TestFakeRetireOnEventSyncErrorDoesNotReleaseEarly(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	e, k, bufA := launchHoldingStreamOrdered(t, env)
	faketest.FailNext(t, "cuEventSynchronize", int32(cu.CUDA_ERROR_OUT_OF_MEMORY))
	require.NoError(t, e.SetKernelWith(k, env.fill, one, bufA, int32(3), int32(16))) // retires sb
	require.NoError(t, env.s.Synchronize())
	lifetime.Flush()
	faketest.NoBadUses(t)
}

// The realistic trigger of the case above: the user starts capturing on a
// stream the executable ran on (legal while that launch still runs), and
// another goroutine changes a node. The retire neither disturbs the user's
// capture (an event retire recorded on the capturing stream would be
// captured, not recorded, and synchronising with it would fail) nor
// releases the retired owner while the launch still runs.
func TestFakeRetireDuringCaptureOnTrackedStream(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	e, k, bufA := launchHoldingStreamOrdered(t, env)
	sh := cu.CUstream(seam.Stream(env.s))
	require.NoError(t, env.ctx.Raw(func(uintptr) error { return cu.StreamBeginCapture(sh, cu.CU_STREAM_CAPTURE_MODE_RELAXED) }))
	require.NoError(t, e.SetKernelWith(k, env.fill, one, bufA, int32(3), int32(16))) // retires sb
	time.Sleep(50 * time.Millisecond)                                                // let the retire goroutine run
	var captured cu.CUgraph
	endErr := env.ctx.Raw(func(uintptr) error { return cu.StreamEndCapture(sh, &captured) })
	assert.NoError(t, endErr, "the user's capture must not be disturbed by purecuda's bookkeeping")
	if captured != 0 {
		_ = env.ctx.Raw(func(uintptr) error { return cu.GraphDestroy(captured) })
	}
	require.NoError(t, env.s.Synchronize())
	lifetime.Flush()
	faketest.NoBadUses(t)
}

// A loop of per-node updates and launches that runs ahead of the GPU does
// not cost an OS thread per pending update, as a goroutine per retire
// blocked in cuEventSynchronize (a C call, which holds its thread) would:
// Go's limit is 10,000 threads, after which the runtime kills the process.
func TestFakeRetireNeedsNoThreadPerPendingUpdate(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	bufs := make([]*driver.Buffer[int32], 2)
	for i := range bufs {
		b, err := driver.Alloc[int32](env.ctx, 16)
		require.NoError(t, err)
		defer b.Close()
		bufs[i] = b
	}
	g, err := New(env.ctx)
	require.NoError(t, err)
	defer g.Close()
	k, err := g.KernelWith(env.fill, one, bufs[0], int32(1), int32(16))
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()

	faketest.Call(t, "fake_set_kernel_delay_us", 2000)
	defer faketest.Call(t, "fake_set_kernel_delay_us", 0)
	threads := pprof.Lookup("threadcreate")
	before := threads.Count()
	const rounds = 1000
	t0 := time.Now()
	for i := 0; i < rounds; i++ {
		require.NoError(t, e.SetKernelWith(k, env.fill, one, bufs[i%2], int32(i), int32(16)))
		require.NoError(t, e.Launch(env.s))
	}
	t.Logf("loop took %v", time.Since(t0))
	time.Sleep(500 * time.Millisecond) // the GPU (fake) is still working through the launches
	grew := threads.Count() - before
	t.Logf("%d updates with launches in flight made %d OS threads", rounds, grew)
	require.NoError(t, env.s.Synchronize())
	assert.Less(t, grew, 64, "retiring owners should not cost an OS thread per pending update")
}
