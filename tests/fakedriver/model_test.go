//go:build linux

package fakedriver_test

// Tests of fakecuda's model itself (MODEL.md), through the raw table: what
// it detects (bad pointers, dead handles, calls without a context or from a
// callback) and how its streams, memory and graphs behave, so that the
// driver and graph tests built on it can trust what it reports. This file
// has the handles, failure injection, contexts, libraries and kernel
// arguments; model_memory, model_stream, model_graph, model_capture and
// model_concurrency the rest, model_helpers their helpers.

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
)

func TestModelHandleRegistry(t *testing.T) {
	modelCtx(t)
	bad := func() int64 { return fcall(t, "fake_bad_handle_uses") }
	streams := fcall(t, "fake_live_streams")
	s := mStream(t)
	assert.Equal(t, streams+1, fcall(t, "fake_live_streams"))
	require.NoError(t, cu.StreamDestroy(s))
	assert.Equal(t, streams, fcall(t, "fake_live_streams"))
	assert.ErrorIs(t, cu.StreamSynchronize(s), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.ErrorIs(t, cu.StreamDestroy(s), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.ErrorIs(t, cu.StreamQuery(cu.CUstream(0xdead0)), cu.CUDA_ERROR_INVALID_HANDLE, "never created")
	assert.EqualValues(t, 3, bad())

	s = mStream(t)
	var e cu.CUevent
	require.NoError(t, cu.EventCreate(&e, 0))
	require.NoError(t, cu.EventDestroy(e))
	assert.ErrorIs(t, cu.EventRecord(e, s), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.ErrorIs(t, cu.EventSynchronize(e), cu.CUDA_ERROR_INVALID_HANDLE)

	mods := fcall(t, "fake_live_modules")
	m, fs := mLoadFake(t)
	require.NoError(t, cu.ModuleUnload(m))
	assert.Equal(t, mods, fcall(t, "fake_live_modules"))
	p := mAlloc(t, 64)
	assert.ErrorIs(t, mLaunchFill(fs["fill"], s, mFill(p, 1, 16)), cu.CUDA_ERROR_INVALID_HANDLE, "function of an unloaded module")
	assert.ErrorIs(t, cu.ModuleUnload(m), cu.CUDA_ERROR_INVALID_HANDLE)
	var f cu.CUfunction
	assert.ErrorIs(t, cu.ModuleGetFunction(&f, m, mCstr("fill")), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.EqualValues(t, 8, bad())

	var pool cu.CUmemoryPool
	props := cu.CUmemPoolProps_v1{AllocType: cu.CU_MEM_ALLOCATION_TYPE_PINNED,
		Location: cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE}}
	require.NoError(t, cu.MemPoolCreate(&pool, &props))
	require.NoError(t, cu.MemPoolDestroy(pool))
	assert.ErrorIs(t, cu.MemPoolTrimTo(pool, 0), cu.CUDA_ERROR_INVALID_HANDLE)

	buf := make([]byte, 64)
	assert.ErrorIs(t, cu.MemHostUnregister(unsafe.Pointer(&buf[0])), cu.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
	assert.EqualValues(t, 10, bad())

	// A destroyed context: CUDA_ERROR_INVALID_CONTEXT, counted too.
	var c cu.CUcontext
	require.NoError(t, cu.CtxCreate(&c, nil, 0, 0))
	require.NoError(t, cu.CtxPopCurrent(nil))
	assert.ErrorIs(t, cu.CtxEnablePeerAccess(c, 0), cu.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "one device: no peers")
	assert.ErrorIs(t, cu.CtxDisablePeerAccess(c), cu.CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
	require.NoError(t, cu.CtxDestroy(c))
	assert.ErrorIs(t, cu.CtxPushCurrent(c), cu.CUDA_ERROR_INVALID_CONTEXT)
	assert.ErrorIs(t, cu.CtxEnablePeerAccess(c, 0), cu.CUDA_ERROR_INVALID_CONTEXT)
	assert.EqualValues(t, 12, bad())
	assert.EqualValues(t, 0, fcall(t, "fake_bad_ptr_uses"))
	require.NoError(t, cu.MemFree(p))
	require.NoError(t, cu.StreamDestroy(s))
}

func TestModelFailureInjection(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	count := mHostFn(t, "fake_count_fn")
	faketest.FailCalls(t, "cuLaunchHostFunc", int32(cu.CUDA_ERROR_OUT_OF_MEMORY), 0, 1)
	assert.ErrorIs(t, cu.LaunchHostFunc(s, count, uintptr(3)), cu.CUDA_ERROR_OUT_OF_MEMORY)
	require.NoError(t, cu.LaunchHostFunc(s, count, uintptr(3)), "only the next call fails")
	require.NoError(t, cu.StreamSynchronize(s))
	assert.EqualValues(t, 1, fcall(t, "fake_count", 3))

	faketest.FailCalls(t, "cuMemFreeAsync_v2", int32(cu.CUDA_ERROR_ILLEGAL_ADDRESS), 1, 1) // versioned names match too
	var a, b cu.CUdeviceptr
	require.NoError(t, cu.MemAllocAsync(&a, 64, s))
	require.NoError(t, cu.MemAllocAsync(&b, 64, s))
	require.NoError(t, cu.MemFreeAsync(a, s), "skipped")
	assert.ErrorIs(t, cu.MemFreeAsync(b, s), cu.CUDA_ERROR_ILLEGAL_ADDRESS)
	require.NoError(t, cu.MemFreeAsync(b, s), "nothing was done by the failed call")

	// A sticky error: every stream-ordered call and sync fails from now on,
	// and queued host functions never run.
	p := mAlloc(t, 64)
	buf := make([]byte, 64)
	release := hold(t, "fake_set_copy_delay_us") // the copy waits until released: no timing
	require.NoError(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&buf[0]), 64, s))
	require.NoError(t, cu.LaunchHostFunc(s, count, uintptr(4)))
	fcall(t, "fake_set_sticky_error", uintptr(cu.CUDA_ERROR_ILLEGAL_ADDRESS))
	assert.ErrorIs(t, cu.StreamSynchronize(s), cu.CUDA_ERROR_ILLEGAL_ADDRESS)
	assert.ErrorIs(t, cu.CtxSynchronize_v2000(), cu.CUDA_ERROR_ILLEGAL_ADDRESS)
	assert.ErrorIs(t, cu.LaunchHostFunc(s, count, uintptr(4)), cu.CUDA_ERROR_ILLEGAL_ADDRESS)
	assert.ErrorIs(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&buf[0]), 64, s), cu.CUDA_ERROR_ILLEGAL_ADDRESS)
	release()
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	assert.Zero(t, fcall(t, "fake_count", 4), "the queued host function never ran")
	assert.Positive(t, fcall(t, "fake_dropped_ops"))
	fcall(t, "fake_clear_sticky_error")
	require.NoError(t, cu.StreamSynchronize(s))
	assert.Zero(t, fcall(t, "fake_count", 4))
	require.NoError(t, cu.MemFree(p))
}

func TestModelCallbacksMayNotCallCUDA(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	require.NoError(t, cu.LaunchHostFunc(s, mHostFn(t, "fake_cuda_fn"), 0))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.EqualValues(t, 1, fcall(t, "fake_callback_cuda_calls"))
	assert.Contains(t, faketest.LastBadUse(t), "cuCtxSynchronize")
}

func TestModelContextDestroyKillsItsObjects(t *testing.T) {
	modelCtx(t)
	counts := func() []int64 {
		return []int64{fcall(t, "fake_live_allocations"), fcall(t, "fake_live_streams"), fcall(t, "fake_live_events"),
			fcall(t, "fake_live_modules"), fcall(t, "fake_live_contexts")}
	}
	before := counts()
	var c cu.CUcontext
	require.NoError(t, cu.CtxCreate(&c, nil, 0, 0))
	p := mAlloc(t, 16)
	s := mStream(t)
	var e cu.CUevent
	require.NoError(t, cu.EventCreate(&e, 0))
	mLoadFake(t)
	assert.Equal(t, []int64{before[0] + 1, before[1] + 1, before[2] + 1, before[3] + 1, before[4] + 1}, counts())
	require.NoError(t, cu.CtxDestroy(c))
	assert.Equal(t, before, counts())
	assert.ErrorIs(t, cu.MemFree(p), cu.CUDA_ERROR_INVALID_VALUE)
	assert.ErrorIs(t, cu.StreamDestroy(s), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.ErrorIs(t, cu.EventDestroy(e), cu.CUDA_ERROR_INVALID_HANDLE)
}

func TestModelLibraries(t *testing.T) {
	modelCtx(t)
	libs := fcall(t, "fake_live_libraries")
	img := []byte("FAKE library\x00")
	var lib cu.CUlibrary
	require.NoError(t, cu.LibraryLoadData(&lib, unsafe.Pointer(&img[0]), nil, nil, 0, nil, nil, 0))
	assert.Equal(t, libs+1, fcall(t, "fake_live_libraries"))
	var k cu.CUkernel
	require.NoError(t, cu.LibraryGetKernel(&k, lib, mCstr("add4")))
	assert.ErrorIs(t, cu.LibraryGetKernel(&k, lib, mCstr("nope")), cu.CUDA_ERROR_NOT_FOUND)
	require.NoError(t, cu.LibraryGetKernel(&k, lib, mCstr("add4")))
	var off, size uintptr
	var noCtx error
	mNoContext(func() { noCtx = cu.KernelGetParamInfo(k, 0, &off, &size) })
	assert.ErrorIs(t, noCtx, cu.CUDA_ERROR_INVALID_CONTEXT, "cuKernelGetParamInfo needs a context")
	require.NoError(t, cu.KernelGetParamInfo(k, 0, &off, &size))
	assert.EqualValues(t, 8, size)
	require.NoError(t, cu.KernelGetParamInfo(k, 3, &off, &size))
	assert.ErrorIs(t, cu.KernelGetParamInfo(k, 4, &off, &size), cu.CUDA_ERROR_INVALID_VALUE)

	s := mStream(t)
	out := mAlloc(t, 4)
	pv, x, y, z := uint64(out), uint32(1), uint32(2), uint32(3)
	args := []unsafe.Pointer{unsafe.Pointer(&pv), unsafe.Pointer(&x), unsafe.Pointer(&y), unsafe.Pointer(&z)}
	require.NoError(t, cu.LaunchKernel(cu.CUfunction(k), 1, 1, 1, 1, 1, 1, 0, s, &args[0], nil))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.EqualValues(t, []int32{6}, mReadInts(t, out, 1))
	require.NoError(t, cu.LibraryUnload(lib))
	assert.Equal(t, libs, fcall(t, "fake_live_libraries"))
	assert.ErrorIs(t, cu.LaunchKernel(cu.CUfunction(k), 1, 1, 1, 1, 1, 1, 0, s, &args[0], nil), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.ErrorIs(t, cu.LibraryUnload(lib), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.EqualValues(t, 2, fcall(t, "fake_bad_handle_uses"))
	require.NoError(t, cu.MemFree(out))
}

// A kernel argument naming memory of another context is a bad pointer,
// and a kernel still running when its memory is freed is caught.
func TestModelKernelArguments(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	_, fs := mLoadFake(t)
	var c cu.CUcontext
	require.NoError(t, cu.CtxCreate(&c, nil, 0, 0))
	other := mAlloc(t, 64)
	require.NoError(t, cu.CtxPopCurrent(nil))
	assert.ErrorIs(t, mLaunchFill(fs["fill"], s, mFill(other, 1, 16)), cu.CUDA_ERROR_INVALID_VALUE)
	assert.Contains(t, faketest.LastBadUse(t), "another context")
	require.NoError(t, cu.CtxDestroy(c))

	p := mAlloc(t, 64)
	release := hold(t, "fake_set_kernel_delay_us") // the kernels wait until released: no timing
	require.NoError(t, mLaunchFill(fs["fill"], s, mFill(p, 1, 16)))
	var a cu.CUdeviceptr
	require.NoError(t, cu.MemAllocAsync(&a, 64, s))
	require.NoError(t, mLaunchFill(fs["fill"], s, mFill(a, 1, 16)))
	require.NoError(t, cu.MemFree(a), "stream-ordered memory goes at once")
	release()
	require.NoError(t, cu.StreamSynchronize(s))
	assert.EqualValues(t, 2, fcall(t, "fake_bad_ptr_uses"))
	require.NoError(t, cu.MemFree(p))
}

// The functions MODEL.md promises resolve; the rest of the table is listed.
func TestModelResolvesTheTable(t *testing.T) {
	modelCtx(t)
	missing := map[string]bool{}
	var names []string
	for _, r := range cu.ResolveAll() {
		if r.Err != nil {
			assert.ErrorIs(t, r.Err, cu.ErrNotSupported, r.Func)
			if !missing[r.Func] {
				names = append(names, r.Func)
			}
			missing[r.Func] = true
		}
	}
	for _, fn := range []string{
		"cuMemAlloc", "cuMemFree", "cuMemAllocManaged", "cuMemHostAlloc", "cuMemFreeHost", "cuMemHostRegister",
		"cuMemHostUnregister", "cuMemcpyDtoD", "cuMemsetD8", "cuMemsetD16", "cuMemsetD8Async", "cuMemsetD16Async",
		"cuPointerGetAttribute", "cuMemGetInfo", "cuMemAllocAsync", "cuMemAllocFromPoolAsync", "cuMemFreeAsync",
		"cuMemPoolCreate", "cuMemPoolDestroy", "cuDeviceGetDefaultMemPool", "cuMemPoolGetAttribute",
		"cuMemPoolSetAttribute", "cuMemPoolTrimTo", "cuEventCreate", "cuEventRecord", "cuEventQuery",
		"cuEventSynchronize", "cuEventDestroy", "cuEventElapsedTime", "cuStreamWaitEvent", "cuLaunchHostFunc",
		"cuLibraryLoadData", "cuLibraryUnload", "cuLibraryGetKernel", "cuKernelGetParamInfo", "cuCtxSynchronize",
		"cuGraphCreate", "cuGraphDestroy", "cuGraphAddNode", "cuGraphAddKernelNode", "cuGraphAddMemcpyNode",
		"cuGraphAddMemsetNode", "cuGraphAddHostNode", "cuGraphAddEmptyNode", "cuGraphAddChildGraphNode",
		"cuGraphAddEventRecordNode", "cuGraphAddEventWaitNode", "cuGraphAddMemAllocNode", "cuGraphAddMemFreeNode",
		"cuGraphDestroyNode", "cuGraphAddDependencies", "cuGraphRemoveDependencies", "cuGraphGetNodes",
		"cuGraphGetRootNodes", "cuGraphGetEdges", "cuGraphNodeGetType", "cuGraphNodeGetDependencies",
		"cuGraphNodeGetDependentNodes", "cuGraphKernelNodeGetParams", "cuGraphClone", "cuGraphNodeFindInClone",
		"cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams", "cuGraphLaunch", "cuGraphUpload",
		"cuGraphExecDestroy", "cuGraphDebugDotPrint", "cuUserObjectCreate", "cuUserObjectRetain",
		"cuUserObjectRelease", "cuGraphRetainUserObject", "cuGraphReleaseUserObject", "cuMemcpyPeer", "cuMemcpyPeerAsync",
	} {
		assert.False(t, missing[fn], "%s does not resolve", fn)
	}
	t.Logf("%d of the table's functions are not served by fakecuda: %s", len(names), strings.Join(names, " "))
}
