package lifetime_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// Invariant I11: every counter moves while things are alive — objects,
// owners attached, queued releases, pins, tables, callbacks — and after
// everything is released and Flush has returned, the live counts are back
// where they started; the cumulative ones (Attached, Released,
// ReleaseErrors, CallbackPanics) only grew.
func TestStatsReturnToStart_I11(t *testing.T) {
	drainErrors()
	before := settle()

	objs := make([]*lifetime.Object, 10)
	for i := range objs {
		objs[i] = new(lifetime.Object)
		objs[i].Init(func() error {
			if i == 0 {
				return errors.New("destroy failed")
			}
			return nil
		})
	}
	tab := lifetime.NewTable()
	for i, o := range objs {
		r, ok := o.Ref()
		require.True(t, ok)
		require.NoError(t, tab.Add(uintptr(i%3), r))
	}
	pin := lifetime.PinSlice(make([]byte, 64))
	require.NoError(t, tab.Add(0, pin))
	cbs := []uintptr{
		lifetime.Register(lifetime.Callback{Fn: func() {}}),
		lifetime.Register(lifetime.Callback{Fn: func() { panic("x") }, Once: true}),
	}
	did, err := tab.DestructorID()
	require.NoError(t, err)
	gate := make(chan struct{})
	lifetime.Defer(lifetime.OwnerFunc(func() error { <-gate; return nil }))
	lifetime.Defer(lifetime.OwnerFunc(func() error { return nil }))

	mid := lifetime.ReadStats()
	assert.Equal(t, before.Objects+10, mid.Objects)
	assert.Equal(t, before.Attached+11, mid.Attached)
	assert.Equal(t, before.Live+11, mid.Live)
	assert.Equal(t, before.Pinned+1, mid.Pinned)
	assert.Equal(t, before.Tables+1, mid.Tables)
	assert.Equal(t, before.Callbacks+3, mid.Callbacks)
	assert.GreaterOrEqual(t, mid.Queued, before.Queued+1)

	for _, o := range objs {
		require.NoError(t, o.Close()) // the table still holds each
	}
	assert.Equal(t, before.Objects+10, lifetime.ReadStats().Objects)
	require.NoError(t, tab.Drop(1))
	lifetime.Invoke(cbs[1])
	require.True(t, lifetime.Unregister(cbs[0]))
	lifetime.Invoke(did) // the table's destructor: queues its release
	close(gate)

	after := settle()
	requireLiveCountsBack(t, before)
	assert.Equal(t, before.Attached+11, after.Attached)
	assert.Equal(t, before.Released+11, after.Released)
	assert.Equal(t, before.ReleaseErrors+1, after.ReleaseErrors)
	assert.Equal(t, before.CallbackPanics+1, after.CallbackPanics)
	assert.Len(t, lifetime.Errors(), 1)
}
