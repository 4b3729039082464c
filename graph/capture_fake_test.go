//go:build linux

package graph

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/faketest"
)

// A Fork or Join that the end of the capture overtakes, together with the
// Close of every stream after it, fails with ErrNotCapturing and touches
// neither the streams nor the capture's event: on an H100 such a fork
// crashed inside cuStreamWaitEvent. No event is left behind.
func TestFakeLinkOvertakenByEnd(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	e := fakeSetup(t)
	for _, op := range []string{"Fork", "Join"} {
		t.Run(op, func(t *testing.T) {
			events := faketest.Call(t, "fake_live_events")
			s, err := e.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err)
			o, err := e.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err)
			sc, err := BeginCapture(s, CaptureRelaxed)
			require.NoError(t, err)
			if op == "Join" {
				require.NoError(t, sc.Fork(o))
			}
			testLinkHook = func() {
				testLinkHook = nil
				// The end and the Close calls run to completion on another
				// goroutine while this one waits just before its link.
				done := make(chan struct{})
				go func() {
					defer close(done)
					g, err := sc.End()
					if assert.NoError(t, err) {
						assert.NoError(t, g.Close())
					}
					assert.NoError(t, s.Close())
					assert.NoError(t, o.Close())
				}()
				<-done
			}
			defer func() { testLinkHook = nil }()
			if op == "Fork" {
				err = sc.Fork(o)
			} else {
				err = sc.Join(o)
			}
			require.ErrorIs(t, err, ErrNotCapturing)
			faketest.NoBadUses(t)
			assert.Equal(t, events, faketest.Call(t, "fake_live_events"), "events")
		})
	}
}

// The states of a capture on a stream only move forward: a Began after
// Ending (what a stream wait that joined the capture as it ended did) is
// ignored, and the calls the end keeps waiting go on, uncaptured, once the
// sink is removed.
func TestFakeCaptureStatesOnlyMoveForward(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	e := fakeSetup(t)
	st := &captureState{}
	require.NoError(t, capture.Install(e.s, st))
	capture.Began(e.s, st)
	capture.Ending(e.s, st)
	capture.Began(e.s, st) // too late: ignored
	done := make(chan error, 1)
	go func() { done <- e.s.Launch(e.empty, driver.Grid(1), driver.Block(1)) }()
	select {
	case <-done:
		t.Fatal("a launch ran while the capture was ending")
	case <-time.After(50 * time.Millisecond):
	}
	require.True(t, capture.Remove(e.s, st))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the launch still waits after the sink was removed")
	}
}

// A wait for a stream being captured (Synchronize, Query,
// SynchronizeContext) is refused before CUDA sees it, and the capture goes
// on: CUDA refuses it too, but invalidates the capture.
func TestFakeWaitOnCapturedStreamRefused(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	e := fakeSetup(t)
	sc, err := BeginCapture(e.s, CaptureRelaxed)
	require.NoError(t, err)
	assert.ErrorIs(t, e.s.Synchronize(), driver.ErrStreamCaptureUnsupported)
	_, err = e.s.Query()
	assert.ErrorIs(t, err, driver.ErrStreamCaptureUnsupported)
	assert.ErrorIs(t, e.s.SynchronizeContext(context.Background()), driver.ErrStreamCaptureUnsupported)
	st, err := IsCapturing(e.s)
	require.NoError(t, err)
	assert.Equal(t, Capturing, st, "the refusals leave the capture going")
	g, err := sc.End()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	require.NoError(t, e.s.Synchronize(), "after the capture the stream waits again")
	done, err := e.s.Query()
	require.NoError(t, err)
	assert.True(t, done)
}
