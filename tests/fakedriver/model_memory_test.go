//go:build linux

package fakedriver_test

import (
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
)

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

// cuMemFree of stream-ordered memory frees at once, so queued work that
// still uses it counts a bad use when it runs; cuMemFree of ordinary
// memory waits for the work queued before it.
func TestModelFreeUnderQueuedWork(t *testing.T) {
	ctx := modelCtx(t)
	s := mStream(t)
	buf := make([]byte, 64)
	var a cu.CUdeviceptr
	require.NoError(t, cu.MemAllocAsync(&a, 64, s))
	release := hold(t, "fake_set_copy_delay_us") // the copy waits until released: no timing
	require.NoError(t, cu.MemcpyHtoDAsync(a, unsafe.Pointer(&buf[0]), 64, s))
	require.NoError(t, cu.MemFree(a))
	release()
	require.NoError(t, cu.StreamSynchronize(s))
	assert.EqualValues(t, 1, fcall(t, "fake_bad_ptr_uses"), "the queued copy found its memory freed")
	assert.Contains(t, faketest.LastBadUse(t), "cuMemcpyHtoDAsync")

	fcall(t, "fake_set_copy_delay_us", 50000)
	b := mAlloc(t, 64)
	require.NoError(t, cu.MemcpyHtoDAsync(b, unsafe.Pointer(&buf[0]), 64, s))
	require.NoError(t, cu.MemFree(b))
	require.NoError(t, cu.StreamQuery(s), "cuMemFree waited for the copy")
	assert.EqualValues(t, 1, fcall(t, "fake_bad_ptr_uses"))

	// A synchronous copy racing a free from another thread is caught too:
	// the copy is held inside the call until the free is done.
	c := mAlloc(t, 64)
	hold(t, "fake_set_copy_delay_us")
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
	waitGauge(t, "fake_copies_in_delay", 1)
	require.NoError(t, cu.MemFree(c))
	fcall(t, "fake_set_copy_delay_us", 0) // the copy goes on and finds c freed
	assert.ErrorIs(t, <-done, cu.CUDA_ERROR_INVALID_VALUE, "the copy saw its memory freed under it")
	assert.EqualValues(t, 2, fcall(t, "fake_bad_ptr_uses"))
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
