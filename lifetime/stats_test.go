package lifetime_test

import (
	"errors"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/tables"
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
	lifetest.DrainErrors()
	before := lifetest.Settle()

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
	tab := tables.New()
	for i, o := range objs {
		r, ok := o.Hold()
		require.True(t, ok)
		require.NoError(t, tab.Add(uintptr(i%3), r))
	}
	pin := release.PinSlice(make([]byte, 64))
	require.NoError(t, tab.Add(0, pin))
	cbs := []uintptr{
		hostfn.Register(hostfn.Callback{Fn: func() {}}),
		hostfn.Register(hostfn.Callback{Fn: func() { panic("x") }, Once: true}),
	}
	did, err := tab.DestructorID()
	require.NoError(t, err)
	gate := make(chan struct{})
	release.Defer(lifetime.OwnerFunc(func() error { <-gate; return nil }))
	release.Defer(lifetime.OwnerFunc(func() error { return nil }))

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
	hostfn.Invoke(cbs[1])
	require.True(t, hostfn.Unregister(cbs[0]))
	hostfn.Invoke(did) // the table's destructor: queues its release
	close(gate)

	after := lifetest.Settle()
	lifetest.RequireLiveCountsBack(t, before)
	assert.Equal(t, before.Attached+11, after.Attached)
	assert.Equal(t, before.Released+11, after.Released)
	assert.Equal(t, before.ReleaseErrors+1, after.ReleaseErrors)
	assert.Equal(t, before.CallbackPanics+1, after.CallbackPanics)
	assert.Len(t, lifetime.Errors(), 1)
}

// Invariant I11: a failure is counted once. An object whose destroy
// releases another object passes that one's error on through Counted: the
// caller sees it (errors.Is works), ReleaseErrors grows by one, and Errors
// reports it once.
func TestCountedErrorCountedOnce_I11(t *testing.T) {
	lifetest.DrainErrors()
	assert.NoError(t, lifetime.Counted(nil))
	boom := errors.New("unload failed")
	var parent, child lifetime.Object
	parent.Init(func() error { return boom })
	require.True(t, parent.Retain())
	child.Init(func() error { return lifetime.Counted(parent.Release()) })
	require.NoError(t, parent.Close(), "the child still holds the parent")
	before := lifetime.ReadStats().ReleaseErrors
	err := child.Close()
	require.ErrorIs(t, err, boom)
	assert.Equal(t, boom.Error(), err.Error())
	assert.Equal(t, int64(1), lifetime.ReadStats().ReleaseErrors-before)
	errs := lifetime.Errors()
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], boom)
	assert.Same(t, err, lifetime.Counted(err), "marking twice changes nothing")

	// An OwnerFunc passing a counted error on does not count it either.
	before = lifetime.ReadStats().ReleaseErrors
	assert.ErrorIs(t, lifetime.OwnerFunc(func() error { return err }).Release(), boom)
	assert.Equal(t, before, lifetime.ReadStats().ReleaseErrors)
	assert.Empty(t, lifetime.Errors())
}
