//go:build linux

package fakedriver_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
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
