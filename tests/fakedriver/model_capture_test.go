//go:build linux

package fakedriver_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
)

// Work queued on a captured stream becomes nodes instead of running; an
// event recorded on a captured stream and waited for on another forks that
// stream into the capture, and the reverse joins it back.
func TestModelStreamCapture(t *testing.T) {
	modelCtx(t)
	s, s2 := mStream(t), mStream(t)
	_, fs := mLoadFake(t)
	p := mAlloc(t, 64)
	graphs := fcall(t, "fake_live_graphs")
	var ev cu.CUevent
	require.NoError(t, cu.EventCreate(&ev, uint32(cu.CU_EVENT_DISABLE_TIMING)))

	require.NoError(t, cu.StreamBeginCapture(s, cu.CU_STREAM_CAPTURE_MODE_RELAXED))
	assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_ACTIVE, mCaptureStatus(t, s))
	assert.ErrorIs(t, cu.StreamBeginCapture(s, cu.CU_STREAM_CAPTURE_MODE_RELAXED), cu.CUDA_ERROR_ILLEGAL_STATE)
	require.NoError(t, mLaunchFill(fs["fill"], s, mFill(p, 7, 16)))
	require.NoError(t, cu.EventRecord(ev, s))
	require.NoError(t, cu.StreamWaitEvent(s2, ev, 0)) // fork
	assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_ACTIVE, mCaptureStatus(t, s2))
	require.NoError(t, cu.LaunchHostFunc(s2, mHostFn(t, "fake_log_fn"), uintptr(1)))
	var st cu.CUstreamCaptureStatus
	var id uint64
	var cg cu.CUgraph
	var dp *cu.CUgraphNode
	var ep *cu.CUgraphEdgeData
	var nd uintptr
	require.NoError(t, cu.StreamGetCaptureInfo(s2, &st, &id, &cg, &dp, &ep, &nd))
	require.EqualValues(t, 1, nd)
	host := *dp
	var typ cu.CUgraphNodeType
	require.NoError(t, cu.GraphNodeGetType(host, &typ))
	assert.Equal(t, cu.CU_GRAPH_NODE_TYPE_HOST, typ)
	var id2 uint64
	require.NoError(t, cu.StreamGetCaptureInfo_v11030(s, &st, &id2, nil, nil, nil))
	assert.Equal(t, id, id2, "one capture")
	require.NoError(t, cu.StreamGetCaptureInfo_v10010(s, &st, &id2))
	require.NoError(t, cu.EventRecord(ev, s2))
	require.NoError(t, cu.StreamWaitEvent(s, ev, 0)) // join
	out := make([]int32, 16)
	require.NoError(t, cu.MemcpyDtoHAsync(unsafe.Pointer(&out[0]), p, 64, s))
	var g cu.CUgraph
	require.NoError(t, cu.StreamEndCapture(s, &g))
	assert.Equal(t, cg, g)
	assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_NONE, mCaptureStatus(t, s))
	assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_NONE, mCaptureStatus(t, s2), "the forked stream left the capture too")
	assert.Equal(t, graphs+1, fcall(t, "fake_live_graphs"))
	assert.Len(t, mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetNodes(g, v, n) }), 3)
	var ne uintptr
	require.NoError(t, cu.GraphGetEdges(g, nil, nil, nil, &ne))
	assert.EqualValues(t, 3, ne, "kernel→host, kernel→copy, host→copy")
	assert.Zero(t, fcall(t, "fake_log_len"), "nothing ran while captured")
	assert.Equal(t, make([]int32, 16), mReadInts(t, p, 16))

	x := mInstantiate(t, g, 0)
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, mSeq(7, 16), out)
	assert.EqualValues(t, 1, fcall(t, "fake_log_len"))
	require.NoError(t, cu.GraphExecDestroy(x))
	require.NoError(t, cu.GraphDestroy(g))

	// A fork never joined back: the capture fails and is over on both.
	require.NoError(t, cu.StreamBeginCapture(s, cu.CU_STREAM_CAPTURE_MODE_RELAXED))
	require.NoError(t, cu.EventRecord(ev, s))
	require.NoError(t, cu.StreamWaitEvent(s2, ev, 0))
	require.NoError(t, mLaunchFill(fs["fill"], s2, mFill(p, 1, 16)))
	assert.ErrorIs(t, cu.StreamEndCapture(s2, &g), cu.CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "not the capture's stream")
	assert.ErrorIs(t, cu.StreamEndCapture(s, &g), cu.CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
	assert.Zero(t, g)
	assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_NONE, mCaptureStatus(t, s))
	assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_NONE, mCaptureStatus(t, s2))
	assert.Equal(t, graphs, fcall(t, "fake_live_graphs"), "the partial graph is gone")

	// Synchronising a captured stream invalidates the capture.
	require.NoError(t, cu.StreamBeginCapture(s, cu.CU_STREAM_CAPTURE_MODE_RELAXED))
	assert.ErrorIs(t, cu.StreamSynchronize(s), cu.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
	assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_INVALIDATED, mCaptureStatus(t, s))
	assert.ErrorIs(t, mLaunchFill(fs["fill"], s, mFill(p, 1, 16)), cu.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
	assert.ErrorIs(t, cu.StreamEndCapture(s, &g), cu.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
	assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_NONE, mCaptureStatus(t, s))
	assert.Equal(t, graphs, fcall(t, "fake_live_graphs"))
	assert.ErrorIs(t, cu.StreamEndCapture(s, &g), cu.CUDA_ERROR_ILLEGAL_STATE)
	assert.ErrorIs(t, cu.StreamBeginCapture(cu.CU_STREAM_LEGACY, cu.CU_STREAM_CAPTURE_MODE_RELAXED),
		cu.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)

	// A stream destroyed while capturing ends its capture.
	s3 := mStream(t)
	require.NoError(t, cu.StreamBeginCapture(s3, cu.CU_STREAM_CAPTURE_MODE_RELAXED))
	require.NoError(t, cu.StreamDestroy(s3))
	assert.Equal(t, graphs, fcall(t, "fake_live_graphs"))
	require.NoError(t, cu.EventDestroy(ev))
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses"))
	require.NoError(t, cu.MemFree(p))
}

// In global mode, potentially unsafe calls fail on every thread whose mode
// is global, and invalidate the capture (as on an H200: a stream's or an
// event's query or wait among them, tests/libcuda/capture_global_calls.c);
// a global capture ends only on the thread that began it.
func TestModelCaptureModes(t *testing.T) {
	ctx := modelCtx(t)
	s, s2 := mStream(t), mStream(t)
	p := mAlloc(t, 64)
	ev := mEvent(t)
	require.NoError(t, cu.EventRecord(ev, s2))
	var g cu.CUgraph

	// The capturing thread itself: refused, and the capture is invalidated.
	require.NoError(t, cu.StreamBeginCapture(s, cu.CU_STREAM_CAPTURE_MODE_GLOBAL))
	var q cu.CUdeviceptr
	assert.ErrorIs(t, cu.MemAlloc(&q, 64), cu.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
	assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_INVALIDATED, mCaptureStatus(t, s))
	assert.ErrorIs(t, cu.StreamEndCapture(s, &g), cu.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)

	// Another thread in global mode: each of these calls is refused and
	// invalidates the capture; relaxed, it runs and the capture goes on.
	calls := map[string]func() error{
		"cuMemsetD8":          func() error { return cu.MemsetD8(p, 1, 64) },
		"cuEventQuery":        func() error { return cu.EventQuery(ev) },
		"cuEventSynchronize":  func() error { return cu.EventSynchronize(ev) },
		"cuStreamQuery":       func() error { return cu.StreamQuery(s2) },
		"cuStreamSynchronize": func() error { return cu.StreamSynchronize(s2) },
	}
	for name, call := range calls {
		for _, relax := range []bool{false, true} {
			require.NoError(t, cu.StreamBeginCapture(s, cu.CU_STREAM_CAPTURE_MODE_GLOBAL), name)
			var res [3]error
			mNoContext(func() {
				if res[0] = cu.CtxSetCurrent(ctx); res[0] != nil {
					return
				}
				if relax {
					mode := cu.CU_STREAM_CAPTURE_MODE_RELAXED
					res[1] = cu.ThreadExchangeStreamCaptureMode(&mode)
				}
				res[0] = call()
				res[2] = cu.StreamEndCapture(s, &g)
			})
			assert.NoError(t, res[1])
			assert.ErrorIs(t, res[2], cu.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, name)
			if relax {
				assert.NoError(t, res[0], "%s: another thread, relaxed mode", name)
				assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_ACTIVE, mCaptureStatus(t, s), name)
				require.NoError(t, cu.StreamEndCapture(s, &g), name)
				require.NoError(t, cu.GraphDestroy(g))
			} else {
				assert.ErrorIs(t, res[0], cu.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "%s: another thread, global mode", name)
				assert.ErrorIs(t, cu.StreamEndCapture(s, &g), cu.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, name)
			}
		}
	}
	require.NoError(t, cu.MemAlloc(&q, 64))
	require.NoError(t, cu.MemFree(q))

	// Thread-local: only the capturing thread is restricted.
	require.NoError(t, cu.StreamBeginCapture(s, cu.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
	var res error
	mNoContext(func() {
		if res = cu.CtxSetCurrent(ctx); res == nil {
			res = cu.MemsetD8(p, 1, 64)
		}
	})
	assert.NoError(t, res)
	require.NoError(t, cu.StreamEndCapture(s, &g))
	require.NoError(t, cu.GraphDestroy(g))
	require.NoError(t, cu.EventDestroy(ev))
	require.NoError(t, cu.MemFree(p))
}

// Capturing into an existing graph after given nodes, with stream-ordered
// memory becoming memory nodes.
func TestModelCaptureToGraph(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	_, fs := mLoadFake(t)
	g := mGraph(t)
	root := mEmptyNode(t, g)
	graphs := fcall(t, "fake_live_graphs")
	require.NoError(t, cu.StreamBeginCaptureToGraph(s, g, &root, nil, 1, cu.CU_STREAM_CAPTURE_MODE_RELAXED))
	var d cu.CUdeviceptr
	require.NoError(t, cu.MemAllocAsync(&d, 64, s))
	require.NoError(t, mLaunchFill(fs["fill"], s, mFill(d, 3, 16)))
	out := make([]int32, 16)
	require.NoError(t, cu.MemcpyDtoHAsync(unsafe.Pointer(&out[0]), d, 64, s))
	require.NoError(t, cu.MemFreeAsync(d, s))
	// A node with no dependencies: reset the stream's.
	require.NoError(t, cu.StreamUpdateCaptureDependencies(s, nil, nil, 0, uint32(cu.CU_STREAM_SET_CAPTURE_DEPENDENCIES)))
	require.NoError(t, cu.LaunchHostFunc(s, mHostFn(t, "fake_count_fn"), uintptr(20)))
	var got cu.CUgraph
	require.NoError(t, cu.StreamEndCapture(s, &got))
	assert.Equal(t, g, got, "the graph captured into")
	assert.Equal(t, graphs, fcall(t, "fake_live_graphs"))
	all := mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetNodes(g, v, n) })
	require.Len(t, all, 6)
	var typ cu.CUgraphNodeType
	require.NoError(t, cu.GraphNodeGetType(all[1], &typ))
	assert.Equal(t, cu.CU_GRAPH_NODE_TYPE_MEM_ALLOC, typ)
	assert.Equal(t, []cu.CUgraphNode{root}, mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphNodeGetDependencies(all[1], v, nil, n) }))
	assert.Len(t, mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetRootNodes(g, v, n) }), 2)

	x := mInstantiate(t, g, 0)
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, mSeq(3, 16), out)
	assert.EqualValues(t, 1, fcall(t, "fake_count", 20))
	require.NoError(t, cu.GraphExecDestroy(x))
	require.NoError(t, cu.GraphDestroy(g))
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses")+fcall(t, "fake_bad_handle_uses"))
}

func TestModelExecNodeEnablingAndChildUpdates(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	_, fs := mLoadFake(t)
	p := mAlloc(t, 64)
	g := mGraph(t)
	k := mKernelNode(t, g, fs["fill"], mFill(p, 1, 16))
	var m cu.CUgraphNode
	ms := cu.CUDA_MEMSET_NODE_PARAMS_v1{Dst: p, Value: 5, ElementSize: 4, Width: 1, Height: 1}
	require.NoError(t, cu.GraphAddMemsetNode(&m, g, &k, 1, &ms, 0))
	h := mHostNode(t, g, "fake_count_fn", 21, m)
	x := mInstantiate(t, g, 0)
	require.NoError(t, cu.GraphNodeSetEnabled(x, k, 0))
	assert.ErrorIs(t, cu.GraphNodeSetEnabled(x, h, 0), cu.CUDA_ERROR_INVALID_VALUE, "host nodes stay enabled")
	var on uint32
	require.NoError(t, cu.GraphNodeGetEnabled(x, k, &on))
	assert.Zero(t, on)
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, append([]int32{5}, make([]int32, 15)...), mReadInts(t, p, 16), "the kernel was skipped")
	require.NoError(t, cu.GraphNodeSetEnabled(x, k, 1))
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, append([]int32{5}, mSeq(2, 15)...), mReadInts(t, p, 16))
	require.NoError(t, cu.GraphExecDestroy(x))
	require.NoError(t, cu.GraphDestroy(g))

	child := mGraph(t)
	mKernelNode(t, child, fs["fill"], mFill(p, 10, 16))
	parent := mGraph(t)
	var cn cu.CUgraphNode
	require.NoError(t, cu.GraphAddChildGraphNode(&cn, parent, nil, 0, child))
	x = mInstantiate(t, parent, 0)
	other := mGraph(t)
	mKernelNode(t, other, fs["fill"], mFill(p, 90, 16))
	require.NoError(t, cu.GraphExecChildGraphNodeSetParams(x, cn, other))
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, mSeq(90, 16), mReadInts(t, p, 16))
	mEmptyNode(t, other)
	assert.ErrorIs(t, cu.GraphExecChildGraphNodeSetParams(x, cn, other), cu.CUDA_ERROR_INVALID_VALUE, "another shape")
	var hc cu.CUgraphConditionalHandle
	assert.ErrorIs(t, cu.GraphConditionalHandleCreate(&hc, parent, 0, 0, 0), cu.CUDA_ERROR_NOT_SUPPORTED)
	require.NoError(t, cu.GraphExecDestroy(x))
	for _, g := range []cu.CUgraph{child, parent, other} {
		require.NoError(t, cu.GraphDestroy(g))
	}
	require.NoError(t, cu.MemFree(p))
}
