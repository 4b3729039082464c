//go:build linux

package nccl_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nccl"
)

// TestGroupRefusedQuickRetainsNothingFromFake: an operation in a Group
// that the quick path declines (its stream closed) and the general path
// refuses keeps no buffer it named reachable: dropped without Close, the
// buffer is released.
func TestGroupRefusedQuickRetainsNothingFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	ctx, rs := fakeRanks(t, 1, nil)
	s2, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	warm, err := driver.Alloc[int32](ctx, 4)
	require.NoError(t, err)
	defer warm.Close()
	require.NoError(t, nccl.AllReduce(rs[0].c, s2, warm, warm, nccl.Sum)) // s2 tracked
	require.NoError(t, s2.Synchronize())
	require.NoError(t, s2.Close()) // still tracked by the communicator
	live := func() int64 { return faketest.Call(t, "fake_live_allocations") }
	before := live()
	func() {
		b, err := driver.Alloc[int32](ctx, 4)
		require.NoError(t, err)
		require.NoError(t, nccl.Group(func() error {
			assert.ErrorIs(t, nccl.AllReduce(rs[0].c, s2, b, b, nccl.Sum), driver.ErrClosed)
			return nil
		}))
		// b dropped without Close
	}()
	assert.Eventually(t, func() bool {
		runtime.GC()
		lifetime.Flush()
		return live() == before
	}, 10*time.Second, 5*time.Millisecond, "the dropped buffer is released")
}
