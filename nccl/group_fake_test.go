//go:build linux

package nccl_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nccl"
)

// untilDone waits up to 20 s for done; past that the test fails and the
// ranks' communicators are failed (fake_nccl_fail_rank) so that the
// operations stuck behind the deadlock end and the test can clean up.
func untilDone(t *testing.T, done <-chan error, what string, ranks int) {
	t.Helper()
	select {
	case err := <-done:
		assert.NoError(t, err, what)
	case <-time.After(20 * time.Second):
		t.Errorf("%s: deadlocked", what)
		for r := 0; r < ranks; r++ {
			faketest.NCCL(t, "fake_nccl_fail_rank", uintptr(r), uintptr(nccl.ErrRemote))
		}
		<-done
	}
}

// TestGroupReleasesAfterUnlockingFromFake: a Group whose function closes
// a buffer (or the communicator) its operation named releases it when the
// group ends; that release waits for the operation, which waits for
// another rank of the process whose goroutine is queuing its own
// operation meanwhile. The release must not keep that goroutine out.
func TestGroupReleasesAfterUnlockingFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 2, nil)
	for _, closeComm := range []bool{false, true} {
		b0, err := driver.Alloc[float32](ctx, 8)
		require.NoError(t, err)
		b1 := zeros[float32](t, rs[1].s, 8)
		other := make(chan error, 1)
		done := make(chan error, 1)
		go func() {
			done <- nccl.Group(func() error {
				if err := nccl.AllReduce(rs[0].c, rs[0].s, b0, b0, nccl.Sum); err != nil {
					return err
				}
				// Rank 1's goroutine queues its part while the group is open.
				go func() { other <- nccl.AllReduce(rs[1].c, rs[1].s, b1, b1, nccl.Sum) }()
				time.Sleep(20 * time.Millisecond)
				if closeComm {
					return rs[0].c.Close()
				}
				return b0.Close()
			})
		}()
		untilDone(t, done, "the group", 2)
		untilDone(t, other, "rank 1's all-reduce", 2)
		require.NoError(t, rs[0].s.Synchronize())
		require.NoError(t, rs[1].s.Synchronize())
		require.NoError(t, b0.Close())
		if closeComm {
			assert.ErrorIs(t, nccl.AllReduce(rs[0].c, rs[0].s, b1, b1, nccl.Sum), driver.ErrClosed)
		}
	}
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}

// TestCapturedGroupHeldAfterGroupEndFailsFromFake: ncclGroupEnd fails
// after queuing the group's all-reduce into a capture whose function goes
// on (the error ignored). The graph holds the buffer and the communicator
// all the same: closed before the graph is launched, they are still
// there when the all-reduce runs.
func TestCapturedGroupHeldAfterGroupEndFailsFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b, err := driver.AllocCopy(s, []int64{1, 2, 3})
	require.NoError(t, err)
	var gerr error
	g, err := graph.Capture(s, graph.CaptureRelaxed, func(s *driver.Stream) error {
		faketest.NCCL(t, "fake_nccl_fail_group_end", uintptr(nccl.ErrInternal))
		gerr = nccl.Group(func() error { return nccl.AllReduce(c, s, b, b, nccl.Sum) })
		return nil
	})
	require.NoError(t, err)
	assert.ErrorIs(t, gerr, nccl.ErrInternal)
	e, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	require.NoError(t, b.Close())
	require.NoError(t, c.Close())
	before := faketest.NCCL(t, "fake_nccl_ops_run")
	require.NoError(t, e.Launch(s))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before+1, faketest.NCCL(t, "fake_nccl_ops_run"))
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
	faketest.NoBadUses(t)
	require.NoError(t, e.Close())
	deadline := time.Now().Add(20 * time.Second)
	for faketest.NCCL(t, "fake_nccl_live_comms") != 0 && time.Now().Before(deadline) {
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_live_comms"), "released with the executable")
}

// TestGroupRefusesNewCommsFromFake: inside Group's function, NCCL would
// create a communicator only at ncclGroupEnd, so InitRank, InitAll and
// Split refuse, and nothing is left; after the group they work.
func TestGroupRefusesNewCommsFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 1, nil)
	id, err := nccl.NewUniqueID()
	require.NoError(t, err)
	var errs [3]error
	require.NoError(t, nccl.Group(func() error {
		var c [3]*nccl.Comm
		c[0], errs[0] = nccl.InitRank(context.Background(), ctx, id, 1, 0, nil)
		all, err := nccl.InitAll(ctx)
		if len(all) > 0 {
			c[1] = all[0]
		}
		errs[1] = err
		c[2], errs[2] = rs[0].c.Split(0, 0, nil)
		for _, c := range c {
			if c != nil {
				_ = c.Close()
			}
		}
		return nil
	}))
	for i, err := range errs {
		assert.ErrorIs(t, err, nccl.ErrInvalidArgument, "call %d", i)
		assert.ErrorContains(t, err, "Group", "call %d", i)
	}
	lifetime.Flush()
	assert.EqualValues(t, 1, faketest.NCCL(t, "fake_nccl_live_comms"))
	sub, err := rs[0].c.Split(0, 0, nil)
	require.NoError(t, err)
	require.NoError(t, sub.Close())
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}

// TestCloseInsideGroupFromFake: a communicator closed inside Group's
// function, with no operation in the group, is finalized and destroyed
// off the group's thread, once the group is over (never inside an NCCL
// group, where NCCL would defer the finalize to ncclGroupEnd, after the
// destroy).
func TestCloseInsideGroupFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	require.NoError(t, nccl.Group(func() error { return rs[0].c.Close() }))
	lifetime.Flush()
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_live_comms"))
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}

// TestAbortInsideGroupFromFake: NCCL's abort cannot run while the group is
// open (the group holds its devices' call locks until it ends), so Abort there
// returns at once rather than after the abort timeout; the communicator
// is aborted when the group ends.
func TestAbortInsideGroupFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	start := time.Now()
	var aerr error
	require.NoError(t, nccl.Group(func() error {
		aerr = rs[0].c.Abort()
		return nil
	}))
	assert.NoError(t, aerr)
	assert.Less(t, time.Since(start), nccl.DefaultAbortTimeout/2)
	assert.ErrorIs(t, rs[0].c.Err(), nccl.ErrAborted)
	deadline := time.Now().Add(20 * time.Second)
	for faketest.NCCL(t, "fake_nccl_aborts") != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, 1, faketest.NCCL(t, "fake_nccl_aborts"), "aborted once the group ended")
}

// TestGroupEndsInAContextAfterARefusedOperationFromFake: the group's first
// operation is refused by NCCL (its communicator failed) when the group
// ends: the operation itself returned nil (recorded), Group's error names
// it, and ncclGroupEnd still runs with a context current.
func TestGroupEndsInAContextAfterARefusedOperationFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	b0, b1 := upload(t, rs[0].s, []int32{1}), upload(t, rs[1].s, []int32{2})
	err := nccl.Group(func() error {
		assert.NoError(t, nccl.AllReduce(rs[1].c, rs[1].s, b1, b1, nccl.Sum), "recorded: NCCL sees it when the group ends")
		faketest.NCCL(t, "fake_nccl_fail_rank", 1, uintptr(nccl.ErrRemote)) // rank 1 refuses, at the group's end
		return nccl.Send(rs[0].c, rs[0].s, b0, 0)
	})
	assert.ErrorIs(t, err, nccl.ErrRemote)
	assert.ErrorContains(t, err, "AllReduce in the group")
	require.NoError(t, rs[0].s.Synchronize())
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
	assert.ErrorIs(t, rs[1].c.Err(), nccl.ErrRemote) // aborted: its Close is clean
}

// TestSplitWaitsForAnotherGoroutinesGroupFromFake: while a Group's
// function on one goroutine has an operation of c pending (NCCL keeps it
// in c until ncclGroupEnd), c.Split on another goroutine waits for the
// group to end instead of calling NCCL on c meanwhile.
func TestSplitWaitsForAnotherGoroutinesGroupFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := upload(t, s, []int32{1})
	queued, release := make(chan struct{}), make(chan struct{})
	group := make(chan error, 1)
	go func() {
		group <- nccl.Group(func() error {
			err := nccl.AllReduce(c, s, b, b, nccl.Sum)
			close(queued)
			<-release
			return err
		})
	}()
	<-queued
	split := make(chan error, 1)
	go func() {
		sub, err := c.Split(0, 0, nil)
		if err == nil {
			err = sub.Close()
		}
		split <- err
	}()
	select {
	case err := <-split:
		t.Error("Split called NCCL on a communicator with an operation in another goroutine's open group")
		split <- err
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-group)
	require.NoError(t, <-split)
	require.NoError(t, s.Synchronize())
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}

// TestGroupLeavesNoContextCurrentFromFake: the operations of a Group make
// no context current on the group's thread (NCCL sees them when the group
// ends, each with its communicator's context current then); after Group
// returns, also when f fails, that thread has no current context, as
// after any call.
func TestGroupLeavesNoContextCurrentFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	b0, b1 := upload(t, rs[0].s, []int32{1}), upload(t, rs[1].s, []int32{2})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, fail := range []bool{false, true} {
		err := nccl.Group(func() error {
			if err := nccl.AllReduce(rs[0].c, rs[0].s, b0, b0, nccl.Sum); err != nil {
				return err
			}
			var h cu.CUcontext
			require.NoError(t, cu.CtxGetCurrent(&h))
			assert.Zero(t, h, "inside the group, the operation made no context current")
			if err := nccl.AllReduce(rs[1].c, rs[1].s, b1, b1, nccl.Sum); err != nil {
				return err
			}
			if fail {
				return errors.New("f failed")
			}
			return nil
		})
		if fail {
			assert.EqualError(t, err, "f failed")
		} else {
			require.NoError(t, err)
		}
		var h cu.CUcontext
		require.NoError(t, cu.CtxGetCurrent(&h))
		assert.Zero(t, h, "after the group (f failed: %v), no context is current", fail)
	}
	require.NoError(t, rs[0].s.Synchronize())
	require.NoError(t, rs[1].s.Synchronize())
	assert.Equal(t, []int32{6}, download(t, rs[0].s, b0), "both groups ran: 1+2, then 3+3")
}

// TestGroupEndsNCCLsGroupWhenItsThreadCannotBeClearedFromFake: the group
// end makes no context switch before ncclGroupEnd (an operation's context
// is current already), and clearing the thread after it fails
// (cuCtxSetCurrent). The failure is reported, and the group's operations
// were launched all the same: NCCL's group did not stay open on the
// thread, its operations unlaunched while what they name is released.
func TestGroupEndsNCCLsGroupWhenItsThreadCannotBeClearedFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, nil)
	b0, b1 := upload(t, rs[0].s, []int32{1}), upload(t, rs[1].s, []int32{2})
	require.NoError(t, rs[0].s.Synchronize())
	require.NoError(t, rs[1].s.Synchronize())
	lifetime.Flush()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := nccl.Group(func() error {
		if err := nccl.AllReduce(rs[0].c, rs[0].s, b0, b0, nccl.Sum); err != nil {
			return err
		}
		if err := nccl.AllReduce(rs[1].c, rs[1].s, b1, b1, nccl.Sum); err != nil {
			return err
		}
		faketest.FailNext(t, "cuCtxSetCurrent", 201) // the group end's clearing (CUDA_ERROR_INVALID_CONTEXT)
		return nil
	})
	assert.Error(t, err, "the failed clearing is reported")
	var h cu.CUcontext
	require.NoError(t, cu.CtxGetCurrent(&h))
	assert.NotZero(t, h, "the clearing failed: the last operation's context is still current")
	require.NoError(t, cu.CtxSetCurrent(0))
	done := make(chan error, 1)
	go func() {
		err := rs[0].s.Synchronize()
		if err == nil {
			err = rs[1].s.Synchronize()
		}
		done <- err
	}()
	untilDone(t, done, "the group's all-reduces", 2)
	assert.Equal(t, []int32{3}, download(t, rs[0].s, b0), "the group's all-reduces ran")
	assert.Equal(t, []int32{3}, download(t, rs[1].s, b1))
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}

// TestGroupGivesBackTheCallersContextFromFake: Group called with a
// context current (inside Context.Raw, whose function must leave the
// thread's context stack as it found it) leaves that context current when
// it returns, as every other call does; also when NCCL refused the
// group's only operation.
func TestGroupGivesBackTheCallersContextFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 2, nil)
	b0, b1 := upload(t, rs[0].s, []int32{1}), upload(t, rs[1].s, []int32{2})
	for _, refused := range []bool{false, true} {
		var mine, after cu.CUcontext
		var gerr error
		require.NoError(t, ctx.Raw(func(h uintptr) error {
			mine = cu.CUcontext(h)
			gerr = nccl.Group(func() error {
				if refused {
					faketest.NCCL(t, "fake_nccl_fail_rank", 1, uintptr(nccl.ErrRemote))
					return nccl.AllReduce(rs[1].c, rs[1].s, b1, b1, nccl.Sum)
				}
				if err := nccl.AllReduce(rs[0].c, rs[0].s, b0, b0, nccl.Sum); err != nil {
					return err
				}
				return nccl.AllReduce(rs[1].c, rs[1].s, b1, b1, nccl.Sum)
			})
			return cu.CtxGetCurrent(&after)
		}))
		if refused {
			assert.ErrorIs(t, gerr, nccl.ErrRemote, "NCCL's refusal at the group's end")
		} else {
			require.NoError(t, gerr)
		}
		assert.Equal(t, mine, after, "the caller's context is current again (refused: %v)", refused)
		if !refused {
			require.NoError(t, rs[0].s.Synchronize())
			require.NoError(t, rs[1].s.Synchronize())
			assert.Equal(t, []int32{3}, download(t, rs[0].s, b0))
		}
	}
	assert.ErrorIs(t, rs[1].c.Err(), nccl.ErrRemote) // aborted: its Close is clean
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}

// TestGroupEndsOnGoexitFromFake: f calls runtime.Goexit after queuing an
// operation. The group still ends (its operation runs), the goroutine's
// thread is left without a current context, and the group is no longer
// marked open: goroutines started afterwards (which may reuse the exited
// goroutine's runtime descriptor) queue their operations at once, and
// another Group runs.
func TestGroupEndsOnGoexitFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := upload(t, s, []int32{1})
	require.NoError(t, s.Synchronize())
	before := faketest.NCCL(t, "fake_nccl_ops_run")
	var cur cu.CUcontext
	var curErr error
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread() // the checks below run on the group's thread
		defer close(exited)
		defer func() { curErr = cu.CtxGetCurrent(&cur) }()
		_ = nccl.Group(func() error {
			if err := nccl.AllReduce(c, s, b, b, nccl.Sum); err != nil {
				return err
			}
			runtime.Goexit()
			return nil
		})
	}()
	<-exited
	require.NoError(t, curErr)
	assert.Zero(t, cur, "no context left current on the thread")
	done := make(chan error, 1)
	go func() {
		for range 100 { // goroutines that may reuse the exited one's descriptor
			errs := make(chan error, 1)
			go func() { errs <- nccl.AllReduce(c, s, b, b, nccl.Sum) }()
			if err := <-errs; err != nil {
				done <- err
				return
			}
		}
		done <- nccl.Group(func() error { return nccl.AllReduce(c, s, b, b, nccl.Sum) })
	}()
	untilDone(t, done, "operations after the Goexit", 1)
	require.NoError(t, s.Synchronize())
	assert.EqualValues(t, before+102, faketest.NCCL(t, "fake_nccl_ops_run"), "the group's operation and the later ones ran")
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}

// TestGroupKeepsTheSameContextCurrentFromFake: in a group, an operation
// whose context is current already (the previous operation's) makes no
// context switch; the group's end makes none before ncclGroupEnd either,
// only the clearing after it. Seen by arming a failure of the next
// cuCtxSetCurrent before the second operation: it is the group end's
// clearing that meets it.
func TestGroupKeepsTheSameContextCurrentFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	b := upload(t, rs[0].s, []int32{5})
	require.NoError(t, rs[0].s.Synchronize())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := nccl.Group(func() error {
		if err := nccl.AllReduce(rs[0].c, rs[0].s, b, b, nccl.Sum); err != nil {
			return err
		}
		faketest.FailNext(t, "cuCtxSetCurrent", 201)
		assert.NoError(t, nccl.AllReduce(rs[0].c, rs[0].s, b, b, nccl.Sum), "no context switch: nothing failed")
		return nil
	})
	assert.Error(t, err, "the group end's clearing met the armed failure")
	require.NoError(t, cu.CtxSetCurrent(0))
	require.NoError(t, rs[0].s.Synchronize())
	assert.Equal(t, []int32{5}, download(t, rs[0].s, b), "both all-reduces of one rank ran")
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}
