//go:build linux

package nccl_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nccl"
)

// TestNonBlockingCloseFinalizesFromFake: closing a non-blocking
// communicator finalizes it (ncclCommFinalize returns ncclInProgress, then
// NCCL is polled) and destroys it, without an error and without aborting
// it.
func TestNonBlockingCloseFinalizesFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, &nccl.Config{NonBlocking: true})
	b := upload(t, rs[0].s, []int32{4, 5})
	require.NoError(t, nccl.AllReduce(rs[0].c, rs[0].s, b, b, nccl.Sum))
	require.NoError(t, rs[0].c.Close())
	assert.Equal(t, []int32{4, 5}, download(t, rs[0].s, b))
	// It retires once its stream has passed the all-reduce, maybe in the
	// background.
	deadline := time.Now().Add(20 * time.Second)
	for faketest.NCCL(t, "fake_nccl_live_comms") != 0 && time.Now().Before(deadline) {
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_live_comms"))
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_aborts"), "Close aborted the communicator")
}

// TestNonBlockingSplitFromFake: a non-blocking communicator's Split
// returns ncclInProgress at once and NCCL stores the new communicator
// later, from its own thread: Split waits for it and returns it, usable.
func TestNonBlockingSplitFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, &nccl.Config{NonBlocking: true})
	subs := make([]*nccl.Comm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subs[r], errs[r] = rs[r].c.Split(0, 1-r, nil)
		}()
	}
	wg.Wait()
	for r := range rs {
		require.NoError(t, errs[r])
		require.NotNil(t, subs[r], "rank %d got no communicator", r)
		assert.Equal(t, 1-r, subs[r].Rank())
		sub := subs[r]
		t.Cleanup(func() { assert.NoError(t, sub.Close()) })
	}
	x0, x1 := upload(t, rs[0].s, []float64{1}), upload(t, rs[1].s, []float64{2})
	require.NoError(t, nccl.Group(func() error {
		return errors.Join(nccl.Broadcast(subs[0], rs[0].s, nil, x0, 0), nccl.Broadcast(subs[1], rs[1].s, x1, x1, 0))
	}))
	assert.Equal(t, []float64{2}, download(t, rs[0].s, x0), "new rank 0 is old rank 1")
}

// TestNonBlockingFailureKeepsItsStatusFromFake: a non-blocking
// communicator that fails while Split polls it (rank 1 never splits, and
// NCCL then reports the peer gone) makes Split return NCCL's status
// (ErrRemote), not an error claiming NCCL is unsupported.
func TestNonBlockingFailureKeepsItsStatusFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, &nccl.Config{NonBlocking: true})
	split := make(chan error, 1)
	go func() {
		sub, err := rs[0].c.Split(0, 0, nil)
		if sub != nil {
			_ = sub.Close()
		}
		split <- err
	}()
	time.Sleep(20 * time.Millisecond) // Split polls meanwhile
	faketest.NCCL(t, "fake_nccl_fail_rank", 0, uintptr(nccl.ErrRemote))
	var err error
	select {
	case err = <-split:
	case <-time.After(20 * time.Second):
		t.Fatal("Split never returned")
	}
	assert.ErrorIs(t, err, nccl.ErrRemote)
	assert.NotErrorIs(t, err, nccl.ErrNotSupported, "%v", err)
	assert.ErrorIs(t, rs[0].c.Err(), nccl.ErrRemote) // aborted: its Close is clean
}

// TestNonBlockingQueriesOneAtATimeFromFake: while a non-blocking Split
// waits for the other rank, its poll of the parent's state and the
// watchdog's never query NCCL at once (NCCL's query completes the
// communicator's pending work, and is not safe twice at once).
func TestNonBlockingQueriesOneAtATimeFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 2, &nccl.Config{NonBlocking: true})
	subs := make([]*nccl.Comm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r == 1 {
				time.Sleep(400 * time.Millisecond) // rank 0 polls meanwhile
			}
			subs[r], errs[r] = rs[r].c.Split(0, r, nil)
		}()
	}
	wg.Wait()
	for r := range rs {
		require.NoError(t, errs[r])
		require.NotNil(t, subs[r])
		assert.NoError(t, subs[r].Close())
	}
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}
