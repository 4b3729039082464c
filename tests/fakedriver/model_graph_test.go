//go:build linux

package fakedriver_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
)

func TestModelGraphBuildLaunchIntrospect(t *testing.T) {
	ctx := modelCtx(t)
	s := mStream(t)
	_, fs := mLoadFake(t)
	graphs, nodesBefore := fcall(t, "fake_live_graphs"), fcall(t, "fake_live_nodes")
	p := mAlloc(t, 64)
	in, out := mSeq(1000, 16), make([]int32, 16)
	g := mGraph(t)
	var n1, n3 cu.CUgraphNode
	cp := mCopy(unsafe.Pointer(&in[0]), nil, 0, p, 64)
	require.NoError(t, cu.GraphAddMemcpyNode(&n1, g, nil, 0, &cp, ctx))
	fa := mFill(p+8, 100, 14)
	n2 := mKernelNode(t, g, fs["fill"], fa, n1)
	fa.v = -1 // the node copied the argument values when it was added
	cp = mCopy(nil, unsafe.Pointer(&out[0]), p, 0, 64)
	d, nd := mDeps(n2)
	require.NoError(t, cu.GraphAddMemcpyNode(&n3, g, d, nd, &cp, ctx))
	n4 := mHostNode(t, g, "fake_log_fn", 7, n3)
	assert.Equal(t, graphs+1, fcall(t, "fake_live_graphs"))
	assert.Equal(t, nodesBefore+4, fcall(t, "fake_live_nodes"))

	assert.Equal(t, []cu.CUgraphNode{n1, n2, n3, n4}, mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetNodes(g, v, n) }))
	assert.Equal(t, []cu.CUgraphNode{n1}, mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetRootNodes(g, v, n) }))
	assert.Equal(t, []cu.CUgraphNode{n1}, mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphNodeGetDependencies(n2, v, nil, n) }))
	assert.Equal(t, []cu.CUgraphNode{n3}, mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphNodeGetDependentNodes(n2, v, nil, n) }))
	assert.Equal(t, []cu.CUgraphNode{n1}, mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphNodeGetDependencies_v10000(n2, v, n) }))
	from, to := make([]cu.CUgraphNode, 5), make([]cu.CUgraphNode, 5)
	ed := make([]cu.CUgraphEdgeData, 5)
	num := uintptr(5)
	require.NoError(t, cu.GraphGetEdges(g, &from[0], &to[0], &ed[0], &num))
	assert.EqualValues(t, 3, num)
	assert.Equal(t, []cu.CUgraphNode{n1, n2, n3, 0, 0}, from)
	assert.Equal(t, []cu.CUgraphNode{n2, n3, n4, 0, 0}, to)
	num = 0
	require.NoError(t, cu.GraphGetEdges_v10000(g, nil, nil, &num))
	assert.EqualValues(t, 3, num)
	var typ cu.CUgraphNodeType
	require.NoError(t, cu.GraphNodeGetType(n2, &typ))
	assert.Equal(t, cu.CU_GRAPH_NODE_TYPE_KERNEL, typ)
	var kp cu.CUDA_KERNEL_NODE_PARAMS_v2
	require.NoError(t, cu.GraphKernelNodeGetParams(n2, &kp))
	assert.Equal(t, fs["fill"], kp.Func)
	assert.EqualValues(t, 14, kp.BlockDimX)
	kargs := unsafe.Slice(kp.KernelParams, 3)
	assert.EqualValues(t, 100, *(*int32)(kargs[1]), "the values as added")
	var got cu.CUDA_MEMCPY3D_v2
	require.NoError(t, cu.GraphMemcpyNodeGetParams(n3, &got))
	assert.Equal(t, cp, got)

	x := mInstantiate(t, g, 0)
	for i := 0; i < 2; i++ {
		require.NoError(t, cu.GraphLaunch(x, s))
	}
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, append([]int32{1000, 1001}, mSeq(100, 14)...), out)
	assert.EqualValues(t, 2, fcall(t, "fake_log_len"))
	assert.EqualValues(t, 7, fcall(t, "fake_log_at", 1))

	dot := filepath.Join(t.TempDir(), "g.dot")
	require.NoError(t, cu.GraphDebugDotPrint(g, mCstr(dot), 1))
	text, err := os.ReadFile(dot)
	require.NoError(t, err)
	assert.Contains(t, string(text), "digraph")
	assert.Contains(t, string(text), "fill")
	assert.Equal(t, 3, strings.Count(string(text), "->"))

	require.NoError(t, cu.GraphExecDestroy(x))
	require.NoError(t, cu.GraphDestroy(g))
	assert.Equal(t, graphs, fcall(t, "fake_live_graphs"))
	assert.Equal(t, nodesBefore, fcall(t, "fake_live_nodes"))
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses")+fcall(t, "fake_bad_handle_uses"))
	require.NoError(t, cu.MemFree(p))
}

// Node adds and instantiation need a current context: the real driver
// crashes without one (DESIGN fact 1), fakecuda counts and refuses.
func TestModelGraphNeedsContext(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	g := mGraph(t)
	mEmptyNode(t, g)
	x := mInstantiate(t, g, 0)
	var errs [4]error
	mNoContext(func() {
		var n cu.CUgraphNode
		var e cu.CUgraphExec
		var g2 cu.CUgraph
		errs[0] = cu.GraphAddEmptyNode(&n, g, nil, 0)
		errs[1] = cu.GraphInstantiateWithFlags(&e, g, 0)
		errs[2] = cu.GraphCreate(&g2, 0)
		if errs[2] == nil {
			errs[2] = cu.GraphDestroy(g2)
		}
		errs[3] = cu.GraphLaunch(x, s)
	})
	assert.ErrorIs(t, errs[0], cu.CUDA_ERROR_INVALID_CONTEXT)
	assert.ErrorIs(t, errs[1], cu.CUDA_ERROR_INVALID_CONTEXT)
	assert.NoError(t, errs[2], "cuGraphCreate needs no context")
	assert.NoError(t, errs[3], "the stream carries the context of a launch")
	assert.EqualValues(t, 2, fcall(t, "fake_no_ctx_graph_calls"))
	require.NoError(t, cu.StreamSynchronize(s))
	require.NoError(t, cu.GraphExecDestroy(x))
	require.NoError(t, cu.GraphDestroy(g))
}

func TestModelGraphEdges(t *testing.T) {
	modelCtx(t)
	g, other := mGraph(t), mGraph(t)
	a, b, c := mEmptyNode(t, g), mEmptyNode(t, g), mEmptyNode(t, g)
	o := mEmptyNode(t, other)
	edge := func(from, to cu.CUgraphNode) error { return cu.GraphAddDependencies(g, &from, &to, nil, 1) }
	require.NoError(t, edge(a, b))
	require.NoError(t, edge(b, c))
	assert.ErrorIs(t, edge(c, a), cu.CUDA_ERROR_INVALID_VALUE, "a cycle")
	assert.ErrorIs(t, edge(a, a), cu.CUDA_ERROR_INVALID_VALUE, "a self edge")
	assert.ErrorIs(t, edge(a, b), cu.CUDA_ERROR_INVALID_VALUE, "a duplicate")
	assert.ErrorIs(t, edge(a, o), cu.CUDA_ERROR_INVALID_VALUE, "a node of another graph")
	froms, tos := []cu.CUgraphNode{a, c}, []cu.CUgraphNode{c, a}
	assert.ErrorIs(t, cu.GraphAddDependencies_v10000(g, &froms[0], &tos[0], 2), cu.CUDA_ERROR_INVALID_VALUE)
	var n uintptr
	require.NoError(t, cu.GraphGetEdges(g, nil, nil, nil, &n))
	assert.EqualValues(t, 2, n, "a failed add adds nothing")
	require.NoError(t, cu.GraphRemoveDependencies(g, &b, &c, nil, 1))
	assert.ErrorIs(t, cu.GraphRemoveDependencies_v10000(g, &b, &c, 1), cu.CUDA_ERROR_INVALID_VALUE)

	// Edge data: a programmatic edge cannot be read back without it.
	var d cu.CUgraphNode
	var np cu.CUgraphNodeParams
	np.Type = cu.CU_GRAPH_NODE_TYPE_EMPTY
	ed := cu.CUgraphEdgeData{Type: uint8(cu.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)}
	require.NoError(t, cu.GraphAddNode(&d, g, &c, &ed, 1, &np))
	var dep cu.CUgraphNode
	n = 1
	assert.ErrorIs(t, cu.GraphNodeGetDependencies(d, &dep, nil, &n), cu.CUDA_ERROR_LOSSY_QUERY)
	var back cu.CUgraphEdgeData
	require.NoError(t, cu.GraphNodeGetDependencies(d, &dep, &back, &n))
	assert.Equal(t, c, dep)
	assert.Equal(t, ed, back)

	require.NoError(t, cu.GraphDestroyNode(b))
	require.NoError(t, cu.GraphGetEdges(g, nil, nil, nil, &n))
	assert.EqualValues(t, 1, n, "its edges went with it")
	assert.ErrorIs(t, edge(a, b), cu.CUDA_ERROR_INVALID_VALUE)
	assert.EqualValues(t, 1, fcall(t, "fake_bad_handle_uses"))
	require.NoError(t, cu.GraphDestroy(g))
	require.NoError(t, cu.GraphDestroy(other))
}

func TestModelGraphChecksPointers(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	_, fs := mLoadFake(t)
	p := mAlloc(t, 64)
	g := mGraph(t)
	mKernelNode(t, g, fs["fill"], mFill(p, 1, 16))
	x := mInstantiate(t, g, 0)
	require.NoError(t, cu.MemFree(p))
	require.NoError(t, cu.GraphLaunch(x, s), "the launch is queued")
	require.NoError(t, cu.StreamSynchronize(s))
	assert.EqualValues(t, 1, fcall(t, "fake_bad_ptr_uses"), "the node's pointer was checked when it ran")
	assert.Contains(t, faketest.LastBadUse(t), "graph kernel node")

	var n cu.CUgraphNode
	kp := cu.CUDA_KERNEL_NODE_PARAMS_v2{Func: fs["fill"], GridDimX: 1, GridDimY: 1, GridDimZ: 1, BlockDimX: 1, BlockDimY: 1,
		BlockDimZ: 1, KernelParams: &mFill(p, 1, 16).ptrs[0]}
	assert.ErrorIs(t, cu.GraphAddKernelNode(&n, g, nil, 0, &kp), cu.CUDA_ERROR_INVALID_VALUE, "a freed buffer as a new argument")
	ms := cu.CUDA_MEMSET_NODE_PARAMS_v1{Dst: p, Value: 1, ElementSize: 4, Width: 16, Height: 1}
	assert.ErrorIs(t, cu.GraphAddMemsetNode(&n, g, nil, 0, &ms, 0), cu.CUDA_ERROR_INVALID_VALUE)
	ms.Width = 0
	assert.ErrorIs(t, cu.GraphAddMemsetNode(&n, g, nil, 0, &ms, 0), cu.CUDA_ERROR_INVALID_VALUE, "zero size")
	assert.EqualValues(t, 3, fcall(t, "fake_bad_ptr_uses"))
	require.NoError(t, cu.GraphExecDestroy(x))
	require.NoError(t, cu.GraphDestroy(g))
}

func TestModelGraphCloneAndExecOutliveOriginals(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	_, fs := mLoadFake(t)
	p := mAlloc(t, 64)
	g := mGraph(t)
	k := mKernelNode(t, g, fs["fill"], mFill(p, 5, 16))
	h := mHostNode(t, g, "fake_count_fn", 11, k)
	var c cu.CUgraph
	require.NoError(t, cu.GraphClone(&c, g))
	var ck, ch cu.CUgraphNode
	require.NoError(t, cu.GraphNodeFindInClone(&ck, k, c))
	require.NoError(t, cu.GraphNodeFindInClone(&ch, h, c))
	assert.NotEqual(t, k, ck)
	var typ cu.CUgraphNodeType
	require.NoError(t, cu.GraphNodeGetType(ch, &typ))
	assert.Equal(t, cu.CU_GRAPH_NODE_TYPE_HOST, typ)
	assert.Equal(t, []cu.CUgraphNode{ck}, mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphNodeGetDependencies(ch, v, nil, n) }))
	assert.ErrorIs(t, cu.GraphNodeFindInClone(&ck, ck, c), cu.CUDA_ERROR_INVALID_VALUE)

	x := mInstantiate(t, g, 0)
	require.NoError(t, cu.GraphDestroy(g))
	require.NoError(t, cu.GraphLaunch(x, s), "an executable outlives its graph")
	xc := mInstantiate(t, c, 0)
	require.NoError(t, cu.GraphDestroy(c))
	require.NoError(t, cu.GraphLaunch(xc, s), "a clone outlives its original")
	require.NoError(t, cu.StreamSynchronize(s))
	assert.EqualValues(t, 2, fcall(t, "fake_count", 11))
	assert.Equal(t, mSeq(5, 16), mReadInts(t, p, 16))
	require.NoError(t, cu.GraphExecDestroy(x))
	require.NoError(t, cu.GraphExecDestroy(xc))
	require.NoError(t, cu.MemFree(p))
}

var mGoDestructor = sync.OnceValue(func() uintptr {
	return purego.NewCallback(func(data uintptr) { mGoDestroyed.Add(int64(data)) })
})

var mGoDestroyed atomic.Int64

// A user object's destructor runs on a fake CUDA thread after the last
// reference (caller, graph, clone, executable) is gone and the launches of
// executables holding it have finished.
func TestModelUserObjects(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	p := mAlloc(t, 4096)
	buf := make([]byte, 4096)
	// What other tests left to collect, release or destroy goes first: its
	// destructors would count here.
	gcAll()
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	uobjs, ran := fcall(t, "fake_live_user_objects"), fcall(t, "fake_destructors_run")
	var o cu.CUuserObject
	require.NoError(t, cu.UserObjectCreate(&o, uintptr(12), mHostFn(t, "fake_count_fn"), 1,
		uint32(cu.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)))
	assert.Equal(t, uobjs+1, fcall(t, "fake_live_user_objects"))
	g := mGraph(t)
	var n cu.CUgraphNode
	cp := mCopy(unsafe.Pointer(&buf[0]), nil, 0, p, 4096)
	require.NoError(t, cu.GraphAddMemcpyNode(&n, g, nil, 0, &cp, 0))
	require.NoError(t, cu.GraphRetainUserObject(g, o, 1, uint32(cu.CU_GRAPH_USER_OBJECT_MOVE)))
	var c cu.CUgraph
	require.NoError(t, cu.GraphClone(&c, g))
	x := mInstantiate(t, g, 0)
	require.NoError(t, cu.GraphDestroy(g))
	require.NoError(t, cu.GraphDestroy(c))
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	assert.Zero(t, fcall(t, "fake_count", 12), "the executable still holds it")

	release := hold(t, "fake_set_copy_delay_us") // the copy node waits until released: no timing
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.GraphExecDestroy(x))
	waitGauge(t, "fake_copies_in_delay", 1) // the launch is running its copy node
	assert.Zero(t, fcall(t, "fake_count", 12), "the launch in flight holds it")
	assert.Equal(t, uobjs+1, fcall(t, "fake_live_user_objects"))
	release()
	require.NoError(t, cu.StreamSynchronize(s))
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	assert.EqualValues(t, 1, fcall(t, "fake_count", 12))
	assert.Equal(t, uobjs, fcall(t, "fake_live_user_objects"))
	assert.Equal(t, ran+1, fcall(t, "fake_destructors_run"))
	assert.ErrorIs(t, cu.UserObjectRelease(o, 1), cu.CUDA_ERROR_INVALID_HANDLE)

	// Caller references; over-release; graph release; a Go destructor.
	mGoDestroyed.Store(0)
	require.NoError(t, cu.UserObjectCreate(&o, uintptr(5), cu.CUhostFn(mGoDestructor()), 1,
		uint32(cu.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)))
	require.NoError(t, cu.UserObjectRetain(o, 2))
	assert.ErrorIs(t, cu.UserObjectRelease(o, 4), cu.CUDA_ERROR_INVALID_VALUE)
	g = mGraph(t)
	require.NoError(t, cu.GraphRetainUserObject(g, o, 2, 0))
	assert.ErrorIs(t, cu.GraphReleaseUserObject(g, o, 3), cu.CUDA_ERROR_INVALID_VALUE, "the graph holds two")
	require.NoError(t, cu.GraphReleaseUserObject(g, o, 2))
	require.NoError(t, cu.UserObjectRelease(o, 3))
	require.NoError(t, cu.GraphDestroy(g))
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	assert.EqualValues(t, 5, mGoDestroyed.Load(), "the Go destructor ran once")
	assert.EqualValues(t, 2, fcall(t, "fake_bad_handle_uses"))
	require.NoError(t, cu.MemFree(p))
}

func TestModelGraphMemoryNodes(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	_, fs := mLoadFake(t)
	live := fcall(t, "fake_live_allocations")
	g := mGraph(t)
	mp := cu.CUDA_MEM_ALLOC_NODE_PARAMS_v1{Bytesize: 64}
	mp.PoolProps.AllocType = cu.CU_MEM_ALLOCATION_TYPE_PINNED
	mp.PoolProps.Location.Type = cu.CU_MEM_LOCATION_TYPE_DEVICE
	var an, cn, fn cu.CUgraphNode
	require.NoError(t, cu.GraphAddMemAllocNode(&an, g, nil, 0, &mp))
	dptr := mp.Dptr
	require.NotZero(t, dptr)
	kn := mKernelNode(t, g, fs["fill"], mFill(dptr, 9, 16), an)
	out := make([]int32, 16)
	cp := mCopy(nil, unsafe.Pointer(&out[0]), dptr, 0, 64)
	require.NoError(t, cu.GraphAddMemcpyNode(&cn, g, &kn, 1, &cp, 0))
	require.NoError(t, cu.GraphAddMemFreeNode(&fn, g, &cn, 1, dptr))
	var back cu.CUDA_MEM_ALLOC_NODE_PARAMS_v1
	require.NoError(t, cu.GraphMemAllocNodeGetParams(an, &back))
	assert.Equal(t, dptr, back.Dptr)

	x := mInstantiate(t, g, 0)
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.GraphLaunch(x, s), "freed in the graph: relaunch is fine")
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, mSeq(9, 16), out)
	assert.Equal(t, live, fcall(t, "fake_live_allocations"))
	assert.ErrorIs(t, cu.MemsetD8(dptr, 0, 1), cu.CUDA_ERROR_INVALID_VALUE, "freed by its free node")

	var c cu.CUgraph
	assert.ErrorIs(t, cu.GraphClone(&c, g), cu.CUDA_ERROR_NOT_SUPPORTED)
	assert.ErrorIs(t, cu.GraphDestroyNode(kn), cu.CUDA_ERROR_INVALID_VALUE)
	var x2 cu.CUgraphExec
	assert.ErrorIs(t, cu.GraphInstantiateWithFlags(&x2, g, 0), cu.CUDA_ERROR_INVALID_VALUE, "one executable at a time")
	require.NoError(t, cu.GraphExecDestroy(x))
	require.NoError(t, cu.GraphDestroy(g))

	// Not freed in the graph: live after the launch, until freed outside.
	for _, flags := range []uint64{0, uint64(cu.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)} {
		g = mGraph(t)
		require.NoError(t, cu.GraphAddMemAllocNode(&an, g, nil, 0, &mp))
		x = mInstantiate(t, g, flags)
		require.NoError(t, cu.GraphLaunch(x, s))
		require.NoError(t, cu.StreamSynchronize(s))
		assert.Equal(t, live+1, fcall(t, "fake_live_allocations"))
		require.NoError(t, cu.MemsetD8(mp.Dptr, 1, 64))
		if flags == 0 {
			assert.ErrorIs(t, cu.GraphLaunch(x, s), cu.CUDA_ERROR_INVALID_VALUE, "its allocation is still live")
			require.NoError(t, cu.MemFreeAsync(mp.Dptr, s))
		}
		require.NoError(t, cu.GraphLaunch(x, s))
		require.NoError(t, cu.StreamSynchronize(s))
		require.NoError(t, cu.MemFree(mp.Dptr))
		assert.Equal(t, live, fcall(t, "fake_live_allocations"))
		require.NoError(t, cu.GraphExecDestroy(x))
		require.NoError(t, cu.GraphDestroy(g))
	}
	assert.Zero(t, fcall(t, "fake_bad_handle_uses"))
	assert.EqualValues(t, 1, fcall(t, "fake_bad_ptr_uses"))
}

func TestModelGraphDestroyedHandles(t *testing.T) {
	modelCtx(t)
	execs := fcall(t, "fake_live_execs")
	s := mStream(t)
	g := mGraph(t)
	mEmptyNode(t, g)
	x := mInstantiate(t, g, 0)
	require.NoError(t, cu.GraphDestroy(g))
	var n cu.CUgraphNode
	assert.ErrorIs(t, cu.GraphAddEmptyNode(&n, g, nil, 0), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.ErrorIs(t, cu.GraphDestroy(g), cu.CUDA_ERROR_INVALID_HANDLE)
	var num uintptr
	assert.ErrorIs(t, cu.GraphGetNodes(g, nil, &num), cu.CUDA_ERROR_INVALID_HANDLE)
	require.NoError(t, cu.GraphExecDestroy(x))
	assert.ErrorIs(t, cu.GraphLaunch(x, s), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.ErrorIs(t, cu.GraphExecDestroy(x), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.ErrorIs(t, cu.GraphUpload(x, s), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.EqualValues(t, 6, fcall(t, "fake_bad_handle_uses"))
	assert.Equal(t, execs, fcall(t, "fake_live_execs"))
}

func TestModelGraphChildrenAndEvents(t *testing.T) {
	modelCtx(t)
	s, s2 := mStream(t), mStream(t)
	_, fs := mLoadFake(t)
	p := mAlloc(t, 64)
	child := mGraph(t)
	mKernelNode(t, child, fs["fill"], mFill(p, 20, 16))
	parent := mGraph(t)
	var cn cu.CUgraphNode
	require.NoError(t, cu.GraphAddChildGraphNode(&cn, parent, nil, 0, child))
	mEmptyNode(t, child) // the node holds a clone: this changes nothing there
	var embedded cu.CUgraph
	require.NoError(t, cu.GraphChildGraphNodeGetGraph(cn, &embedded))
	assert.Len(t, mNodes(t, func(v *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetNodes(embedded, v, n) }), 1)
	assert.ErrorIs(t, cu.GraphDestroy(embedded), cu.CUDA_ERROR_INVALID_VALUE, "it goes with its node")
	var e cu.CUevent
	require.NoError(t, cu.EventCreate(&e, 0))
	var rn cu.CUgraphNode
	require.NoError(t, cu.GraphAddEventRecordNode(&rn, parent, &cn, 1, e))
	var got cu.CUevent
	require.NoError(t, cu.GraphEventRecordNodeGetEvent(rn, &got))
	assert.Equal(t, e, got)

	// A graph on s2 waits for the record node of the graph on s, which
	// follows a slow kernel and a host node there.
	h1 := mHostNode(t, parent, "fake_log_fn", 1, cn)
	require.NoError(t, cu.GraphRemoveDependencies(parent, &cn, &rn, nil, 1))
	require.NoError(t, cu.GraphAddDependencies(parent, &h1, &rn, nil, 1))
	waiter := mGraph(t)
	var wn cu.CUgraphNode
	require.NoError(t, cu.GraphAddEventWaitNode(&wn, waiter, nil, 0, e))
	mHostNode(t, waiter, "fake_log_fn", 2, wn)
	xp, xw := mInstantiate(t, parent, 0), mInstantiate(t, waiter, 0)
	fcall(t, "fake_set_kernel_delay_us", 10000)
	require.NoError(t, cu.GraphLaunch(xp, s))
	require.NoError(t, cu.GraphLaunch(xw, s2))
	require.NoError(t, cu.StreamSynchronize(s2))
	require.NoError(t, cu.EventQuery(e))
	assert.Equal(t, mSeq(20, 16), mReadInts(t, p, 16))
	require.NoError(t, cu.StreamSynchronize(s))
	require.EqualValues(t, 2, fcall(t, "fake_log_len"))
	assert.EqualValues(t, 2, fcall(t, "fake_log_at", 1), "the waiter ran after the record")

	for _, x := range []cu.CUgraphExec{xp, xw} {
		require.NoError(t, cu.GraphExecDestroy(x))
	}
	for _, g := range []cu.CUgraph{parent, child, waiter} {
		require.NoError(t, cu.GraphDestroy(g))
	}
	require.NoError(t, cu.EventDestroy(e))
	require.NoError(t, cu.MemFree(p))
}

func TestModelGraphGenericNodesAndUpdates(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	_, fs := mLoadFake(t)
	p := mAlloc(t, 64)
	g := mGraph(t)
	var np cu.CUgraphNodeParams
	np.Type = cu.CU_GRAPH_NODE_TYPE_KERNEL
	a := mFill(p, 1, 16)
	*np.Anon0.Kernel() = cu.CUDA_KERNEL_NODE_PARAMS_v3{Func: fs["fill"], GridDimX: 1, GridDimY: 1, GridDimZ: 1,
		BlockDimX: 16, BlockDimY: 1, BlockDimZ: 1, KernelParams: &a.ptrs[0]}
	var k cu.CUgraphNode
	require.NoError(t, cu.GraphAddNode(&k, g, nil, nil, 0, &np))
	var ms cu.CUgraphNodeParams
	ms.Type = cu.CU_GRAPH_NODE_TYPE_MEMSET
	*ms.Anon0.Memset() = cu.CUDA_MEMSET_NODE_PARAMS_v2{Dst: p + 60, Value: 77, ElementSize: 4, Width: 1, Height: 1}
	var m cu.CUgraphNode
	require.NoError(t, cu.GraphAddNode_v12020(&m, g, &k, 1, &ms), "the older ABI, through cuGetProcAddress")
	var cond cu.CUgraphNodeParams
	cond.Type = cu.CU_GRAPH_NODE_TYPE_CONDITIONAL
	var cnd cu.CUgraphNode
	assert.ErrorIs(t, cu.GraphAddNode(&cnd, g, nil, nil, 0, &cond), cu.CUDA_ERROR_NOT_SUPPORTED)

	x := mInstantiate(t, g, 0)
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, append(mSeq(1, 15), 77), mReadInts(t, p, 16))

	// Changing the executable's node changes the next launch, not the graph.
	b := mFill(p, 40, 16)
	kp := cu.CUDA_KERNEL_NODE_PARAMS_v2{Func: fs["fill"], GridDimX: 1, GridDimY: 1, GridDimZ: 1, BlockDimX: 16,
		BlockDimY: 1, BlockDimZ: 1, KernelParams: &b.ptrs[0]}
	require.NoError(t, cu.GraphExecKernelNodeSetParams(x, k, &kp))
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, append(mSeq(40, 15), 77), mReadInts(t, p, 16))
	var read cu.CUDA_KERNEL_NODE_PARAMS_v2
	require.NoError(t, cu.GraphKernelNodeGetParams(k, &read))
	assert.EqualValues(t, 1, *(*int32)(unsafe.Slice(read.KernelParams, 3)[1]))

	// Update from a graph of the same shape; a different shape is refused.
	require.NoError(t, cu.GraphKernelNodeSetParams(k, &cu.CUDA_KERNEL_NODE_PARAMS_v2{Func: fs["fill"], GridDimX: 1,
		GridDimY: 1, GridDimZ: 1, BlockDimX: 16, BlockDimY: 1, BlockDimZ: 1, KernelParams: &mFill(p, 300, 16).ptrs[0]}))
	var info cu.CUgraphExecUpdateResultInfo
	require.NoError(t, cu.GraphExecUpdate(x, g, &info))
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Equal(t, append(mSeq(300, 15), 77), mReadInts(t, p, 16))
	mEmptyNode(t, g)
	assert.ErrorIs(t, cu.GraphExecUpdate(x, g, &info), cu.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
	assert.Equal(t, cu.CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, info.Result)

	var ip cu.CUDA_GRAPH_INSTANTIATE_PARAMS
	ip.Flags = uint64(cu.CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
	ip.HUploadStream = s
	var x2 cu.CUgraphExec
	require.NoError(t, cu.GraphInstantiateWithParams(&x2, g, &ip))
	assert.Equal(t, cu.CUDA_GRAPH_INSTANTIATE_SUCCESS, ip.Result_out)
	var flags uint64
	require.NoError(t, cu.GraphExecGetFlags(x2, &flags))
	assert.Equal(t, ip.Flags, flags)
	require.NoError(t, cu.GraphUpload(x2, s))
	require.NoError(t, cu.GraphExecDestroy(x2))
	require.NoError(t, cu.GraphExecDestroy(x))
	require.NoError(t, cu.GraphDestroy(g))
	require.NoError(t, cu.MemFree(p))
}
