//go:build linux

package fakedriver_test

// Review tests for c190aba (hostfn.InCallback: a last release inside a
// host function queues the free or unload), against the fake driver.

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// A host function closes the last reference of its own stream and of an
// event: the destroys run after it, on the release goroutine, and name nothing destroyed; Close returns nil in the host
// function and the stats come back once flushed.
func TestInCallbackReviewHostFuncCloseStreamAndEvent(t *testing.T) {
	f := ltSetup(t)
	streams, events := fcall(t, "fake_live_streams"), fcall(t, "fake_live_events")
	before := lifetime.ReadStats()
	s, err := f.ctx.NewStream(0)
	require.NoError(t, err)
	ev, err := f.ctx.NewEvent(0)
	require.NoError(t, err)
	require.NoError(t, ev.Record(s))
	var errs [2]error
	var destroyedIn atomic.Bool
	require.NoError(t, s.LaunchHostFunc(func() {
		errs = [2]error{ev.Close(), s.Close()}
		destroyedIn.Store(fcall(t, "fake_live_streams") < streams+1)
	}))
	require.NoError(t, f.ctx.Synchronize())
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.False(t, destroyedIn.Load(), "not destroyed inside the host function")
	settle(t, func() bool {
		return fcall(t, "fake_live_streams") == streams && fcall(t, "fake_live_events") == events
	}, "stream and event destroyed after the host function")
	lifetime.Flush()
	assert.Equal(t, before.Objects, lifetime.ReadStats().Objects)
	assert.Empty(t, lifetime.Errors())
	ltNoBadUses(t)
}
