//go:build linux

package fakedriver_test

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
)

// mPeerCtx creates a second context (the primary one stays current) and
// allocates n bytes in it; destroy destroys the context, and runs when t
// ends unless the test ran it (a second destroy would be a bad handle
// use, counted against the next test: go test -shuffle found it).
func mPeerCtx(t *testing.T, n uintptr) (c cu.CUcontext, p cu.CUdeviceptr, destroy func() error) {
	t.Helper()
	require.NoError(t, cu.CtxCreate(&c, nil, 0, 0)) // pushed: current until the pop
	p = mAlloc(t, n)
	require.NoError(t, cu.CtxPopCurrent(nil))
	var once sync.Once
	var err error
	destroy = func() error {
		once.Do(func() { err = cu.CtxDestroy(c) })
		return err
	}
	t.Cleanup(func() { _ = destroy() })
	return c, p, destroy
}

// TestModelPeerCopies: cuMemcpyPeer and cuMemcpyPeerAsync copy between
// memory of two contexts; a side named with the wrong context is a bad
// pointer use, a destroyed context a bad handle use; the async copy runs
// in its stream's order, reads its source when it runs (a source freed
// meanwhile is a bad use), and refuses a capture, which it invalidates.
func TestModelPeerCopies(t *testing.T) {
	ctx := modelCtx(t)
	peer, q, destroyPeer := mPeerCtx(t, 64)
	p := mAlloc(t, 64)
	defer cu.MemFree(p)
	in := mSeq(10, 16)
	require.NoError(t, cu.MemcpyHtoD(p, unsafe.Pointer(&in[0]), 64))

	// Synchronous, both ways.
	require.NoError(t, cu.MemcpyPeer(q, peer, p, ctx, 64))
	require.NoError(t, cu.MemsetD32(p, 0, 16))
	require.NoError(t, cu.MemcpyPeer(p, ctx, q, peer, 64))
	assert.Equal(t, in, mReadInts(t, p, 16))
	require.NoError(t, cu.MemcpyPeer(p, ctx, q, peer, 0), "nothing to copy")
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses")+fcall(t, "fake_bad_handle_uses"))

	// A side named with the wrong context, an overrun.
	assert.ErrorIs(t, cu.MemcpyPeer(q, ctx, p, ctx, 64), cu.CUDA_ERROR_INVALID_VALUE)
	assert.Contains(t, faketest.LastBadUse(t), "memory of another context")
	assert.ErrorIs(t, cu.MemcpyPeerAsync(p, ctx, q, ctx, 64, 0), cu.CUDA_ERROR_INVALID_VALUE)
	assert.ErrorIs(t, cu.MemcpyPeer(q, peer, p+32, ctx, 64), cu.CUDA_ERROR_INVALID_VALUE)
	assert.EqualValues(t, 3, fcall(t, "fake_bad_ptr_uses"))
	fcall(t, "fake_reset_counters")

	// Asynchronous, in its stream's order: behind a slow kernel that
	// writes the source.
	s := mStream(t)
	defer cu.StreamDestroy(s)
	_, fs := mLoadFake(t)
	fcall(t, "fake_set_kernel_delay_us", 20000)
	require.NoError(t, mLaunchFill(fs["fill"], s, mFill(p, 100, 16)))
	require.NoError(t, cu.MemcpyPeerAsync(q, peer, p, ctx, 64, s))
	require.NoError(t, cu.MemsetD32Async(p, 0, 16, s))
	require.NoError(t, cu.MemcpyPeerAsync(p, ctx, q, peer, 64, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, mSeq(100, 16), mReadInts(t, p, 16), "both copies ran after the kernel, in order")
	fcall(t, "fake_set_kernel_delay_us", 0)

	// The source is read when the copy runs. Queued on a stream of the
	// other context, the copy is not waited for by cuMemFree, which waits
	// for the work of its own context only: the copy reads freed memory.
	// A gate holds the stream, so the copy cannot run before the free
	// however slow the machine is (a 20 ms copy delay was not enough on a
	// loaded CI machine).
	var ps cu.CUstream
	require.NoError(t, cu.CtxPushCurrent(peer))
	require.NoError(t, cu.StreamCreate(&ps, 1))
	require.NoError(t, cu.CtxPopCurrent(nil))
	const gate = 41
	fcall(t, "fake_close_gate", gate)
	require.NoError(t, cu.LaunchHostFunc(ps, mHostFn(t, "fake_gate_fn"), uintptr(gate)))
	r := mAlloc(t, 64)
	require.NoError(t, cu.MemcpyPeerAsync(q, peer, r, ctx, 64, ps))
	require.NoError(t, cu.MemFree(r))
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses"), "not yet run")
	fcall(t, "fake_open_gate", gate)
	require.NoError(t, cu.StreamSynchronize(ps))
	assert.EqualValues(t, 1, fcall(t, "fake_bad_ptr_uses"), "the copy read freed memory")
	assert.Contains(t, faketest.LastBadUse(t), "cuMemcpyPeerAsync: bad pointer")
	fcall(t, "fake_reset_counters")

	// Refused in a capture, which it invalidates.
	require.NoError(t, cu.StreamBeginCapture(s, cu.CU_STREAM_CAPTURE_MODE_RELAXED))
	assert.ErrorIs(t, cu.MemcpyPeerAsync(q, peer, p, ctx, 64, s), cu.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
	var g cu.CUgraph
	assert.ErrorIs(t, cu.StreamEndCapture(s, &g), cu.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)

	// A destroyed context.
	fcall(t, "fake_reset_counters")
	require.NoError(t, destroyPeer())
	assert.ErrorIs(t, cu.MemcpyPeerAsync(q, peer, p, ctx, 64, s), cu.CUDA_ERROR_INVALID_CONTEXT)
	assert.ErrorIs(t, cu.MemcpyPeer(p, ctx, q, peer, 64), cu.CUDA_ERROR_INVALID_CONTEXT)
	assert.EqualValues(t, 2, fcall(t, "fake_bad_handle_uses"))
	fcall(t, "fake_reset_counters")
}
