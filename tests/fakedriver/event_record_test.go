//go:build linux

package fakedriver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/lifetime"
)

// Event.Record's fast path holds an open, uncaptured stream by its
// in-flight count alone. Close while such a record is inside cuEventRecord
// must not destroy the stream under it (fakecuda checks the stream again
// after the delay): the record destroys it when it returns, and later
// records fail with ErrClosed.
func TestRecordInFlightKeepsItsStream(t *testing.T) {
	f := ltSetup(t)
	streams, events := fcall(t, "fake_live_streams"), fcall(t, "fake_live_events")
	objects := lifetime.ReadStats().Objects
	e, err := f.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	release := hold(t, "fake_set_record_call_delay_us") // inside cuEventRecord until released
	done := make(chan error, 1)
	go func() { done <- e.Record(s) }()
	waitGauge(t, "fake_record_calls_in_delay", 1) // the record is inside cuEventRecord
	require.NoError(t, s.Close(), "Close hands the destroy to the record")
	assert.Equal(t, streams+1, fcall(t, "fake_live_streams"), "the stream outlives Close while the record is in the driver")
	release()
	require.NoError(t, <-done)
	assert.Equal(t, streams, fcall(t, "fake_live_streams"), "the record destroyed the stream when it returned")
	assert.ErrorIs(t, e.Record(s), driver.ErrClosed)
	assert.NoError(t, s.Close(), "Close is idempotent")
	require.NoError(t, e.Close())
	assert.Equal(t, events, fcall(t, "fake_live_events"))
	assert.True(t, ltSettle(func() bool { return lifetime.ReadStats().Objects == objects }), "every Object released")
}

// Records on the fast path racing Close on their stream and event: every
// record succeeds or fails with ErrClosed, fakecuda never sees a destroyed
// handle (ltSetup), and the stream and the event are destroyed once.
func TestRecordRacesClose(t *testing.T) {
	f := ltSetup(t)
	streams, events := fcall(t, "fake_live_streams"), fcall(t, "fake_live_events")
	objects := lifetime.ReadStats().Objects
	for round := range 50 {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		e, err := f.ctx.NewEvent(driver.EventDisableTiming)
		require.NoError(t, err)
		if round%5 == 0 {
			fcall(t, "fake_set_record_call_delay_us", 20)
		}
		closers := []func() error{s.Close, e.Close}
		ltRaceN(6, 500, func(int) { ltClosedOr(t, "record", e.Record(s)) }, func() {
			for i := range closers {
				assert.NoError(t, closers[(i+round)%2]())
			}
		})
		fcall(t, "fake_set_record_call_delay_us", 0)
	}
	assert.True(t, ltSettle(func() bool {
		return lifetime.ReadStats().Objects == objects && fcall(t, "fake_live_streams") == streams &&
			fcall(t, "fake_live_events") == events
	}), "every stream and event destroyed")
}

// A capture beginning while a record is inside cuEventRecord on the fast
// path waits for it: the record is not captured (its event joins no
// stream to the capture), and the capture begins after it returns.
func TestRecordInFlightDelaysCaptureBegin(t *testing.T) {
	f := ltSetup(t)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	e, err := f.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer e.Close()
	release := hold(t, "fake_set_record_call_delay_us") // inside cuEventRecord until released
	recorded := make(chan error, 1)
	go func() { recorded <- e.Record(s) }()
	waitGauge(t, "fake_record_calls_in_delay", 1) // the record is inside cuEventRecord
	type begun struct {
		sc  *graph.StreamCapture
		err error
	}
	began := make(chan begun, 1)
	go func() {
		sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
		began <- begun{sc, err}
	}()
	time.Sleep(20 * time.Millisecond) // BeginCapture gets as far as it can (more time only makes a bug likelier to show)
	select {
	case b := <-began:
		release()
		if b.err == nil {
			_ = b.sc.Abort()
		}
		t.Fatal("the capture began while a record was inside cuEventRecord")
	default:
	}
	release()
	b := <-began
	require.NoError(t, b.err)
	sc := b.sc
	assert.Zero(t, fcall(t, "fake_record_calls_in_delay"), "the capture began after the record returned")
	require.NoError(t, <-recorded)
	g, err := sc.End()
	require.NoError(t, err)
	defer g.Close()
	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Empty(t, nodes, "the record was not captured")
	require.NoError(t, e.Synchronize())
}

// Streams and events dropped without Close are destroyed by their
// cleanups, on the fast path's stream too.
func TestStreamAndEventDroppedWithoutClose(t *testing.T) {
	f := ltSetup(t)
	streams, events := fcall(t, "fake_live_streams"), fcall(t, "fake_live_events")
	objects := lifetime.ReadStats().Objects
	func() {
		for range 20 {
			s, err := f.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err)
			e, err := f.ctx.NewEvent(driver.EventDefault)
			require.NoError(t, err)
			require.NoError(t, e.Record(s))
			require.NoError(t, s.WaitEvent(e))
		}
		// A closed one is destroyed once, by Close, not again by its cleanup.
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		e, err := f.ctx.NewEvent(driver.EventDefault)
		require.NoError(t, err)
		require.NoError(t, e.Close())
	}()
	assert.Greater(t, fcall(t, "fake_live_streams"), streams)
	assert.True(t, ltSettle(func() bool {
		return fcall(t, "fake_live_streams") == streams && fcall(t, "fake_live_events") == events &&
			lifetime.ReadStats().Objects == objects
	}), "streams %d → %d, events %d → %d, objects %d → %d", streams, fcall(t, "fake_live_streams"),
		events, fcall(t, "fake_live_events"), objects, lifetime.ReadStats().Objects)
}

// A record on a captured stream takes the general path: the event
// remembers the capture, so that a stream waiting for it joins the
// capture through purecuda (its later work is captured and held), and
// after the end the event is an ordinary one again.
func TestRecordOnCapturedStreamJoinsWaiters(t *testing.T) {
	f := ltSetup(t)
	s, o, e := twoStreamsAndEvent(t, f)
	require.NoError(t, e.Record(s), "uncaptured first")
	sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
	require.NoError(t, err)
	require.NoError(t, e.Record(s))
	require.NoError(t, o.WaitEvent(e))
	assert.NotNil(t, capture.Installed(o), "o joined the capture")
	g, err := sc.End()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	assert.Nil(t, capture.Installed(o), "the end took o out")
	require.NoError(t, e.Record(s), "uncaptured again")
	require.NoError(t, o.WaitEvent(e))
	assert.Nil(t, capture.Installed(o), "an ordinary wait")
	require.NoError(t, o.Synchronize())
}

// A record on the fast path that meets a sticky error releases what the
// context's pending host functions hold, as every call that reports the
// error does: CUDA will never run them.
func TestRecordStickyErrorReleasesHostFunctions(t *testing.T) {
	f := ltSetup(t)
	s, o, e := twoStreamsAndEvent(t, f)
	lifetime.Flush()
	before := lifetime.ReadStats()
	release := hold(t, "fake_set_kernel_delay_us") // the kernel runs until released: no timing
	require.NoError(t, s.Launch(f.empty, g1, b1))  // the host functions queue behind it
	for i := 0; i < 4; i++ {
		require.NoError(t, s.LaunchHostFunc(func() { t.Error("a host function ran after a sticky error") }))
	}
	assert.Equal(t, before.Callbacks+4, lifetime.ReadStats().Callbacks)
	fcall(t, "fake_set_sticky_error", ltLaunchFailed)
	assert.ErrorIs(t, e.Record(o), driver.ErrLaunchFailed, "the record reports the error")
	assert.Equal(t, before.Callbacks, lifetime.ReadStats().Callbacks, "the host functions CUDA will never run were released")
	release()
	assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	fcall(t, "fake_clear_sticky_error")
}

// A live event recorded on a zero Stream: ErrClosed, with or without a
// context current on the thread (a record on its NULL stream otherwise),
// and after a sticky error (the zero Stream has no context to report it
// to).
func TestRecordOnZeroStream(t *testing.T) {
	f := ltSetup(t)
	e, err := f.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer e.Close()
	assert.ErrorIs(t, e.Record(new(driver.Stream)), driver.ErrClosed)
	require.NoError(t, f.ctx.Raw(func(uintptr) error {
		assert.ErrorIs(t, e.Record(new(driver.Stream)), driver.ErrClosed)
		return nil
	}))
	fcall(t, "fake_set_sticky_error", ltLaunchFailed)
	defer fcall(t, "fake_clear_sticky_error")
	_ = f.ctx.Raw(func(uintptr) error {
		assert.ErrorIs(t, e.Record(new(driver.Stream)), driver.ErrClosed)
		return nil
	})
}

// twoStreamsAndEvent makes two streams and an event of f's context, closed
// when the test ends.
func twoStreamsAndEvent(t *testing.T, f *fixture) (s, o *driver.Stream, e *driver.Event) {
	t.Helper()
	var err error
	for _, p := range []**driver.Stream{&s, &o} {
		*p, err = f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		t.Cleanup(func() { _ = (*p).Close() })
	}
	e, err = f.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return s, o, e
}
