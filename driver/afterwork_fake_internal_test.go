//go:build linux

package driver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/faketest"
)

// Launches that hold a buffer of another context until their stream has
// passed them (Stream.afterWork) are waited for with one event per stream
// and round of the worker, not one each: a loop of such launches outran a
// worker that waited for the stream's tail once per launch, and its backlog
// (and the memory it held) grew without bound. Kernels are held while 32
// launches queue, so the worker's first round is blocked behind them and
// the rest wait for one more round.
func TestFakeAfterWorkWaitsOncePerStream(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	x := newTwoContexts(t, true)
	ca, sa, sb, fill := x.ca, x.sa, x.sb, x.fill
	pool, err := ca.NewMemPool()
	require.NoError(t, err)
	defer pool.Close()
	buf, err := AllocFromPool[int32](sa, pool, 64)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, sa.Synchronize())
	pool.granted.Or(1) // stands for SetAccess from another device

	recorded := waitRecords.Load()
	faketest.Call(t, "fake_set_kernel_delay_us", ^uintptr(0)) // -1: kernels wait until set to 0
	defer faketest.Call(t, "fake_set_kernel_delay_us", 0)
	const n = 32
	for i := range n {
		require.NoError(t, sb.Launch(fill, Grid(1), Block(1), buf, int32(i), int32(64)))
	}
	assert.Greater(t, buf.a.obj.Refs(), int64(1), "the launches hold the buffer")
	faketest.Call(t, "fake_set_kernel_delay_us", 0)
	require.NoError(t, sb.Synchronize())
	idle := false
	for deadline := time.Now().Add(10 * time.Second); !idle && time.Now().Before(deadline); {
		waits.mu.Lock()
		idle = !waits.running
		waits.mu.Unlock()
		if !idle {
			time.Sleep(time.Millisecond)
		}
	}
	require.True(t, idle, "the worker is done")
	assert.Equal(t, int64(1), buf.a.obj.Refs(), "every launch's hold was let go")
	assert.LessOrEqual(t, waitRecords.Load()-recorded, int64(2), "events the worker recorded for %d launches on one stream", n)
	faketest.NoBadUses(t)
}
