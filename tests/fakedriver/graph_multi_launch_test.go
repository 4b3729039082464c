//go:build linux

package fakedriver_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// TestMultiGraphLaunchHasItsContextCurrent: an executable whose nodes run
// in two contexts is launched and uploaded with its context current, from
// a goroutine whose thread has none (package driver leaves threads
// without one). fakecuda counts such a launch or upload made without a
// current context (fake_no_ctx_graph_calls); libcuda crashed once inside
// one. The thread is left without a context, and the launch allocates
// nothing.
func TestMultiGraphLaunchHasItsContextCurrent(t *testing.T) {
	f := ltSetup(t)
	a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
	o := out(t, a)
	g := buildMulti(t, a, b, o, 3)
	defer g.Close()
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()

	before := fcall(t, "fake_no_ctx_graph_calls")
	var launchErr, uploadErr, curErr error
	var cur cu.CUcontext
	mNoContext(func() {
		uploadErr = e.Upload(a.s)
		launchErr = e.Launch(a.s)
		curErr = cu.CtxGetCurrent(&cur)
	})
	require.NoError(t, uploadErr)
	require.NoError(t, launchErr)
	require.NoError(t, curErr)
	assert.Zero(t, cur, "the launch leaves the thread without a current context")
	assert.Equal(t, before, fcall(t, "fake_no_ctx_graph_calls"),
		"launch and upload had a current context: %s", lastBad(t))
	got, err := o.ToHost(a.s)
	require.NoError(t, err)
	assert.Equal(t, seqFrom(3), got)

	runtime.GC()
	allocs := testing.AllocsPerRun(100, func() { _ = e.Launch(a.s) })
	assert.Zero(t, allocs, "a launch of an executable in two contexts allocates nothing")
	require.NoError(t, a.s.Synchronize())
	assert.Equal(t, before, fcall(t, "fake_no_ctx_graph_calls"), "no launch without a current context: %s", lastBad(t))
}

// TestMultiGraphExecDestroyedAfterItsWork: an executable whose nodes run in
// two contexts, closed while its launch waits on the stream, is destroyed
// only once that launch has run (CUDA would free it later on its own,
// while the other context it names could already be gone); then what it
// held goes too. A single-context executable closed so is destroyed at
// once, as before.
func TestMultiGraphExecDestroyedAfterItsWork(t *testing.T) {
	f := ltSetup(t)
	a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
	o := out(t, a)
	g := buildMulti(t, a, b, o, 5)
	defer g.Close()
	single, err := graph.New(a.ctx)
	require.NoError(t, err)
	defer single.Close()
	_, err = single.Kernel(a.fill, driver.Grid(1), driver.Block(multiN), a.buf2, int32(9), int32(multiN))
	require.NoError(t, err)

	for _, multi := range []bool{true, false} {
		src := single
		if multi {
			src = g
		}
		e, err := src.Instantiate()
		require.NoError(t, err)
		gate := make(chan struct{})
		require.NoError(t, a.s.LaunchHostFunc(func() { <-gate }))
		require.NoError(t, e.Launch(a.s))
		live := fcall(t, "fake_live_execs")
		require.NoError(t, e.Close())
		lifetime.Flush()
		if multi {
			assert.Equal(t, live, fcall(t, "fake_live_execs"), "destroyed while its launch still waits")
			b.close() // the other context: held until the executable is gone
			assert.Equal(t, int64(1), fcall(t, "fake_context_alive", b.h))
		} else {
			assert.Equal(t, live-1, fcall(t, "fake_live_execs"), "a single-context executable is destroyed at Close")
		}
		close(gate)
		require.NoError(t, a.s.Synchronize())
		assert.Eventually(t, func() bool {
			lifetime.Flush()
			return fcall(t, "fake_live_execs") == live-1
		}, 10*time.Second, time.Millisecond, "destroyed once its work ran (multi: %v)", multi)
	}
	got, err := o.ToHost(a.s)
	require.NoError(t, err)
	assert.Equal(t, seqFrom(5), got)
	assert.Zero(t, fcall(t, "fake_bad_handle_uses"), lastBad(t))
}

// TestMultiGraphExecDestroyFailureReported: the destroy of an executable
// whose nodes run in two contexts comes after Close returned nil (after
// its launched work, or at once when it was never launched); a failure of
// that destroy is counted and reported through lifetime.Errors, as
// Exec.Close documents, once.
func TestMultiGraphExecDestroyFailureReported(t *testing.T) {
	f := setup(t)
	a, b := newMultiSide(t, f.ctx.Device()), newMultiSide(t, f.ctx.Device())
	o := out(t, a)
	g := buildMulti(t, a, b, o, 3)
	defer g.Close()
	for _, launched := range []bool{false, true} {
		e, err := g.Instantiate()
		require.NoError(t, err)
		if launched {
			require.NoError(t, e.Launch(a.s))
		}
		lifetime.Flush()
		_ = lifetime.Errors()
		before := lifetime.ReadStats().ReleaseErrors
		faketest.FailNext(t, "cuGraphExecDestroy", 1) // CUDA_ERROR_INVALID_VALUE
		require.NoError(t, e.Close(), "the destroy comes later")
		require.NoError(t, a.s.Synchronize())
		assert.Eventually(t, func() bool {
			lifetime.Flush()
			return lifetime.ReadStats().ReleaseErrors != before
		}, 10*time.Second, time.Millisecond, "the failed destroy is counted (launched: %v)", launched)
		assert.Equal(t, int64(1), lifetime.ReadStats().ReleaseErrors-before, "counted once (launched: %v)", launched)
		errs := lifetime.Errors()
		if assert.Len(t, errs, 1, "reported once (launched: %v)", launched) {
			assert.ErrorIs(t, errs[0], driver.ErrInvalidValue)
		}
		fcall(t, "fake_fail_clear")
	}
}
