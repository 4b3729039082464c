//go:build linux

package graph

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// Links into a capture form no lock cycle with a Fork that waits for a
// stream's calls in flight: while Fork(x) is about to link x (its gate
// held), the last release of a buffer of y used on x has entered y and
// waits for x's gate, Fork(y) waits for that release holding the capture's
// lock, and Fork(z) of a member links; all four return.
func TestFakeLinkWhileForkWaitsForCallsInFlight(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	e := fakeSetup(t)
	x, y, buf, sc := crossedStreams(t, e)
	z, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, sc.Fork(z))

	errs := make(chan error, 4)
	zAt, zGo, zDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	testLinkHook = func() {
		switch calls.Add(1) {
		case 1: // Fork(x), x's sink installed, its gate held
			go func() { errs <- buf.Close() }() // enters y, waits for x's gate
			waitGoroutine(t, "driver.(*Stream).enterCaptured", "driver.(*allocation).free")
			go func() { err := sc.Fork(z); close(zDone); errs <- err }()
			<-zAt
			go func() { errs <- sc.Fork(y) }() // waits for the free under the capture's lock
			waitGoroutine(t, "driver.(*Stream).install", "graph.(*StreamCapture).Fork")
			close(zGo) // Fork(z) links
			<-zDone
		case 2: // Fork(z), about to link
			close(zAt)
			<-zGo
		}
	}
	ok := within(30*time.Second, func() {
		errs <- sc.Fork(x)
		for range 4 {
			assert.NoError(t, <-errs)
		}
	})
	require.True(t, ok, "deadlock: the forks and the free did not return")
	testLinkHook = nil
	endClean(t, sc)
}

// A Fork of a stream that another Fork is still bringing into the capture
// waits for that one: if its link fails, the stream leaves the capture and
// the waiting Fork brings it in anew. So no Fork returns nil for a stream
// that is then taken out of the capture (whose work CUDA would capture
// without the graph holding what it names, and whose End would fail as
// unjoined).
func TestFakeForkWaitsForAForkOfTheSameStream(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	e := fakeSetup(t)
	x, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	buf, err := driver.Alloc[int32](e.ctx, 64)
	require.NoError(t, err)
	sc, err := BeginCapture(e.s, CaptureRelaxed)
	require.NoError(t, err)

	second := make(chan error, 1)
	var calls atomic.Int32
	testLinkHook = func() {
		if calls.Add(1) != 1 {
			return
		}
		// The first Fork has installed the sink on x and is about to
		// link it; a second Fork of x comes, and the first link fails.
		go func() { second <- sc.Fork(x) }()
		waitGoroutine(t, "[chan receive", "graph.(*captureState).fork(") // the second waits for the first
		faketest.FailNext(t, "cuStreamWaitEvent", 1)
	}
	var first error
	require.True(t, within(30*time.Second, func() { first = sc.Fork(x) }), "the first Fork returned")
	assert.Error(t, first, "the first Fork's link failed")
	select {
	case err := <-second:
		require.NoError(t, err, "the second Fork brought x in anew")
	case <-time.After(30 * time.Second):
		t.Fatal("the second Fork did not return")
	}
	testLinkHook = nil // (the second Fork reads it too)
	require.NoError(t, x.Launch(e.fill, driver.Grid(1), driver.Block(64), buf, int32(7), int32(64)))
	require.NoError(t, sc.Join(x))
	g, err := sc.End()
	require.NoError(t, err, "x was joined: it is part of the capture")
	require.NoError(t, buf.Close())
	x2, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, x2.Launch(e.s))
	require.NoError(t, e.s.Synchronize())
	faketest.NoBadUses(t) // the graph held the buffer its captured launch names
	require.NoError(t, x2.Close())
	require.NoError(t, g.Close())
	require.NoError(t, x.Close())
}

// A Fork whose link fails takes the sink off the stream before it waits for
// the capture's lock: until then the stream's gate is held, and here the
// last release of a buffer of y used on x has entered y and waits for x's
// gate while Fork(y), holding the capture's lock, waits for that release.
func TestFakeFailedForkLinkLetsTheGateGoFirst(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	e := fakeSetup(t)
	x, y, buf, sc := crossedStreams(t, e)

	errs := make(chan error, 2)
	var calls atomic.Int32
	testLinkHook = func() {
		if calls.Add(1) != 1 {
			return
		}
		go func() { errs <- buf.Close() }() // enters y, waits for x's gate
		waitGoroutine(t, "driver.(*Stream).enterCaptured", "driver.(*allocation).free")
		go func() { errs <- sc.Fork(y) }() // holds the capture's lock, waits for y's call in flight
		waitGoroutine(t, "driver.(*Stream).install", "graph.(*StreamCapture).Fork")
		faketest.FailNext(t, "cuStreamWaitEvent", 1) // Fork(x)'s link fails
	}
	var forkX error
	ok := within(30*time.Second, func() {
		forkX = sc.Fork(x)
		for range 2 {
			assert.NoError(t, <-errs)
		}
	})
	require.True(t, ok, "deadlock: the failed Fork, the free and Fork(y) did not return")
	testLinkHook = nil
	assert.Error(t, forkX, "Fork(x)'s link failed")
	endClean(t, sc)
}

// crossedStreams makes streams x and y and a buffer allocated on y and
// used on x, whose free enters y and then x, and begins a capture on e.s.
func crossedStreams(t *testing.T, e *fakeEnv) (x, y *driver.Stream, buf *driver.Buffer[float32], sc *StreamCapture) {
	t.Helper()
	var err error
	x, err = e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	y, err = e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	buf, err = driver.AllocAsync[float32](y, 64)
	require.NoError(t, err)
	require.NoError(t, buf.Memset32Async(x, 0))
	sc, err = BeginCapture(e.s, CaptureRelaxed)
	require.NoError(t, err)
	return x, y, buf, sc
}

// waiterAndCapture makes a stream x outside any capture, an event ev, and
// a capture sc begun on e.s, for tests of a wait by x on ev recorded in sc.
func waiterAndCapture(t *testing.T, e *fakeEnv) (x *driver.Stream, ev *driver.Event, sc *StreamCapture) {
	t.Helper()
	var err error
	x, err = e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	ev, err = e.ctx.NewEvent(0)
	require.NoError(t, err)
	sc, err = BeginCapture(e.s, CaptureRelaxed)
	require.NoError(t, err)
	return x, ev, sc
}

// endClean ends sc, closes its graph, and checks that the fake saw no use
// of a destroyed handle or freed memory.
func endClean(t *testing.T, sc *StreamCapture) {
	t.Helper()
	g, err := sc.End()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	faketest.NoBadUses(t)
}

// A stream wait on an event recorded in a capture that cannot take the
// stream in, because the capture is ending or because a Fork of the stream
// that was pending was refused by the end, is refused
// (ErrStreamCaptureIsolation): it would bring the stream into the capture
// behind purecuda's back, racing cuStreamEndCapture. The capture ends well.
func TestFakeWaitEventOnEndingCaptureRefused(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	e := fakeSetup(t)
	for _, pendingFork := range []bool{false, true} {
		x, ev, sc := waiterAndCapture(t, e)
		buf, err := driver.Alloc[int32](e.ctx, 64)
		require.NoError(t, err)
		require.NoError(t, e.s.Launch(e.fill, driver.Grid(1), driver.Block(64), buf, int32(1), int32(64)))
		require.NoError(t, ev.Record(e.s))
		var werr, endErr error
		if !pendingFork {
			testEndHook = func() { werr = x.WaitEvent(ev) }
			_, endErr = sc.End()
			testEndHook = nil
		} else {
			// The wait waits for x's gate behind a Fork of x; the end
			// refuses the Fork, which takes x out; then the wait goes on.
			wdone, edone := make(chan struct{}), make(chan struct{})
			testEndHook = func() { <-wdone }
			var calls atomic.Int32
			testLinkHook = func() {
				if calls.Add(1) != 1 {
					return
				}
				go func() { werr = x.WaitEvent(ev); close(wdone) }()
				waitGoroutine(t, "driver.(*Stream).enterCaptured", "driver.(*Stream).WaitEvent")
				go func() { _, endErr = sc.End(); close(edone) }()
				// The end has marked the capture ending (and so refuses
				// the Fork) when it calls testEndHook.
				waitGoroutine(t, "[chan receive", "graph.(*captureState).finish")
			}
			assert.ErrorIs(t, sc.Fork(x), ErrNotCapturing)
			<-edone
			testEndHook, testLinkHook = nil, nil
		}
		assert.ErrorIs(t, werr, driver.ErrStreamCaptureIsolation, "pending fork: %v", pendingFork)
		require.NoError(t, endErr, "pending fork: %v", pendingFork)
		st, err := IsCapturing(x)
		require.NoError(t, err)
		assert.Equal(t, NotCapturing, st)
		require.NoError(t, x.WaitEvent(ev), "after the end, the wait is an ordinary one")
		require.NoError(t, x.Synchronize())
		faketest.NoBadUses(t)
	}
}

// A stream wait that found the stream being brought into the capture by a
// Fork, whose link then failed, joins the capture itself once the Fork
// took the stream out, rather than being refused.
func TestFakeWaitEventJoinsAfterAFailedFork(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	e := fakeSetup(t)
	x, ev, sc := waiterAndCapture(t, e)
	require.NoError(t, ev.Record(e.s))
	waited := make(chan error, 1)
	var calls atomic.Int32
	testLinkHook = func() {
		if calls.Add(1) != 1 {
			return
		}
		go func() { waited <- x.WaitEvent(ev) }() // waits for x's gate
		waitGoroutine(t, "driver.(*Stream).enterCaptured", "driver.(*Stream).WaitEvent")
		faketest.FailNext(t, "cuStreamWaitEvent", 1) // the Fork's link fails
	}
	forkErr := sc.Fork(x)
	testLinkHook = nil
	assert.Error(t, forkErr)
	select {
	case err := <-waited:
		require.NoError(t, err, "the wait joined the capture")
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not return")
	}
	st, err := IsCapturing(x)
	require.NoError(t, err)
	assert.Equal(t, Capturing, st)
	endClean(t, sc)
}
