//go:build linux

package fakedriver_test

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
)

// Async copies read and write host memory when they run, not when queued,
// and a stream runs its work in order.
func TestModelStreamsRunLateAndInOrder(t *testing.T) {
	modelCtx(t)
	s := mStream(t)
	_, fs := mLoadFake(t)
	p := mAlloc(t, 64)
	release := hold(t, "fake_set_copy_delay_us") // the copies wait until released: no timing
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
	assert.Zero(t, fcall(t, "fake_log_len"), "nothing ran behind the held copy")
	release()
	require.NoError(t, cu.StreamSynchronize(s))
	require.NoError(t, cu.StreamQuery(s))
	assert.Equal(t, append([]int32{2}, mSeq(50, 15)...), out, "the copy read the slice when it ran, and wrote out then")
	assert.EqualValues(t, 2, fcall(t, "fake_log_len"))
	assert.EqualValues(t, []int64{1, 2}, []int64{fcall(t, "fake_log_at", 0), fcall(t, "fake_log_at", 1)})
	assert.Zero(t, fcall(t, "fake_queued_ops"))

	// cuCtxSynchronize waits for every stream of the context.
	fcall(t, "fake_set_copy_delay_us", 50000)
	s2 := mStream(t)
	require.NoError(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&src[0]), 4, s))
	require.NoError(t, cu.MemcpyHtoDAsync(p+8, unsafe.Pointer(&src[0]), 4, s2))
	require.NoError(t, cu.CtxSynchronize_v2000())
	require.NoError(t, cu.StreamQuery(s))
	require.NoError(t, cu.StreamQuery(s2))
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses")+fcall(t, "fake_bad_handle_uses"))
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
	// A gate holds the stream, so b is not reached before the checks
	// however slow the machine; the copy's delay is the time a to b.
	const gate = 42
	fcall(t, "fake_close_gate", gate)
	require.NoError(t, cu.LaunchHostFunc(s, mHostFn(t, "fake_gate_fn"), uintptr(gate)))
	fcall(t, "fake_set_copy_delay_us", 30000)
	require.NoError(t, cu.EventRecord(a, s))
	require.NoError(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&buf[0]), 64, s))
	require.NoError(t, cu.EventRecord(b, s))
	assert.ErrorIs(t, cu.EventQuery(b), cu.CUDA_ERROR_NOT_READY)
	var ms float32
	assert.ErrorIs(t, cu.EventElapsedTime(&ms, a, b), cu.CUDA_ERROR_NOT_READY)
	fcall(t, "fake_open_gate", gate)
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

func TestModelStreamDestroyLetsWorkFinish(t *testing.T) {
	modelCtx(t)
	streams := fcall(t, "fake_live_streams")
	s := mStream(t)
	p := mAlloc(t, 64)
	buf := make([]byte, 64)
	hold(t, "fake_set_copy_delay_us") // the copies wait until released: no timing
	for i := 0; i < 3; i++ {
		require.NoError(t, cu.MemcpyHtoDAsync(p, unsafe.Pointer(&buf[0]), 64, s))
	}
	require.NoError(t, cu.LaunchHostFunc(s, mHostFn(t, "fake_count_fn"), uintptr(5)))
	require.NoError(t, cu.StreamDestroy(s))
	assert.Equal(t, streams, fcall(t, "fake_live_streams"), "the handle is dead at once")
	assert.ErrorIs(t, cu.StreamQuery(s), cu.CUDA_ERROR_INVALID_HANDLE)
	assert.Zero(t, fcall(t, "fake_count", 5))
	fcall(t, "fake_set_copy_delay_us", 20000) // released, each still slow
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	assert.EqualValues(t, 1, fcall(t, "fake_count", 5), "its queued work still ran")
	require.NoError(t, cu.MemFree(p))
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
