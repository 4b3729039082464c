//go:build linux

package fakedriver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestModelNodesInSeveralContexts: a kernel node of a CUfunction of
// another context than the current one runs in the function's context
// (its params' ctx ignored), a memcpy node in the context its add names
// (here the current one, with the peer's memory);
// each run is counted for that context, and a node whose context was
// destroyed is a bad handle use that does nothing. An event is recorded
// only on a stream of its own context. Device launch of a graph in two
// contexts fails as CUDA's does.
func TestModelNodesInSeveralContexts(t *testing.T) {
	ctx := modelCtx(t)
	s := mStream(t)
	defer cu.StreamDestroy(s)
	peer, q, destroyPeer := mPeerCtx(t, 64)
	require.NoError(t, cu.CtxPushCurrent(peer))
	_, fs := mLoadFake(t) // the peer's module
	var ps cu.CUstream
	require.NoError(t, cu.StreamCreate(&ps, 1))
	var pev cu.CUevent
	require.NoError(t, cu.EventCreate(&pev, 0))
	require.NoError(t, cu.CtxPopCurrent(nil))
	p := mAlloc(t, 64)
	defer cu.MemFree(p)

	g := mGraph(t)
	defer cu.GraphDestroy(g)
	k := mKernelNode(t, g, fs["fill"], mFill(q, 5, 16)) // the current context is ctx, the function the peer's
	var c cu.CUgraphNode
	cp := mCopy(nil, nil, q, p, 64)
	d, nd := mDeps(k)
	require.NoError(t, cu.GraphAddMemcpyNode(&c, g, d, nd, &cp, ctx))
	var info cu.CUDA_GRAPH_INSTANTIATE_PARAMS
	info.Flags = uint64(cu.CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
	var dx cu.CUgraphExec
	assert.ErrorIs(t, cu.GraphInstantiateWithParams(&dx, g, &info), cu.CUDA_ERROR_INVALID_VALUE)
	assert.EqualValues(t, cu.CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED, info.Result_out)
	x := mInstantiate(t, g, 0)
	defer cu.GraphExecDestroy(x)

	fcall(t, "fake_graph_node_runs_reset")
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, mSeq(5, 16), mReadInts(t, p, 16), "the peer's kernel ran, and its memory was copied")
	assert.EqualValues(t, 1, fcall(t, "fake_graph_node_runs", uintptr(peer)), "the kernel ran in the peer's context")
	assert.EqualValues(t, 1, fcall(t, "fake_graph_node_runs", uintptr(ctx)), "the copy in ctx")

	// An event of the peer's context recorded on a stream of ctx.
	assert.ErrorIs(t, cu.EventRecord(pev, s), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.Contains(t, faketest.LastBadUse(t), "another context")
	require.NoError(t, cu.EventRecord(pev, ps), "on a stream of its own context")
	require.NoError(t, cu.StreamWaitEvent(s, pev, 0), "a stream waits for an event of any context")
	fcall(t, "fake_reset_counters")

	// The peer's context destroyed: its nodes no longer run.
	require.NoError(t, cu.CtxPushCurrent(peer))
	require.NoError(t, cu.StreamDestroy(ps))
	require.NoError(t, cu.EventDestroy(pev))
	require.NoError(t, cu.CtxPopCurrent(nil))
	require.NoError(t, destroyPeer())
	require.NoError(t, cu.MemsetD32(p, 0, 16))
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.EqualValues(t, 1, fcall(t, "fake_bad_handle_uses"), "the kernel node, in a destroyed context")
	assert.EqualValues(t, 1, fcall(t, "fake_bad_ptr_uses"), "the copy, of the destroyed context's memory")
	assert.Equal(t, make([]int32, 16), mReadInts(t, p, 16), "nothing ran")
	fcall(t, "fake_reset_counters")
}
