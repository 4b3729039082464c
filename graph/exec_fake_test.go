//go:build linux

package graph

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// Exec.SetChild(n, g) with g the graph the executable was made from (a
// plain misuse: the wrong graph passed) returns. Taking child's lock and
// then, in setNode, the source graph's (the same lock) would deadlock
// while holding the executable's, so that every later Launch of the
// executable and every call on the graph hung for ever.
func TestFakeSetChildWithSourceGraphDoesNotDeadlock(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	g, n, e := withChild(t, env)

	returned := within(30*time.Second, func() { _ = e.SetChild(n, g) })
	assert.True(t, returned, "Exec.SetChild(n, its own source graph) deadlocked")
	if !returned {
		assert.True(t, within(time.Second, func() { _ = e.Launch(env.s) }), "and now every Launch of the executable hangs")
	}
}

// Exec.SetChild(n, X) and Exec.Update(X), documented as safe to call
// concurrently on one Exec, do not deadlock: they must not take X's lock
// and the executable's in opposite orders.
func TestFakeSetChildAndUpdateDoNotDeadlock(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	_, n, e := withChild(t, env)
	x, err := New(env.ctx) // the same shape as the child graph
	require.NoError(t, err)
	_, err = x.Empty()
	require.NoError(t, err)

	ok := within(30*time.Second, func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				_ = e.SetChild(n, x)
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				_ = e.Update(x) // fails (topology), but takes e.mu then x.mu
			}
		}()
		wg.Wait()
	})
	assert.True(t, ok, "Exec.SetChild and Exec.Update on one executable deadlocked")
}

// A Launch that succeeds is tracked, also when the user closes its stream
// after onStream's Hold succeeded (Exec.track then cannot take a Hold of its
// own). An untracked launch would not be waited for by a later retire (or
// Close): with no stream tracked at all, retired owners would be released
// at once through the queue.
func TestFakeLaunchRacingStreamCloseStaysTracked(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	g, err := New(env.ctx)
	require.NoError(t, err)
	_, err = g.KernelWith(env.empty, one)
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	tracked := func(s *driver.Stream) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, t := range e.streams {
			if t.s == s {
				return true
			}
		}
		return false
	}
	untracked := 0
	for i := 0; i < 20000 && untracked == 0; i++ {
		s, err := env.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		start := make(chan struct{})
		var lerr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); <-start; lerr = e.Launch(s) }()
		go func() { defer wg.Done(); <-start; runtime.Gosched(); _ = s.Close() }()
		close(start)
		wg.Wait()
		if lerr == nil && !tracked(s) {
			untracked++
			t.Logf("round %d: Launch succeeded on a stream the executable does not track", i)
		}
	}
	assert.Zero(t, untracked, "a successful launch must always be tracked")
	require.NoError(t, e.Close())
}

// An executable launched or uploaded on a stream being captured, into a
// new graph or into an existing one, is refused before CUDA sees it
// (driver 580 refuses it and invalidates the capture, which raced other
// calls on the capture's streams into a libcuda crash), and the capture
// goes on and ends.
func TestFakeExecLaunchIntoCaptureRefused(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	src, err := New(env.ctx)
	require.NoError(t, err)
	_, err = src.KernelWith(env.empty, one)
	require.NoError(t, err)
	x, err := src.Instantiate()
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, src.Close())

	target, err := New(env.ctx)
	require.NoError(t, err)
	defer target.Close()
	for _, into := range []bool{false, true} {
		var c *StreamCapture
		if into {
			c, err = target.BeginCapture(env.s, CaptureRelaxed)
		} else {
			c, err = BeginCapture(env.s, CaptureRelaxed)
		}
		require.NoError(t, err)
		assert.ErrorIs(t, x.Launch(env.s), driver.ErrStreamCaptureUnsupported, "into an existing graph: %v", into)
		assert.ErrorIs(t, x.Upload(env.s), driver.ErrStreamCaptureUnsupported, "into an existing graph: %v", into)
		st, err := IsCapturing(env.s)
		require.NoError(t, err)
		assert.Equal(t, Capturing, st, "the refusal leaves the capture going")
		g, err := c.End()
		require.NoError(t, err)
		if !into {
			require.NoError(t, g.Close())
		}
	}
	require.NoError(t, x.Launch(env.s), "outside the capture it launches")
	require.NoError(t, env.s.Synchronize())
}

// withChild makes a graph whose one node is a child graph holding one empty
// node, and instantiates it.
func withChild(t *testing.T, env *fakeEnv) (*Graph, Node, *Exec) {
	t.Helper()
	g, err := New(env.ctx)
	require.NoError(t, err)
	c, err := New(env.ctx)
	require.NoError(t, err)
	_, err = c.Empty()
	require.NoError(t, err)
	n, err := g.Child(c)
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	return g, n, e
}
