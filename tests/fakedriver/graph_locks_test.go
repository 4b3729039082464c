//go:build linux

package fakedriver_test

// Graph families, captures and executables: lock order and lifetime cycles.
// Each test guards a way the family lock can fail (a capture of an
// executable's launch into its own graph, releases under the family lock,
// SetChild reading its child unlocked, a failed WaitEvent join); the
// comment above each says how.

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// advWithin runs f on a goroutine and reports whether it returned within d.
// A call that does not return is left blocked: the test demonstrates a
// deadlock.
func advWithin(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// advStacks logs the goroutines whose stacks mention fn: where a deadlocked
// call waits.
func advStacks(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, gr := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(gr, fn) {
			t.Logf("%s", gr)
		}
	}
}

// advStraddle launches e on s so that a capture into g begins on s while
// the launch is inside cuGraphLaunch (the fake's graph-call hold keeps it
// there until the capture has been called): package driver cannot tell whether the capture saw the launch, so
// the capture's sink gets a share of what the launch names — a reference on
// e itself among them — and a wait for s gets the other share.
func advStraddle(t *testing.T, e *graph.Exec, g *graph.Graph, s *driver.Stream) *graph.StreamCapture {
	t.Helper()
	release := hold(t, "fake_set_graph_call_delay_us")
	started := make(chan time.Time, 1)
	type result struct {
		at  time.Time
		err error
	}
	launched := make(chan result, 1)
	go func() {
		started <- time.Now()
		err := e.Launch(s)
		launched <- result{time.Now(), err}
	}()
	t0 := <-started
	waitGauge(t, "fake_graph_calls_in_delay", 1) // the launch is inside the driver, held there
	type begun struct {
		sc  *graph.StreamCapture
		err error
	}
	calling, began := make(chan time.Time, 1), make(chan begun, 1)
	go func() {
		calling <- time.Now()
		sc, err := g.BeginCapture(s, graph.CaptureRelaxed)
		began <- begun{sc, err}
	}()
	tb := <-calling
	// The begin waits for the launch in flight; the release lets the launch
	// return. (More time here only makes the straddle likelier.)
	time.Sleep(15 * time.Millisecond)
	release()
	r := <-launched
	require.NoError(t, r.err)
	require.True(t, t0.Before(tb) && r.at.After(tb), "the launch straddles the capture's begin")
	b := <-began
	require.NoError(t, b.err)
	return b.sc
}

// A capture into an executable's own source graph, begun while a launch of
// that executable is in flight on the stream, must not make a cycle that
// nothing ever destroys: the launch is not captured (the begin waits for
// it; a launch on a stream being captured is refused), so the graph's owner
// table keeps no reference on the executable, which holds the graph. After
// both Close calls, everything is destroyed.
func TestCaptureOfOwnExecLaunchLeavesNothing(t *testing.T) {
	f := setupGraph(t)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	graphs0, execs0 := fcall(t, "fake_live_graphs"), fcall(t, "fake_live_execs")

	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	_, err = g.Empty()
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)

	sc := advStraddle(t, e, g, s)
	_, err = sc.End()
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.NoError(t, g.Close())
	require.NoError(t, s.Synchronize())

	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) &&
		(fcall(t, "fake_live_graphs") != graphs0 || fcall(t, "fake_live_execs") != execs0) {
		gcAll()
		time.Sleep(5 * time.Millisecond)
	}
	assert.Equal(t, graphs0, fcall(t, "fake_live_graphs"), "the graph is destroyed after Close")
	assert.Equal(t, execs0, fcall(t, "fake_live_execs"), "the executable is destroyed after Close")
	noBadUses(t)
}

// endInto (capture_end.go) releases the owners a failed or aborted capture
// kept after letting the family lock go, and package driver's wait for a
// launch may hold the last reference on an executable of the same family,
// whose destroy (execCore.destroy) takes the family lock: Abort must return
// and leave the family lock free (run by abortLeaked, a deadlock would
// block purecuda's release goroutine). Here the executable's launch
// straddles the capture's begin.
func TestCaptureAbortReleasesSameFamilyExecUnlocked(t *testing.T) {
	f := setupGraph(t)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()

	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	_, err = g.Empty()
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)

	sc := advStraddle(t, e, g, s)
	require.NoError(t, e.Close()) // the launch's wait holds it now
	// endInto's cuGraphGetNodes (under the family lock) lasts long enough
	// for package driver's wait to drop its share first once the sink is
	// off the stream: the capture's share is then the last.
	graphCallDelay(t, 30_000)
	if !advWithin(30*time.Second, func() { _ = sc.Abort() }) {
		advStacks(t, "execCore).destroy")
		t.Fatal("StreamCapture.Abort deadlocked: endInto released the executable's last reference under the family lock")
	}
	fcall(t, "fake_set_graph_call_delay_us", 0)
	assert.True(t, advWithin(30*time.Second, func() { _, _ = g.Nodes() }), "the family lock is free again")
	noBadUses(t)
}

// Exec.SetChild (update.go) holds child's family lock while CUDA reads
// child (cuGraphExecChildGraphNodeSetParams), not only while it retains
// child's user objects: for a child of another family, calls on child (a
// query here; an instantiation, a clone, or a stream capture into child
// beginning) must not run while CUDA copies it, since CUDA graphs are not
// thread-safe.
func TestExecSetChildLocksTheChild(t *testing.T) {
	f := setupGraph(t)
	shape, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer shape.Close()
	_, err = shape.Empty()
	require.NoError(t, err)
	parent, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer parent.Close()
	n, err := parent.Child(shape)
	require.NoError(t, err)
	e, err := parent.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	child, err := graph.New(f.ctx) // a family of its own, same shape
	require.NoError(t, err)
	defer child.Close()
	_, err = child.Empty()
	require.NoError(t, err)
	require.NoError(t, e.SetChild(n, child))

	graphCallDelay(t, 2000)
	fcall(t, "fake_reset_counters")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 40; i++ {
			assert.NoError(t, e.SetChild(n, child))
		}
	}()
	for i := 0; i < 40; i++ {
		_, err := child.Nodes()
		assert.NoError(t, err)
	}
	<-done
	assert.Zero(t, fcall(t, "fake_concurrent_graph_calls"),
		"calls on the child graph overlapped SetChild's copy of it: %s", faketest.LastBadUse(t))
	noBadUses(t)
}

// Exec.setNode (update.go) releases the owners of a refused change after
// letting the executable's lock and the family lock go, as the package does
// elsewhere "since an owner's release may call back into the graph"
// (graph.go addWith, node.go Destroy): a Raw operand's owner is user code,
// and one that calls back into the graph, or into the executable, must not
// deadlock.
func TestExecSetNodeReleasesRefusedOwnersUnlocked(t *testing.T) {
	f := setupGraph(t)
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	_, err = g.Empty()
	require.NoError(t, err)
	x, err := g.Empty()
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, x.Destroy()) // SetMemset will refuse x after taking the locks

	var relErr error
	owner := lifetime.OwnerFunc(func() error {
		_, relErr = g.Nodes() // the owner's release looks at the graph
		return nil
	})
	var setErr error
	ok := advWithin(3*time.Second, func() {
		setErr = e.SetMemset(x, graph.RawDevice(0x1000, 64, owner), 0, 4)
	})
	if !ok {
		advStacks(t, "Exec).setNode")
		t.Fatal("Exec.SetMemset deadlocked: the refused change's owner was released under the family lock")
	}
	assert.ErrorIs(t, setErr, graph.ErrDestroyedNode)
	assert.NoError(t, relErr)
	noBadUses(t)
}

// A Stream.WaitEvent (driver/stream.go) whose cuStreamWaitEvent fails
// leaves the capture as it was: the waiting stream, never brought into the
// capture, must not stay joined to the capture's sink (captureState.Join
// installs the sink and adds the stream to st.streams). End would otherwise
// "join it back" (finish → link records an event on it, outside the
// capture, and makes the capture's stream wait for it), which invalidates
// the capture: a refused WaitEvent would make a good capture fail, and
// until the end every call on the other stream would pay for a possible
// capture.
func TestFailedWaitEventLeavesCaptureAlone(t *testing.T) {
	f := setupGraph(t)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()
	ev, err := f.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer ev.Close()
	buf, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer buf.Close()

	sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
	require.NoError(t, err)
	defer sc.Abort()
	require.NoError(t, s.Launch(f.fill, g1, b1, buf, int32(1), int32(8)))
	require.NoError(t, ev.Record(s))
	faketest.FailNext(t, "cuStreamWaitEvent", 1)
	require.Error(t, s2.WaitEvent(ev), "the injected failure")
	g, err := sc.End()
	require.NoError(t, err, "nothing joined the capture: End works")
	require.NoError(t, g.Close())
	noBadUses(t)
}
