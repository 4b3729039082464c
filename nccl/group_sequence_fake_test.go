//go:build linux

package nccl_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/nccl"
)

// A Group's operations are recorded and made when the group ends, in one
// sequence of C calls: ncclGroupStart, each operation after a switch to
// its context, ncclGroupEnd, the thread's clearing. These tests check the
// sequence's failures.

// TestGroupDropsTheGroupWhenNCCLRefusesAnOperationFromFake: NCCL refuses
// one operation of a group at its end (its communicator failed): the
// operation returned nil when called (recorded), Group's error names it,
// and NCCL drops the whole group: the other rank's all-reduce never runs
// (a collective is never launched in part) and its buffer is unchanged.
func TestGroupDropsTheGroupWhenNCCLRefusesAnOperationFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	b0, b1 := upload(t, rs[0].s, []int32{1}), upload(t, rs[1].s, []int32{2})
	require.NoError(t, rs[0].s.Synchronize())
	before := faketest.NCCL(t, "fake_nccl_ops_run")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := nccl.Group(func() error {
		assert.NoError(t, nccl.AllReduce(rs[0].c, rs[0].s, b0, b0, nccl.Sum))
		assert.NoError(t, nccl.AllReduce(rs[1].c, rs[1].s, b1, b1, nccl.Sum))
		// Failed once both are recorded (the watchdog cannot refuse the
		// record first): NCCL sees them, and refuses, when the group ends.
		faketest.NCCL(t, "fake_nccl_fail_rank", 1, uintptr(nccl.ErrRemote))
		return nil
	})
	assert.ErrorIs(t, err, nccl.ErrRemote)
	assert.ErrorContains(t, err, "AllReduce in the group")
	var h cu.CUcontext
	require.NoError(t, cu.CtxGetCurrent(&h))
	assert.Zero(t, h, "no context is left current")
	require.NoError(t, rs[0].s.Synchronize())
	assert.Equal(t, before, faketest.NCCL(t, "fake_nccl_ops_run"), "nothing of the group ran")
	assert.Equal(t, []int32{1}, download(t, rs[0].s, b0))
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
	assert.ErrorIs(t, rs[1].c.Err(), nccl.ErrRemote) // aborted: its Close is clean
}

// TestGroupStartFailureMakesNothingFromFake: ncclGroupStart fails when
// the group ends: Group reports it, no operation was made, what they held
// is released (their buffers close and free at once), no context is left
// current, and the next Group works.
func TestGroupStartFailureMakesNothingFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := upload(t, s, []int32{4})
	require.NoError(t, s.Synchronize())
	before := faketest.NCCL(t, "fake_nccl_ops_run")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := nccl.Group(func() error {
		faketest.NCCL(t, "fake_nccl_fail_group_start", uintptr(nccl.ErrInternal))
		return nccl.AllReduce(c, s, b, b, nccl.Sum)
	})
	assert.ErrorIs(t, err, nccl.ErrInternal)
	assert.ErrorContains(t, err, "ncclGroupStart")
	var h cu.CUcontext
	require.NoError(t, cu.CtxGetCurrent(&h))
	assert.Zero(t, h)
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before, faketest.NCCL(t, "fake_nccl_ops_run"), "nothing was made")
	require.NoError(t, nccl.Group(func() error { return nccl.AllReduce(c, s, b, b, nccl.Sum) }))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before+1, faketest.NCCL(t, "fake_nccl_ops_run"), "the next group ran")
	assert.Equal(t, []int32{4}, download(t, s, b))
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}

// TestGroupFirstSwitchFailureMakesNothingFromFake: the push of the first
// operation's context fails: NCCL's group holds nothing yet and is ended
// empty; nothing ran, the caller's context stack is untouched.
func TestGroupFirstSwitchFailureMakesNothingFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := upload(t, s, []int32{7})
	require.NoError(t, s.Synchronize())
	before := faketest.NCCL(t, "fake_nccl_ops_run")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := nccl.Group(func() error {
		faketest.FailNext(t, "cuCtxPushCurrent", 201)
		return nccl.AllReduce(c, s, b, b, nccl.Sum)
	})
	assert.ErrorIs(t, err, driver.ErrInvalidContext)
	assert.NotErrorIs(t, err, nccl.ErrNotSupported, "CUDA's error, not a missing library or function")
	var h cu.CUcontext
	require.NoError(t, cu.CtxGetCurrent(&h))
	assert.Zero(t, h)
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before, faketest.NCCL(t, "fake_nccl_ops_run"), "nothing was made")
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}

// TestGroupReportsEveryFailureOfItsEndFromFake: ncclGroupEnd fails (after
// queuing) and the clearing after it fails too: Group's error holds both,
// NCCL's and CUDA's, each matching its sentinel.
func TestGroupReportsEveryFailureOfItsEndFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := upload(t, s, []int32{3})
	require.NoError(t, s.Synchronize())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := nccl.Group(func() error {
		faketest.NCCL(t, "fake_nccl_fail_group_end", uintptr(nccl.ErrInternal))
		faketest.FailNext(t, "cuCtxSetCurrent", 201) // the clearing: the group's only set
		return nccl.AllReduce(c, s, b, b, nccl.Sum)
	})
	assert.ErrorIs(t, err, nccl.ErrInternal)
	assert.ErrorIs(t, err, driver.ErrInvalidContext)
	assert.NotErrorIs(t, err, nccl.ErrNotSupported)
	var h cu.CUcontext
	require.NoError(t, cu.CtxGetCurrent(&h))
	assert.NotZero(t, h, "the clearing failed")
	require.NoError(t, cu.CtxSetCurrent(0))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, []int32{3}, download(t, s, b), "queued before ncclGroupEnd failed")
}

// TestOperationOutsideAGroupIsOneSequenceFromFake: an operation outside a
// group pushes its context, calls NCCL and clears the thread in one
// sequence; a failed push queues nothing, a failed clearing is reported
// after the operation was queued.
func TestOperationOutsideAGroupIsOneSequenceFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := upload(t, s, []int32{2})
	require.NoError(t, s.Synchronize())
	before := faketest.NCCL(t, "fake_nccl_ops_run")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	faketest.FailNext(t, "cuCtxPushCurrent", 201)
	assert.ErrorIs(t, nccl.AllReduce(c, s, b, b, nccl.Sum), driver.ErrInvalidContext)
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before, faketest.NCCL(t, "fake_nccl_ops_run"), "a failed push queues nothing")
	faketest.FailNext(t, "cuCtxSetCurrent", 201)
	assert.ErrorIs(t, nccl.AllReduce(c, s, b, b, nccl.Sum), driver.ErrInvalidContext, "the clearing's failure")
	var h cu.CUcontext
	require.NoError(t, cu.CtxGetCurrent(&h))
	assert.NotZero(t, h, "the clearing failed")
	require.NoError(t, cu.CtxSetCurrent(0))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before+1, faketest.NCCL(t, "fake_nccl_ops_run"), "the operation was queued")
	require.NoError(t, nccl.AllReduce(c, s, b, b, nccl.Sum))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, []int32{2}, download(t, s, b))
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}
