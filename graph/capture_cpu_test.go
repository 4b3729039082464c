package graph

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/lifetime"
)

// Bad inputs to the capture API are errors, never panics, and are caught
// before any CUDA call; these need no GPU.
func TestCaptureBadInputsCPU(t *testing.T) {
	noop := func(*driver.Stream) error { return nil }

	_, err := Capture(nil, CaptureRelaxed, noop)
	assert.ErrorIs(t, err, driver.ErrNilStream)
	_, err = BeginCapture(nil, CaptureGlobal)
	assert.ErrorIs(t, err, driver.ErrNilStream)
	_, err = IsCapturing(nil)
	assert.ErrorIs(t, err, driver.ErrNilStream)

	zero := new(driver.Stream) // never opened
	_, err = Capture(zero, CaptureRelaxed, nil)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "nil function")
	_, err = Capture(zero, CaptureMode(7), noop)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "unknown mode")
	called := false
	_, err = Capture(zero, CaptureRelaxed, func(*driver.Stream) error { called = true; return nil })
	assert.ErrorIs(t, err, driver.ErrClosed, "a stream that was never opened")
	assert.False(t, called, "f does not run when the capture cannot begin")
	_, err = BeginCapture(zero, CaptureThreadLocal)
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = IsCapturing(zero)
	assert.ErrorIs(t, err, driver.ErrClosed)

	var g *Graph
	_, err = g.Capture(zero, CaptureRelaxed, noop)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "nil graph")
	_, err = g.BeginCapture(zero, CaptureRelaxed)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "nil graph")

	// The driver side of the seam refuses the same.
	var ns *driver.Stream
	assert.ErrorIs(t, capture.Install(ns, &captureState{}), driver.ErrNilStream)
	assert.ErrorIs(t, capture.Install(nil, &captureState{}), driver.ErrNilStream)
	assert.ErrorIs(t, capture.Install(zero, &captureState{}), driver.ErrClosed)
	assert.ErrorIs(t, capture.Install(zero, nil), driver.ErrInvalidArgument)
	assert.False(t, capture.Remove(ns, &captureState{}))
	assert.False(t, capture.Remove(zero, &captureState{}))
	assert.Nil(t, capture.Installed(ns))
	assert.Nil(t, capture.Installed(zero))
	assert.Nil(t, capture.Enter(ns))
	capture.Leave(ns, nil)
	assert.ErrorIs(t, ns.LaunchHostFunc(func() {}), driver.ErrNilStream)
}

// Ending, forking or joining without a capture: ErrNotCapturing; Abort
// without one does nothing.
func TestCaptureEndWithoutBegin(t *testing.T) {
	for name, c := range map[string]*StreamCapture{"nil": nil, "zero": new(StreamCapture)} {
		_, err := c.End()
		assert.ErrorIs(t, err, ErrNotCapturing, name)
		assert.ErrorIs(t, c.Fork(new(driver.Stream)), ErrNotCapturing, name)
		assert.ErrorIs(t, c.Join(new(driver.Stream)), ErrNotCapturing, name)
		assert.NoError(t, c.Abort(), name)
		assert.Nil(t, c.Stream(), name)
		assert.Nil(t, c.Tail(), name)
	}

	// A capture already ending or over refuses a second end.
	st := &captureState{ending: true}
	_, _, err := st.finish(false, nil)
	assert.ErrorIs(t, err, ErrNotCapturing)
	c := &StreamCapture{st: st}
	_, err = c.End()
	assert.ErrorIs(t, err, ErrNotCapturing)
	assert.NoError(t, c.Abort(), "Abort after the end does nothing")
	assert.ErrorIs(t, st.fork("Fork", new(driver.Stream)), ErrNotCapturing)
}

type countOwner struct{ n *atomic.Int32 }

func (c countOwner) Release() error { c.n.Add(1); return nil }

// Once a capture is over, its sink releases what it is handed instead of
// keeping it, and a panic of a captured host function goes to the graph's
// sink.
func TestCaptureSinkAfterTheEnd(t *testing.T) {
	var released atomic.Int32
	st := &captureState{psink: &sink{}}
	st.AfterCapture(countOwner{&released})
	assert.Len(t, st.after, 1, "held until the end")
	assert.Zero(t, released.Load())

	st.done = true
	st.AfterCapture(countOwner{&released})
	lifetime.Flush()
	assert.EqualValues(t, 1, released.Load(), "released (queued) once the capture is over")

	st.CallbackPanicked("captured boom", nil)
	err := st.psink.take()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "captured boom")
	var d capture.Sink = st // captureState is the sink the driver sees
	assert.NotNil(t, d)
}

// The capture thread runs everything on one goroutine, turns a panic into
// an error and ends when stopped.
func TestOSThread(t *testing.T) {
	th := newOSThread()
	var ran int
	for i := 0; i < 3; i++ {
		require.NoError(t, th.do(func() error { ran++; return nil }))
	}
	assert.Equal(t, 3, ran)
	boom := errors.New("boom")
	assert.ErrorIs(t, th.do(func() error { return boom }), boom)
	err := th.do(func() error { panic("thread boom") })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "thread boom")
	th.stop()
}

func TestCaptureNames(t *testing.T) {
	assert.Equal(t, "global", CaptureGlobal.String())
	assert.Equal(t, "thread-local", CaptureThreadLocal.String())
	assert.Equal(t, "relaxed", CaptureRelaxed.String())
	assert.Equal(t, "CaptureMode(9)", CaptureMode(9).String())
	assert.Equal(t, "not capturing", NotCapturing.String())
	assert.Equal(t, "capturing", Capturing.String())
	assert.Equal(t, "capture invalidated", CaptureInvalidated.String())
	assert.Equal(t, "CaptureStatus(9)", CaptureStatus(9).String())
}
