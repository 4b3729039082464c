//go:build linux

package fakedriver_test

// Tests of fakecuda's model itself (MODEL.md), through the raw table: what
// it detects (bad pointers, dead handles, calls without a context or from a
// callback) and how its streams, memory and graphs behave, so that the
// driver and graph tests built on it can trust what it reports.

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/gputest"
)

// modelCtx makes device 0's primary context current on a locked thread,
// resets the bad-use counters, and undoes every slow-down and error the
// test may set.
func modelCtx(t *testing.T) cu.CUcontext {
	t.Helper()
	need(t)
	ctx := gputest.PrimaryContext(t)
	fcall(t, "fake_reset_counters")
	fcall(t, "fake_reset_log")
	t.Cleanup(func() {
		fcall(t, "fake_set_copy_delay_us", 0)
		fcall(t, "fake_set_kernel_delay_us", 0)
		fcall(t, "fake_clear_sticky_error")
		fcall(t, "fake_fail_clear")
		assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 5000), "every queue drained")
	})
	return ctx
}

func mStream(t *testing.T) cu.CUstream {
	t.Helper()
	var s cu.CUstream
	require.NoError(t, cu.StreamCreate(&s, 1))
	return s
}

func mAlloc(t *testing.T, n uintptr) cu.CUdeviceptr {
	t.Helper()
	var p cu.CUdeviceptr
	require.NoError(t, cu.MemAlloc(&p, n))
	return p
}

// asPointer turns a number into an unsafe.Pointer without a conversion vet
// or checkptr would question: user data for callbacks, fake device memory.
func mPtr[T ~uint64 | ~uintptr](v T) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&v))
}

// noContext runs f on a fresh OS thread that has no current context.
func mNoContext(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f()
	}()
	<-done
}

func mHostFn(t testing.TB, name string) cu.CUhostFn { return cu.CUhostFn(faketest.Sym(t, name)) }

func mLoadFake(t *testing.T) (cu.CUmodule, map[string]cu.CUfunction) {
	t.Helper()
	img := []byte("FAKE module\x00")
	var m cu.CUmodule
	require.NoError(t, cu.ModuleLoadData(&m, unsafe.Pointer(&img[0])))
	fs := map[string]cu.CUfunction{}
	for _, name := range []string{"empty", "add4", "fill", "copyi"} {
		var f cu.CUfunction
		require.NoError(t, cu.ModuleGetFunction(&f, m, mCstr(name)))
		fs[name] = f
	}
	return m, fs
}

func mCstr(s string) *byte { b := append([]byte(s), 0); return &b[0] }

// mFillArgs are the arguments of fill(int *out, int v, int n).
type mFillArgs struct {
	p    uint64
	v, n int32
	ptrs [3]unsafe.Pointer
}

func mFill(p cu.CUdeviceptr, v, n int32) *mFillArgs {
	a := &mFillArgs{p: uint64(p), v: v, n: n}
	a.ptrs = [3]unsafe.Pointer{unsafe.Pointer(&a.p), unsafe.Pointer(&a.v), unsafe.Pointer(&a.n)}
	return a
}

func mLaunchFill(f cu.CUfunction, s cu.CUstream, a *mFillArgs) error {
	return cu.LaunchKernel(f, 1, 1, 1, uint32(max(a.n, 1)), 1, 1, 0, s, &a.ptrs[0], nil)
}

func mReadInts(t *testing.T, p cu.CUdeviceptr, n int) []int32 {
	t.Helper()
	out := make([]int32, n)
	require.NoError(t, cu.MemcpyDtoH(unsafe.Pointer(&out[0]), p, uintptr(4*n)))
	return out
}

func mSeq(v, n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = v + int32(i)
	}
	return out
}

// ---- Phase 1: memory, handles, streams ----

func TestModelAllocationRegistry(t *testing.T) {
	modelCtx(t)
	live := fcall(t, "fake_live_allocations")
	p := mAlloc(t, 64)
	assert.Equal(t, live+1, fcall(t, "fake_live_allocations"))
	in := []byte(strings.Repeat("0123456789abcdef", 4))
	require.NoError(t, cu.MemcpyHtoD(p, unsafe.Pointer(&in[0]), 64))
	out := make([]byte, 64)
	require.NoError(t, cu.MemcpyDtoH(unsafe.Pointer(&out[0]), p, 64))
	assert.Equal(t, in, out)
	require.NoError(t, cu.MemcpyDtoD(p+32, p, 16))

	var base cu.CUdeviceptr
	var size uintptr
	require.NoError(t, cu.MemGetAddressRange(&base, &size, p+10))
	assert.Equal(t, p, base)
	assert.EqualValues(t, 64, size)

	assert.ErrorIs(t, cu.MemcpyHtoD(p+32, unsafe.Pointer(&in[0]), 64), cu.CUDA_ERROR_INVALID_VALUE, "overrun")
	assert.EqualValues(t, 1, fcall(t, "fake_bad_ptr_uses"))
	assert.Contains(t, faketest.LastBadUse(t), "overruns")

	require.NoError(t, cu.MemFree(p))
	assert.Equal(t, live, fcall(t, "fake_live_allocations"))
	assert.ErrorIs(t, cu.MemcpyDtoH(unsafe.Pointer(&out[0]), p, 64), cu.CUDA_ERROR_INVALID_VALUE, "use after free")
	assert.ErrorIs(t, cu.MemFree(p), cu.CUDA_ERROR_INVALID_VALUE, "double free")
	assert.ErrorIs(t, cu.MemsetD32(0x1234000, 1, 4), cu.CUDA_ERROR_INVALID_VALUE, "never allocated")
	assert.EqualValues(t, 4, fcall(t, "fake_bad_ptr_uses"))
	assert.Contains(t, faketest.LastBadUse(t), "cuMemsetD32")
	assert.ErrorIs(t, cu.MemsetD16(p+1, 1, 1), cu.CUDA_ERROR_INVALID_VALUE, "misaligned")

	// A new allocation never reuses the old addresses.
	q := mAlloc(t, 64)
	assert.NotEqual(t, p, q)
	assert.ErrorIs(t, cu.MemsetD8(p, 0, 1), cu.CUDA_ERROR_INVALID_VALUE)
	require.NoError(t, cu.MemFree(q))

	// Managed memory is host-accessible; freed memory is poisoned, not unmapped.
	var m cu.CUdeviceptr
	require.NoError(t, cu.MemAllocManaged(&m, 16, uint32(cu.CU_MEM_ATTACH_GLOBAL)))
	var managed int32
	require.NoError(t, cu.PointerGetAttribute(unsafe.Pointer(&managed), cu.CU_POINTER_ATTRIBUTE_IS_MANAGED, m))
	assert.EqualValues(t, 1, managed)
	managed = 0
	d := mAlloc(t, 16)
	require.NoError(t, cu.PointerGetAttribute(unsafe.Pointer(&managed), cu.CU_POINTER_ATTRIBUTE_IS_MANAGED, d))
	assert.EqualValues(t, 0, managed)
	var owner cu.CUcontext
	require.NoError(t, cu.PointerGetAttribute(unsafe.Pointer(&owner), cu.CU_POINTER_ATTRIBUTE_CONTEXT, d))
	assert.NotZero(t, owner)
	host := unsafe.Slice((*byte)(mPtr(m)), 16)
	require.NoError(t, cu.MemsetD8(m, 9, 16))
	assert.EqualValues(t, 9, host[15])
	var free0, total uintptr
	require.NoError(t, cu.MemGetInfo(&free0, &total))
	require.NoError(t, cu.MemFree(m))
	assert.EqualValues(t, 0xdd, host[0], "freed memory reads as poison")
	var free1 uintptr
	require.NoError(t, cu.MemGetInfo(&free1, &total))
	assert.EqualValues(t, 16, free1-free0, "cuMemGetInfo follows the live bytes")
	assert.ErrorIs(t, cu.PointerGetAttribute(unsafe.Pointer(&managed), cu.CU_POINTER_ATTRIBUTE_IS_MANAGED, m),
		cu.CUDA_ERROR_INVALID_VALUE)
	require.NoError(t, cu.MemFree(d))
}

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

// Async copies read and write host memory when they run, not when queued,
// and a stream runs its work in order.
func TestModelStreamsRunLateAndInOrder(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	_, fs := mLoadFake(t)
	p := mAlloc(t, 64)
	fcall(t, "fake_set_copy_delay_us", 50000)
	src := []int32{1}
	require.NoError(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&src[0]), 4, s))
	src[0] = 2 // after the call, before the copy runs
	assert.ErrorIs(t, cu.StreamQuery(s), cu.CUDA_ERROR_NOT_READY)
	assert.Positive(t, fcall(t, "fake_queued_ops"))
	require.NoError(t, cu.LaunchHostFunc(s, mHostFn(t, "fake_log_fn"), uintptr(1)))
	require.NoError(t, mLaunchFill(fs["fill"], s, mFill(p+4, 50, 15)))
	out := make([]int32, 16)
	require.NoError(t, cu.MemcpyDtoHAsync(unsafe.Pointer(&out[0]), p, 64, s))
	require.NoError(t, cu.LaunchHostFunc(s, mHostFn(t, "fake_log_fn"), uintptr(2)))
	require.NoError(t, cu.StreamSynchronize(s))
	require.NoError(t, cu.StreamQuery(s))
	assert.Equal(t, append([]int32{2}, mSeq(50, 15)...), out, "the copy read the slice when it ran, and wrote out then")
	assert.EqualValues(t, 2, fcall(t, "fake_log_len"))
	assert.EqualValues(t, []int64{1, 2}, []int64{fcall(t, "fake_log_at", 0), fcall(t, "fake_log_at", 1)})
	assert.Zero(t, fcall(t, "fake_queued_ops"))

	// cuCtxSynchronize waits for every stream of the context.
	s2 := mStream(t)
	require.NoError(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&src[0]), 4, s))
	require.NoError(t, cu.MemcpyHtoDAsync(p+8, unsafe.Pointer(&src[0]), 4, s2))
	require.NoError(t, cu.CtxSynchronize_v2000())
	require.NoError(t, cu.StreamQuery(s))
	require.NoError(t, cu.StreamQuery(s2))
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses")+fcall(t, "fake_bad_handle_uses"))
}

// cuMemFree of stream-ordered memory frees at once, so queued work that
// still uses it counts a bad use when it runs; cuMemFree of ordinary
// memory waits for the work queued before it.
func TestModelFreeUnderQueuedWork(t *testing.T) {
	ctx := modelCtx(t)
	s := mStream(t)
	buf := make([]byte, 64)
	var a cu.CUdeviceptr
	require.NoError(t, cu.MemAllocAsync(&a, 64, s))
	fcall(t, "fake_set_copy_delay_us", 50000)
	require.NoError(t, cu.MemcpyHtoDAsync(a, unsafe.Pointer(&buf[0]), 64, s))
	require.NoError(t, cu.MemFree(a))
	require.NoError(t, cu.StreamSynchronize(s))
	assert.EqualValues(t, 1, fcall(t, "fake_bad_ptr_uses"), "the queued copy found its memory freed")
	assert.Contains(t, faketest.LastBadUse(t), "cuMemcpyHtoDAsync")

	b := mAlloc(t, 64)
	require.NoError(t, cu.MemcpyHtoDAsync(b, unsafe.Pointer(&buf[0]), 64, s))
	require.NoError(t, cu.MemFree(b))
	require.NoError(t, cu.StreamQuery(s), "cuMemFree waited for the copy")
	assert.EqualValues(t, 1, fcall(t, "fake_bad_ptr_uses"))

	// A synchronous copy racing a free from another thread is caught too.
	c := mAlloc(t, 64)
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cu.CtxPushCurrent(ctx); err != nil {
			done <- err
			return
		}
		defer cu.CtxPopCurrent(nil)
		done <- cu.MemcpyHtoD(c, unsafe.Pointer(&buf[0]), 64)
	}()
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, cu.MemFree(c))
	assert.ErrorIs(t, <-done, cu.CUDA_ERROR_INVALID_VALUE, "the copy saw its memory freed under it")
	assert.EqualValues(t, 2, fcall(t, "fake_bad_ptr_uses"))
}

func TestModelSpecialStreams(t *testing.T) {
	ctx := modelCtx(t)
	var pt1, pt2, legacy, null uint64
	require.NoError(t, cu.StreamGetId(cu.CU_STREAM_PER_THREAD, &pt1))
	require.NoError(t, cu.StreamGetId(cu.CU_STREAM_PER_THREAD, &pt2))
	require.NoError(t, cu.StreamGetId(cu.CU_STREAM_LEGACY, &legacy))
	require.NoError(t, cu.StreamGetId(0, &null))
	assert.Equal(t, pt1, pt2)
	assert.Equal(t, legacy, null, "NULL is the legacy stream")
	assert.NotEqual(t, pt1, legacy)

	var otherPT, otherLegacy uint64
	var errs [2]error
	mNoContext(func() {
		if errs[0] = cu.CtxSetCurrent(ctx); errs[0] != nil {
			return
		}
		errs[0] = cu.StreamGetId(cu.CU_STREAM_PER_THREAD, &otherPT)
		errs[1] = cu.StreamGetId(cu.CU_STREAM_LEGACY, &otherLegacy)
	})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.NotEqual(t, pt1, otherPT, "a per-thread stream per OS thread")
	assert.Equal(t, legacy, otherLegacy, "one legacy stream per context")

	var res [4]error
	mNoContext(func() {
		res[0] = cu.StreamSynchronize(0)
		res[1] = cu.StreamSynchronize(cu.CU_STREAM_PER_THREAD)
		res[2] = cu.StreamQuery(cu.CU_STREAM_LEGACY)
		res[3] = cu.LaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, nil, nil)
	})
	for i, err := range res {
		assert.ErrorIs(t, err, cu.CUDA_ERROR_INVALID_CONTEXT, "call %d", i)
	}

	_, fs := mLoadFake(t)
	p := mAlloc(t, 64)
	require.NoError(t, mLaunchFill(fs["fill"], cu.CU_STREAM_PER_THREAD, mFill(p, 3, 16)))
	require.NoError(t, cu.StreamSynchronize(cu.CU_STREAM_PER_THREAD))
	assert.Equal(t, mSeq(3, 16), mReadInts(t, p, 16))
	require.NoError(t, mLaunchFill(fs["fill"], 0, mFill(p, 4, 16)))
	assert.Equal(t, mSeq(4, 16), mReadInts(t, p, 16), "a synchronous copy follows the legacy stream")
	assert.ErrorIs(t, cu.StreamDestroy(cu.CU_STREAM_LEGACY), cu.CUDA_ERROR_INVALID_HANDLE)
}

func TestModelStreamOrderedMemory(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	var pool cu.CUmemoryPool
	require.NoError(t, cu.DeviceGetDefaultMemPool(&pool, 0))
	var used0, used uint64
	require.NoError(t, cu.MemPoolGetAttribute(pool, cu.CU_MEMPOOL_ATTR_USED_MEM_CURRENT, unsafe.Pointer(&used0)))
	var a cu.CUdeviceptr
	require.NoError(t, cu.MemAllocAsync(&a, 1000, s))
	require.NoError(t, cu.MemPoolGetAttribute(pool, cu.CU_MEMPOOL_ATTR_USED_MEM_CURRENT, unsafe.Pointer(&used)))
	assert.EqualValues(t, 1000, used-used0)
	var mp unsafe.Pointer
	require.NoError(t, cu.PointerGetAttribute(unsafe.Pointer(&mp), cu.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a))
	assert.EqualValues(t, pool, uintptr(mp))

	fcall(t, "fake_set_copy_delay_us", 20000)
	buf := make([]byte, 1000)
	require.NoError(t, cu.MemcpyHtoDAsync(a, unsafe.Pointer(&buf[0]), 1000, s))
	require.NoError(t, cu.MemFreeAsync(a, s), "the free runs after the copy, in stream order")
	assert.ErrorIs(t, cu.MemsetD8Async(a, 0, 1000, s), cu.CUDA_ERROR_INVALID_VALUE, "use after the free was queued")
	assert.ErrorIs(t, cu.MemFreeAsync(a, s), cu.CUDA_ERROR_INVALID_VALUE, "double free")
	require.NoError(t, cu.StreamSynchronize(s))
	assert.EqualValues(t, 2, fcall(t, "fake_bad_ptr_uses"))
	require.NoError(t, cu.MemPoolGetAttribute(pool, cu.CU_MEMPOOL_ATTR_USED_MEM_CURRENT, unsafe.Pointer(&used)))
	assert.Equal(t, used0, used)

	pools := fcall(t, "fake_live_pools")
	var own cu.CUmemoryPool
	props := cu.CUmemPoolProps_v1{AllocType: cu.CU_MEM_ALLOCATION_TYPE_PINNED,
		Location: cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE}}
	require.NoError(t, cu.MemPoolCreate(&own, &props))
	assert.Equal(t, pools+1, fcall(t, "fake_live_pools"))
	threshold := uint64(1 << 20)
	require.NoError(t, cu.MemPoolSetAttribute(own, cu.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, unsafe.Pointer(&threshold)))
	var got uint64
	require.NoError(t, cu.MemPoolGetAttribute(own, cu.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, unsafe.Pointer(&got)))
	assert.Equal(t, threshold, got)
	var b cu.CUdeviceptr
	require.NoError(t, cu.MemAllocFromPoolAsync(&b, 4096, own, s))
	require.NoError(t, cu.MemFreeAsync(b, s))
	require.NoError(t, cu.StreamSynchronize(s))
	var reserved uint64
	require.NoError(t, cu.MemPoolGetAttribute(own, cu.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, unsafe.Pointer(&reserved)))
	assert.EqualValues(t, 4096, reserved, "kept below the release threshold")
	require.NoError(t, cu.MemPoolTrimTo(own, 0))
	require.NoError(t, cu.MemPoolGetAttribute(own, cu.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, unsafe.Pointer(&reserved)))
	assert.Zero(t, reserved)
	require.NoError(t, cu.MemAllocFromPoolAsync(&b, 64, own, s))
	require.NoError(t, cu.MemPoolDestroy(own))
	assert.Equal(t, pools, fcall(t, "fake_live_pools"))
	require.NoError(t, cu.MemsetD8Async(b, 1, 64, s), "memory outlives its destroyed pool")
	require.NoError(t, cu.MemFreeAsync(b, s))
	assert.ErrorIs(t, cu.MemAllocFromPoolAsync(&b, 64, own, s), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.ErrorIs(t, cu.MemPoolDestroy(pool), cu.CUDA_ERROR_INVALID_VALUE, "the default pool stays")
	require.NoError(t, cu.StreamSynchronize(s))
}

func TestModelHostMemory(t *testing.T) {
	modelCtx(t)
	hosts := fcall(t, "fake_live_host_allocs")
	var h unsafe.Pointer
	require.NoError(t, cu.MemHostAlloc(&h, 4096, 0))
	assert.Equal(t, hosts+1, fcall(t, "fake_live_host_allocs"))
	var mt uint32
	require.NoError(t, cu.PointerGetAttribute(unsafe.Pointer(&mt), cu.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, cu.CUdeviceptr(uintptr(h))))
	assert.EqualValues(t, cu.CU_MEMORYTYPE_HOST, mt)
	p := mAlloc(t, 4096)
	require.NoError(t, cu.MemcpyHtoD(p, h, 4096), "pinned memory as a copy source")
	require.NoError(t, cu.MemFreeHost(h))
	assert.Equal(t, hosts, fcall(t, "fake_live_host_allocs"))
	assert.ErrorIs(t, cu.MemFreeHost(h), cu.CUDA_ERROR_INVALID_VALUE)
	assert.ErrorIs(t, cu.MemcpyHtoD(p, h, 4096), cu.CUDA_ERROR_INVALID_VALUE, "freed pinned memory as a source")
	assert.EqualValues(t, 2, fcall(t, "fake_bad_ptr_uses"))

	regs := fcall(t, "fake_live_registrations")
	buf := make([]byte, 8192)
	require.NoError(t, cu.MemHostRegister(unsafe.Pointer(&buf[0]), 8192, 0))
	assert.Equal(t, regs+1, fcall(t, "fake_live_registrations"))
	assert.ErrorIs(t, cu.MemHostRegister(unsafe.Pointer(&buf[100]), 10, 0), cu.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
	require.NoError(t, cu.MemHostUnregister(unsafe.Pointer(&buf[0])))
	assert.Equal(t, regs, fcall(t, "fake_live_registrations"))
	assert.ErrorIs(t, cu.MemHostUnregister(unsafe.Pointer(&buf[0])), cu.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
	assert.EqualValues(t, 1, fcall(t, "fake_bad_handle_uses"))
	require.NoError(t, cu.MemFree(p))
}

func TestModelEvents(t *testing.T) {
	modelCtx(t)
	s, s2 := mStream(t), mStream(t)
	events := fcall(t, "fake_live_events")
	var a, b, c, nt cu.CUevent
	require.NoError(t, cu.EventCreate(&a, 0))
	require.NoError(t, cu.EventCreate(&b, 0))
	require.NoError(t, cu.EventCreate(&c, uint32(cu.CU_EVENT_DISABLE_TIMING)))
	require.NoError(t, cu.EventCreate(&nt, uint32(cu.CU_EVENT_DISABLE_TIMING)))
	assert.Equal(t, events+4, fcall(t, "fake_live_events"))
	require.NoError(t, cu.EventQuery(a), "never recorded: complete")

	p := mAlloc(t, 64)
	buf := make([]byte, 64)
	fcall(t, "fake_set_copy_delay_us", 30000)
	require.NoError(t, cu.EventRecord(a, s))
	require.NoError(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&buf[0]), 64, s))
	require.NoError(t, cu.EventRecord(b, s))
	assert.ErrorIs(t, cu.EventQuery(b), cu.CUDA_ERROR_NOT_READY)
	var ms float32
	assert.ErrorIs(t, cu.EventElapsedTime(&ms, a, b), cu.CUDA_ERROR_NOT_READY)
	require.NoError(t, cu.EventSynchronize(b))
	require.NoError(t, cu.EventQuery(b))
	require.NoError(t, cu.EventElapsedTime(&ms, a, b))
	assert.GreaterOrEqual(t, ms, float32(25))
	var ms1 float32
	require.NoError(t, cu.EventElapsedTime_v2000(&ms1, a, b), "the older ABI, through cuGetProcAddress")
	assert.Equal(t, ms, ms1)
	require.NoError(t, cu.EventRecord(nt, s))
	require.NoError(t, cu.EventSynchronize(nt))
	assert.ErrorIs(t, cu.EventElapsedTime(&ms, nt, b), cu.CUDA_ERROR_INVALID_HANDLE, "timing disabled")

	// s2 waits for c, recorded on s after a slow copy and a host function.
	require.NoError(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&buf[0]), 64, s))
	require.NoError(t, cu.LaunchHostFunc(s, mHostFn(t, "fake_log_fn"), uintptr(1)))
	require.NoError(t, cu.EventRecord(c, s))
	require.NoError(t, cu.StreamWaitEvent(s2, c, 0))
	require.NoError(t, cu.LaunchHostFunc(s2, mHostFn(t, "fake_log_fn"), uintptr(2)))
	require.NoError(t, cu.StreamSynchronize(s2))
	require.EqualValues(t, 2, fcall(t, "fake_log_len"))
	assert.EqualValues(t, []int64{1, 2}, []int64{fcall(t, "fake_log_at", 0), fcall(t, "fake_log_at", 1)})
	for _, e := range []cu.CUevent{a, b, c, nt} {
		require.NoError(t, cu.EventDestroy(e))
	}
	assert.Equal(t, events, fcall(t, "fake_live_events"))
	require.NoError(t, cu.StreamSynchronize(s))
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
	fcall(t, "fake_set_copy_delay_us", 50000)
	require.NoError(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&buf[0]), 64, s))
	require.NoError(t, cu.LaunchHostFunc(s, count, uintptr(4)))
	fcall(t, "fake_set_sticky_error", uintptr(cu.CUDA_ERROR_ILLEGAL_ADDRESS))
	assert.ErrorIs(t, cu.StreamSynchronize(s), cu.CUDA_ERROR_ILLEGAL_ADDRESS)
	assert.ErrorIs(t, cu.CtxSynchronize_v2000(), cu.CUDA_ERROR_ILLEGAL_ADDRESS)
	assert.ErrorIs(t, cu.LaunchHostFunc(s, count, uintptr(4)), cu.CUDA_ERROR_ILLEGAL_ADDRESS)
	assert.ErrorIs(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&buf[0]), 64, s), cu.CUDA_ERROR_ILLEGAL_ADDRESS)
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 2000))
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

func TestModelStreamDestroyLetsWorkFinish(t *testing.T) {
	modelCtx(t)
	streams := fcall(t, "fake_live_streams")
	s := mStream(t)
	p := mAlloc(t, 64)
	buf := make([]byte, 64)
	fcall(t, "fake_set_copy_delay_us", 20000)
	for i := 0; i < 3; i++ {
		require.NoError(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&buf[0]), 64, s))
	}
	require.NoError(t, cu.LaunchHostFunc(s, mHostFn(t, "fake_count_fn"), uintptr(5)))
	require.NoError(t, cu.StreamDestroy(s))
	assert.Equal(t, streams, fcall(t, "fake_live_streams"), "the handle is dead at once")
	assert.ErrorIs(t, cu.StreamQuery(s), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.Zero(t, fcall(t, "fake_count", 5))
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 2000))
	assert.EqualValues(t, 1, fcall(t, "fake_count", 5), "its queued work still ran")
	require.NoError(t, cu.MemFree(p))
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
	fcall(t, "fake_set_kernel_delay_us", 50000)
	require.NoError(t, mLaunchFill(fs["fill"], s, mFill(p, 1, 16)))
	var a cu.CUdeviceptr
	require.NoError(t, cu.MemAllocAsync(&a, 64, s))
	require.NoError(t, mLaunchFill(fs["fill"], s, mFill(a, 1, 16)))
	require.NoError(t, cu.MemFree(a), "stream-ordered memory goes at once")
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
		"cuUserObjectRelease", "cuGraphRetainUserObject", "cuGraphReleaseUserObject",
	} {
		assert.False(t, missing[fn], "%s does not resolve", fn)
	}
	t.Logf("%d of the table's functions are not served by fakecuda: %s", len(names), strings.Join(names, " "))
}

// Many goroutines, each on its own stream, with slow copies: nothing the
// model reports as a bad use, nothing left queued.
func TestModelConcurrentStreams(t *testing.T) {
	ctx := modelCtx(t)
	_, fs := mLoadFake(t)
	count := mHostFn(t, "fake_count_fn")
	fcall(t, "fake_set_copy_delay_us", 200)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := cu.CtxPushCurrent(ctx); err != nil {
				errs <- err
				return
			}
			defer cu.CtxPopCurrent(nil)
			var s cu.CUstream
			if err := cu.StreamCreate(&s, 1); err != nil {
				errs <- err
				return
			}
			defer cu.StreamDestroy(s)
			host := make([]int32, 32)
			for i := 0; i < 50; i++ {
				var p cu.CUdeviceptr
				err := cu.MemAllocAsync(&p, 128, s)
				if err == nil {
					err = mLaunchFill(fs["fill"], s, mFill(p, int32(i), 32))
				}
				if err == nil {
					err = cu.MemcpyDtoHAsync(unsafe.Pointer(&host[0]), p, 128, s)
				}
				if err == nil {
					err = cu.MemFreeAsync(p, s)
				}
				if err == nil {
					err = cu.LaunchHostFunc(s, count, uintptr(10))
				}
				if err == nil {
					err = cu.StreamSynchronize(s)
				}
				if err == nil && (host[0] != int32(i) || host[31] != int32(i+31)) {
					err = errors.New("wrong kernel result")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.EqualValues(t, 16*50, fcall(t, "fake_count", 10))
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses")+fcall(t, "fake_bad_handle_uses"))
}

// ---- Phase 2: graphs ----

func mDeps(ns ...cu.CUgraphNode) (*cu.CUgraphNode, uintptr) {
	if len(ns) == 0 {
		return nil, 0
	}
	return &ns[0], uintptr(len(ns))
}

func mGraph(t *testing.T) cu.CUgraph {
	t.Helper()
	var g cu.CUgraph
	require.NoError(t, cu.GraphCreate(&g, 0))
	return g
}

func mKernelNode(t *testing.T, g cu.CUgraph, f cu.CUfunction, a *mFillArgs, after ...cu.CUgraphNode) cu.CUgraphNode {
	t.Helper()
	var n cu.CUgraphNode
	kp := cu.CUDA_KERNEL_NODE_PARAMS_v2{Func: f, GridDimX: 1, GridDimY: 1, GridDimZ: 1, BlockDimX: uint32(max(a.n, 1)),
		BlockDimY: 1, BlockDimZ: 1, KernelParams: &a.ptrs[0]}
	d, nd := mDeps(after...)
	require.NoError(t, cu.GraphAddKernelNode(&n, g, d, nd, &kp))
	return n
}

func mCopy(src, dst unsafe.Pointer, srcDev, dstDev cu.CUdeviceptr, n uintptr) cu.CUDA_MEMCPY3D_v2 {
	p := cu.CUDA_MEMCPY3D_v2{WidthInBytes: n, Height: 1, Depth: 1}
	if src != nil {
		p.SrcMemoryType, p.SrcHost = cu.CU_MEMORYTYPE_HOST, src
	} else {
		p.SrcMemoryType, p.SrcDevice = cu.CU_MEMORYTYPE_DEVICE, srcDev
	}
	if dst != nil {
		p.DstMemoryType, p.DstHost = cu.CU_MEMORYTYPE_HOST, dst
	} else {
		p.DstMemoryType, p.DstDevice = cu.CU_MEMORYTYPE_DEVICE, dstDev
	}
	return p
}

func mHostNode(t *testing.T, g cu.CUgraph, fn string, data uintptr, after ...cu.CUgraphNode) cu.CUgraphNode {
	t.Helper()
	var n cu.CUgraphNode
	hp := cu.CUDA_HOST_NODE_PARAMS_v1{Fn: mHostFn(t, fn), UserData: data}
	d, nd := mDeps(after...)
	require.NoError(t, cu.GraphAddHostNode(&n, g, d, nd, &hp))
	return n
}

func mEmptyNode(t *testing.T, g cu.CUgraph, after ...cu.CUgraphNode) cu.CUgraphNode {
	t.Helper()
	var n cu.CUgraphNode
	d, nd := mDeps(after...)
	require.NoError(t, cu.GraphAddEmptyNode(&n, g, d, nd))
	return n
}

func mInstantiate(t *testing.T, g cu.CUgraph, flags uint64) cu.CUgraphExec {
	t.Helper()
	var x cu.CUgraphExec
	require.NoError(t, cu.GraphInstantiateWithFlags(&x, g, flags))
	return x
}

func mNodes(t *testing.T, query func(*cu.CUgraphNode, *uintptr) error) []cu.CUgraphNode {
	t.Helper()
	var n uintptr
	require.NoError(t, query(nil, &n))
	if n == 0 {
		return nil
	}
	out := make([]cu.CUgraphNode, n)
	require.NoError(t, query(&out[0], &n))
	return out[:n]
}

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
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 5000))
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
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 1000))
	assert.Zero(t, fcall(t, "fake_count", 12), "the executable still holds it")

	fcall(t, "fake_set_copy_delay_us", 100000)
	require.NoError(t, cu.GraphLaunch(x, s))
	require.NoError(t, cu.GraphExecDestroy(x))
	time.Sleep(5 * time.Millisecond)
	assert.Zero(t, fcall(t, "fake_count", 12), "the launch in flight holds it")
	assert.Equal(t, uobjs+1, fcall(t, "fake_live_user_objects"))
	require.NoError(t, cu.StreamSynchronize(s))
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 2000))
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
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 2000))
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

// ---- Stream capture ----

func mCaptureStatus(t *testing.T, s cu.CUstream) cu.CUstreamCaptureStatus {
	t.Helper()
	var st cu.CUstreamCaptureStatus
	require.NoError(t, cu.StreamIsCapturing(s, &st))
	return st
}

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
// is global; a global capture ends only on the thread that began it.
func TestModelCaptureModes(t *testing.T) {
	ctx := modelCtx(t)
	s := mStream(t)
	p := mAlloc(t, 64)
	require.NoError(t, cu.StreamBeginCapture(s, cu.CU_STREAM_CAPTURE_MODE_GLOBAL))
	var q cu.CUdeviceptr
	assert.ErrorIs(t, cu.MemAlloc(&q, 64), cu.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
	var res [4]error
	var g cu.CUgraph
	mNoContext(func() {
		if res[0] = cu.CtxSetCurrent(ctx); res[0] != nil {
			return
		}
		res[0] = cu.MemsetD8(p, 1, 64)
		mode := cu.CU_STREAM_CAPTURE_MODE_RELAXED
		res[1] = cu.ThreadExchangeStreamCaptureMode(&mode)
		res[2] = cu.MemsetD8(p, 1, 64) // this thread is relaxed now
		res[3] = cu.StreamEndCapture(s, &g)
	})
	assert.ErrorIs(t, res[0], cu.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "another thread, global mode")
	assert.NoError(t, res[1])
	assert.NoError(t, res[2])
	assert.ErrorIs(t, res[3], cu.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
	assert.Equal(t, cu.CU_STREAM_CAPTURE_STATUS_ACTIVE, mCaptureStatus(t, s))
	require.NoError(t, cu.StreamEndCapture(s, &g))
	require.NoError(t, cu.GraphDestroy(g))
	require.NoError(t, cu.MemAlloc(&q, 64))
	require.NoError(t, cu.MemFree(q))

	// Thread-local: only the capturing thread is restricted.
	require.NoError(t, cu.StreamBeginCapture(s, cu.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
	assert.ErrorIs(t, cu.MemsetD8(p, 1, 64), cu.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
	mNoContext(func() {
		if res[0] = cu.CtxSetCurrent(ctx); res[0] == nil {
			res[0] = cu.MemsetD8(p, 1, 64)
		}
	})
	assert.NoError(t, res[0])
	require.NoError(t, cu.StreamEndCapture(s, &g))
	require.NoError(t, cu.GraphDestroy(g))
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
