package driver

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// fakeBuffer is a Buffer over a made-up device address whose "free" only
// records that it ran, so that views and their references can be checked
// without a GPU. No method that calls CUDA may be used on it.
func fakeBuffer[T any](t *testing.T, n int, base cu.CUdeviceptr) (*Buffer[T], *bool) {
	t.Helper()
	bytes, err := byteSize[T]("test", n)
	require.NoError(t, err)
	freed := new(bool)
	a := &allocation{base: base, bytes: bytes}
	a.obj.Init(func() error {
		require.False(t, *freed, "freed twice")
		*freed = true
		return nil
	})
	return &Buffer[T]{a: a, n: n, size: bytes}, freed
}

// TestViewAddressesAndLifetime: a view's address and size are its own; it
// holds its own reference, so the memory lives until the buffer and every
// view are closed, in any order.
func TestViewAddressesAndLifetime(t *testing.T) {
	b, freed := fakeBuffer[int32](t, 16, 0x10000)
	a := b.a
	v, err := b.Slice(4, 12)
	require.NoError(t, err)
	assert.Equal(t, 8, v.Len())
	assert.Equal(t, 32, v.Size())
	assert.Equal(t, DevicePtr(0x10000+16), v.Ptr())
	w, err := v.Slice(2, 4) // a view of a view: elements 6 and 7 of b
	require.NoError(t, err)
	assert.Equal(t, 2, w.Len())
	assert.Equal(t, DevicePtr(0x10000+24), w.Ptr())
	assert.Equal(t, DevicePtr(0x10000), b.Ptr(), "the buffer itself is unchanged")
	assert.EqualValues(t, 3, a.obj.Refs(), "the buffer and two views")

	// Closing the buffer leaves the views working.
	require.NoError(t, b.Close())
	assert.False(t, *freed)
	assert.Zero(t, b.Ptr())
	_, err = b.Slice(0, 1)
	assert.ErrorIs(t, err, ErrClosed, "no new view of a closed buffer")
	held, err := v.use("test")
	require.NoError(t, err, "a view outlives the buffer it came from")
	require.NoError(t, held.Release())
	u, err := v.Slice(0, 1)
	require.NoError(t, err, "a view of a view of a closed buffer")
	assert.Equal(t, DevicePtr(0x10000+16), u.Ptr())

	// A hold on a view (a graph node's) keeps the memory after the view's
	// Close.
	ref, err := v.holdRef()
	require.NoError(t, err)
	require.NoError(t, v.Close())
	require.NoError(t, v.Close(), "idempotent")
	_, err = v.holdRef()
	assert.ErrorIs(t, err, ErrClosed, "a closed view is no new argument")
	require.NoError(t, u.Close())
	require.NoError(t, w.Close())
	assert.False(t, *freed, "the hold on v still keeps the memory")
	require.NoError(t, ref.Release())
	lifetime.Flush() // the Closes handed their references to the release queue
	assert.True(t, *freed, "freed once the buffer, every view and every hold let go")
}

// TestViewAsKernelArgument: a view passes its own address, and the launch
// holds the allocation until the block is reset.
func TestViewAsKernelArgument(t *testing.T) {
	b, _ := fakeBuffer[float32](t, 8, 0x20000)
	v, err := b.Slice(3, 8)
	require.NoError(t, err)
	var blk argBlock
	blk.init()
	require.NoError(t, blk.marshal("test", 0, v, nil, nil))
	require.NoError(t, blk.marshal("test", 1, b, nil, nil))
	ptrs := blk.ptrs
	assert.Equal(t, cu.CUdeviceptr(0x20000+12), *(*cu.CUdeviceptr)(ptrs[0]), "the view's address")
	assert.Equal(t, cu.CUdeviceptr(0x20000), *(*cu.CUdeviceptr)(ptrs[1]))
	assert.EqualValues(t, 4, b.a.obj.Refs(), "buffer, view, and one per argument")
	blk.reset()
	assert.EqualValues(t, 2, b.a.obj.Refs())
	require.NoError(t, v.Close())
	err = blk.marshal("test", 0, v, nil, nil)
	assert.ErrorIs(t, err, ErrClosed, "a closed view is no argument")
	blk.reset()
	require.NoError(t, b.Close())
}

func TestSliceBounds(t *testing.T) {
	b, _ := fakeBuffer[int64](t, 4, 0x30000)
	defer b.Close()
	for _, r := range [][2]int{{-1, 2}, {2, 2}, {3, 2}, {0, 5}, {4, 4}} {
		_, err := b.Slice(r[0], r[1])
		assert.ErrorIs(t, err, ErrInvalidArgument, "[%d:%d]", r[0], r[1])
	}
	full, err := b.Slice(0, 4)
	require.NoError(t, err)
	assert.Equal(t, b.Ptr(), full.Ptr())
	assert.Equal(t, b.Size(), full.Size())
	require.NoError(t, full.Close())
	var nilBuf *Buffer[int64]
	_, err = nilBuf.Slice(0, 1)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = (&Buffer[int64]{}).Slice(0, 1)
	assert.ErrorIs(t, err, ErrInvalidArgument, "a zero Buffer has no elements")
}

// TestViewMemsetAlignment: a memset of 32-bit words needs a view that
// starts on a 4-byte boundary; it is refused before CUDA is called.
func TestViewMemsetAlignment(t *testing.T) {
	b, _ := fakeBuffer[byte](t, 16, 0x40000)
	defer b.Close()
	v, err := b.Slice(1, 9)
	require.NoError(t, err)
	defer v.Close()
	ls := b.Context().LegacyStream()
	assert.ErrorContains(t, v.Memset32(ls, 0), "not aligned to 4 bytes")
	assert.ErrorIs(t, v.MemsetFloat32(ls, 1), ErrInvalidArgument)
	odd, err := b.Slice(0, 6)
	require.NoError(t, err)
	defer odd.Close()
	assert.ErrorContains(t, odd.MemsetFloat32(ls, 1), "6 bytes are not a multiple of 4")
}

// TestConstantsMatchTheRawTable: driver's own enum and status values are
// the raw table's, and errors made by the table's hook are driver's types.
func TestConstantsMatchTheRawTable(t *testing.T) {
	assert.EqualValues(t, cu.CU_DEVICE_ATTRIBUTE_WARP_SIZE, AttrWarpSize)
	assert.EqualValues(t, cu.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, AttrMultiprocessorCount)
	assert.EqualValues(t, cu.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, FuncAttrMaxDynamicSharedSizeBytes)
	assert.EqualValues(t, cu.CU_MEMPOOL_ATTR_USED_MEM_HIGH, PoolAttrUsedMemHigh)
	assert.EqualValues(t, cu.CU_LIMIT_MALLOC_HEAP_SIZE, LimitMallocHeapSize)
	assert.EqualValues(t, cu.CU_FUNC_CACHE_PREFER_EQUAL, CachePreferEqual)
	assert.EqualValues(t, cu.CUDA_ERROR_OUT_OF_MEMORY, ErrOutOfMemory)
	assert.EqualValues(t, cu.CUDA_ERROR_NOT_SUPPORTED, ErrCUDANotSupported)
	assert.EqualValues(t, cu.CUDA_ERROR_UNKNOWN, ErrUnknown)
	// The hand-written flags are written as numbers too, so that go doc shows
	// them; they are the header's values.
	for _, c := range []struct{ got, want int64 }{
		{int64(ContextSchedAuto), int64(cu.CU_CTX_SCHED_AUTO)}, {int64(ContextSchedSpin), int64(cu.CU_CTX_SCHED_SPIN)},
		{int64(ContextSchedYield), int64(cu.CU_CTX_SCHED_YIELD)}, {int64(ContextSchedBlockingSync), int64(cu.CU_CTX_SCHED_BLOCKING_SYNC)},
		{int64(ContextMapHost), int64(cu.CU_CTX_MAP_HOST)}, {int64(ContextLMemResizeToMax), int64(cu.CU_CTX_LMEM_RESIZE_TO_MAX)},
		{int64(StreamDefault), int64(cu.CU_STREAM_DEFAULT)}, {int64(StreamNonBlocking), int64(cu.CU_STREAM_NON_BLOCKING)},
		{int64(EventDefault), int64(cu.CU_EVENT_DEFAULT)}, {int64(EventBlockingSync), int64(cu.CU_EVENT_BLOCKING_SYNC)},
		{int64(EventDisableTiming), int64(cu.CU_EVENT_DISABLE_TIMING)}, {int64(EventInterprocess), int64(cu.CU_EVENT_INTERPROCESS)},
		{int64(HostAllocPortable), cu.CU_MEMHOSTALLOC_PORTABLE}, {int64(HostAllocDeviceMap), cu.CU_MEMHOSTALLOC_DEVICEMAP},
		{int64(HostAllocWriteCombined), cu.CU_MEMHOSTALLOC_WRITECOMBINED},
	} {
		assert.Equal(t, c.want, c.got)
	}

	err := newError("cuStreamQuery", cu.CUDA_ERROR_NOT_READY)
	var de *Error
	require.True(t, errors.As(err, &de))
	assert.Equal(t, ErrNotReady, de.Code)
	assert.ErrorIs(t, err, cu.CUDA_ERROR_NOT_READY, "internal code compares with the raw table's codes")
	assert.ErrorIs(t, err, ErrNotReady)
	assert.ErrorIs(t, newError("x", cu.CUDA_ERROR_NOT_SUPPORTED), cu.ErrNotSupported)
	serr := newSymbolError(&cu.SymbolError{Func: "cuX", ABI: 12080, Driver: 12020, Reason: "r"})
	var se *SymbolError
	require.True(t, errors.As(serr, &se))
	assert.Equal(t, SymbolError{Func: "cuX", ABI: 12080, Driver: 12020, Reason: "r"}, *se)
	assert.True(t, isNotSupported(serr))
	assert.ErrorIs(t, serr, cu.ErrNotSupported)
	assert.True(t, isSticky(newError("cuLaunchKernel", cu.CUDA_ERROR_ILLEGAL_ADDRESS)))
	assert.False(t, isSticky(newError("cuMemAlloc", cu.CUDA_ERROR_OUT_OF_MEMORY)))
}
