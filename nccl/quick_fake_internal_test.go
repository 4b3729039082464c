//go:build linux

package nccl

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
)

// oneRank is a one-rank communicator in the fake device's primary
// context (closed when t ends) and a stream of that context, for the
// caller to close.
func oneRank(t *testing.T) (*driver.Device, *driver.Context, *Comm, *driver.Stream) {
	t.Helper()
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ctx.Close() })
	id, err := NewUniqueID()
	require.NoError(t, err)
	c, err := InitRank(context.Background(), ctx, id, 1, 0, nil)
	require.NoError(t, err)
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	return dev, ctx, c, s
}

// TestEnqueueQuickPathFromFake: an operation's quick path takes the
// common case (a blocking communicator, outside a group, on the stream
// its last operation used, uncaptured, on open buffers) and queues what
// the general path queues; it leaves everything else to the general
// path, having queued nothing and holding nothing: the first operation on
// a stream, a Group's operation, a captured stream, a closed buffer,
// another context's buffer, a closed communicator.
func TestEnqueueQuickPathFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	dev, ctx, c, s := oneRank(t)
	defer c.Close()
	defer s.Close()
	up := func(v []int32) *driver.Buffer[int32] {
		b, err := driver.AllocCopy(s, v)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	send, recv, other := up([]int32{1, 2, 3}), up(make([]int32, 3)), up(make([]int32, 3))
	ops := func() int64 { return faketest.NCCL(t, "fake_nccl_ops_run") }
	quick := func(send, recv *driver.Buffer[int32]) (bool, error) {
		o := operation{name: "AllReduce", kind: opAllReduce}
		require.NoError(t, setType[int32](&o))
		require.NoError(t, setRed(&o, Sum))
		setSend(&o, send)
		setRecv(&o, recv)
		o.count = 3
		return c.enqueueQuick(s, &o)
	}
	require.NoError(t, s.Synchronize())
	before := ops()
	ok, err := quick(send, recv)
	assert.False(t, ok, "the stream is new to the communicator")
	assert.NoError(t, err)
	require.NoError(t, AllReduce(c, s, send, other, Sum)) // the general path tracks s
	ok, err = quick(send, recv)
	assert.True(t, ok, "the common case")
	assert.NoError(t, err)
	got, err := recv.ToHost(s)
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 2, 3}, got)
	ok, err = quick(recv, recv)
	assert.True(t, ok, "in place")
	assert.NoError(t, err)
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before+3, ops())

	// Inside a Group: recorded (held until the group ends, even through
	// the buffer's Close), made when it ends, and released then.
	send2, err := driver.AllocCopy(s, []int32{7, 8, 9})
	require.NoError(t, err)
	require.NoError(t, s.Synchronize())
	live := func() int64 { return faketest.Call(t, "fake_live_allocations") }
	allocs := live()
	before = ops()
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		require.NoError(t, Group(func() error {
			ok, err := quick(send2, recv)
			assert.True(t, ok, "recorded in the group")
			assert.NoError(t, err)
			require.Len(t, calls.pending, 1)
			assert.True(t, calls.pending[0].quick)
			require.NoError(t, send2.Close())
			assert.Equal(t, allocs, live(), "the closed buffer's memory is held until the group ends")
			assert.Equal(t, before, ops(), "made when the group ends")
			return nil
		}))
	}()
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before+1, ops())
	assert.Eventually(t, func() bool { return live() == allocs-1 }, 10*time.Second, time.Millisecond, "released once the group ended")
	got, err = recv.ToHost(s)
	require.NoError(t, err)
	assert.Equal(t, []int32{7, 8, 9}, got)

	before = ops()
	declined := func(name string, send, recv *driver.Buffer[int32]) {
		t.Helper()
		ok, err := quick(send, recv)
		assert.False(t, ok, name)
		assert.NoError(t, err, name)
	}
	closed, err := driver.Alloc[int32](ctx, 3)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	declined("closed buffer", send, closed)
	g, err := graph.Capture(s, graph.CaptureGlobal, func(*driver.Stream) error {
		declined("captured stream", send, recv)
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, g.Close())
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		require.NoError(t, Group(func() error {
			declined("closed buffer in a group", send, closed)
			assert.Empty(t, calls.pending, "a refusal records nothing")
			return nil
		}))
	}()
	cb, err := dev.NewContext(0)
	require.NoError(t, err)
	defer cb.Close()
	foreign, err := driver.Alloc[int32](cb, 3)
	require.NoError(t, err)
	defer foreign.Close()
	declined("another context's buffer", send, foreign)
	require.NoError(t, s.Synchronize())
	require.NoError(t, c.Close())
	declined("closed communicator", send, recv)
	assert.Equal(t, before, ops(), "nothing queued")
	assert.Zero(t, faketest.NCCL(t, "fake_nccl_bad_uses"), faketest.NCCLLastBad(t))
}
