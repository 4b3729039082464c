//go:build linux

package nccl_test

import (
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
