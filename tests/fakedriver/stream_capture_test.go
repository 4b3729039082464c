//go:build linux

package fakedriver_test

import (
	"errors"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// The registry of capturing streams lets go of every stream once
// its capture is over, whichever way it ended (End, Abort, a failed begin,
// a failed fork, a join through WaitEvent, a wait for an event of a capture
// already over, a StreamCapture dropped): closed and dropped, each Stream
// is collected.
func TestCaptureRegistryKeepsNoStream(t *testing.T) {
	f := ltSetup(t)
	defer fcall(t, "fake_fail_clear")
	newS := func() *driver.Stream {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		return s
	}
	ev, err := f.ctx.NewEvent(0)
	require.NoError(t, err)
	defer ev.Close()
	paths := []struct {
		name string
		run  func(s *driver.Stream)
	}{
		{"End", func(s *driver.Stream) {
			sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
			require.NoError(t, err)
			g, err := sc.End()
			require.NoError(t, err)
			require.NoError(t, g.Close())
		}},
		{"Abort", func(s *driver.Stream) {
			sc, err := graph.BeginCapture(s, graph.CaptureThreadLocal)
			require.NoError(t, err)
			require.NoError(t, sc.Abort())
		}},
		{"failed begin", func(s *driver.Stream) {
			faketest.FailCalls(t, "cuStreamBeginCapture", 999, 0, 1)
			_, err := graph.BeginCapture(s, graph.CaptureRelaxed)
			require.Error(t, err)
		}},
		{"fork, and a failed fork", func(s *driver.Stream) {
			o1, o2 := newS(), newS()
			defer o1.Close()
			defer o2.Close()
			sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
			require.NoError(t, err)
			require.NoError(t, sc.Fork(o1))
			faketest.FailCalls(t, "cuStreamWaitEvent", 999, 0, 1)
			require.Error(t, sc.Fork(o2))
			g, err := sc.End()
			require.NoError(t, err)
			require.NoError(t, g.Close())
		}},
		{"WaitEvent join", func(s *driver.Stream) {
			o := newS()
			defer o.Close()
			sc, err := graph.BeginCapture(o, graph.CaptureRelaxed)
			require.NoError(t, err)
			require.NoError(t, ev.Record(o))
			require.NoError(t, s.WaitEvent(ev))
			require.Equal(t, capture.Installed(o), capture.Installed(s), "s joined")
			require.NotNil(t, capture.Installed(s))
			require.NoError(t, ev.Record(s))
			require.NoError(t, o.WaitEvent(ev))
			g, err := sc.End()
			require.NoError(t, err)
			require.NoError(t, g.Close())
			require.NoError(t, ev.Record(f.s)) // ev forgets the capture
		}},
		{"wait for an event of a capture over", func(s *driver.Stream) {
			o := newS()
			defer o.Close()
			sc, err := graph.BeginCapture(o, graph.CaptureRelaxed)
			require.NoError(t, err)
			require.NoError(t, ev.Record(o))
			require.NoError(t, sc.Abort())
			require.NoError(t, s.WaitEvent(ev))
			assert.Nil(t, capture.Installed(s))
			require.NoError(t, ev.Record(f.s))
		}},
		{"dropped StreamCapture", func(s *driver.Stream) {
			_, err := graph.BeginCapture(s, graph.CaptureRelaxed)
			require.NoError(t, err)
		}},
	}
	for _, p := range paths {
		w := func() weak.Pointer[driver.Stream] {
			s := newS()
			p.run(s)
			require.NoError(t, s.Close())
			return weak.Make(s)
		}()
		assert.True(t, settleWithin(30*time.Second, func() bool { return w.Value() == nil }), "%s: the Stream is still reachable", p.name)
	}
	_ = lifetime.Errors()
}

// A smoke test of Fork and Join racing End: each works or fails with
// ErrNotCapturing (or ErrClosed, once the caller closed the stream), the
// capture ends well, nothing reaches CUDA with a destroyed stream, and no
// event is left behind. The scheduler rarely lets a link overlap the end
// here; graph's TestFakeLinkOvertakenByEnd stops a link at the worst
// moment.
func TestCaptureForkAndJoinRacingEnd(t *testing.T) {
	f := ltSetup(t)
	events := fcall(t, "fake_live_events")
	newS := func() *driver.Stream {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		return s
	}
	expected := func(what string, err error) {
		if err != nil && !errors.Is(err, graph.ErrNotCapturing) && !errors.Is(err, driver.ErrClosed) {
			t.Errorf("%s: %v", what, err)
		}
	}
	for i := 0; i < 300 && !t.Failed(); i++ {
		s, o := newS(), newS()
		sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
		require.NoError(t, err)
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			for k := 0; k < 3; k++ {
				if err := sc.Fork(o); err != nil {
					expected("Fork", err)
					return
				}
				if err := sc.Join(o); err != nil {
					expected("Join", err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if i%2 == 1 {
				time.Sleep(time.Duration(i%7) * time.Microsecond)
			}
			g, err := sc.End()
			if assert.NoError(t, err, "End") {
				assert.NoError(t, g.Close())
			}
			assert.NoError(t, s.Close())
			assert.NoError(t, o.Close())
		}()
		close(start)
		wg.Wait()
	}
	ltNoBadUses(t)
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_events") == events }),
		"events back to %d: %d", events, fcall(t, "fake_live_events"))
}
