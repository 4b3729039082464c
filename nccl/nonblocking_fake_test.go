//go:build linux

package nccl_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
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
// communicator that fails while its Close waits for the finalize returns
// NCCL's status (ErrRemote), not an error claiming NCCL is unsupported.
func TestNonBlockingFailureKeepsItsStatusFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx := fakeCtx(t)
	id, err := nccl.NewUniqueID()
	require.NoError(t, err)
	cs := make([]*nccl.Comm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[r], errs[r] = nccl.InitRank(context.Background(), ctx, id, 2, r, &nccl.Config{NonBlocking: true})
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	defer func() { assert.NoError(t, cs[1].Close()) }()
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	b := upload(t, s, []int32{1})
	require.NoError(t, nccl.AllReduce(cs[0], s, b, b, nccl.Sum)) // rank 1 never joins
	closed := make(chan error, 1)
	go func() { closed <- cs[0].Close() }()
	time.Sleep(20 * time.Millisecond) // the finalize waits for the all-reduce
	faketest.NCCL(t, "fake_nccl_fail_rank", 0, uintptr(nccl.ErrRemote))
	select {
	case err = <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close never returned")
	}
	assert.ErrorIs(t, err, nccl.ErrRemote)
	assert.NotErrorIs(t, err, nccl.ErrNotSupported, "%v", err)
	require.NoError(t, s.Synchronize())
	lifetime.Flush()
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
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
