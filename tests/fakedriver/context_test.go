//go:build linux

package fakedriver_test

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// TestContextCloseNeverRevives: calls racing Context.Close never take a
// reference after the last one is gone (I1), so the context is released
// exactly once. A Context.acquire that checked closed and then added would
// let a call in between revive the context, and its release destroy it
// again: a second cuDevicePrimaryCtxRelease, taking the reference of
// another owner of the same primary context; fakecuda counts the
// over-release as a bad handle use and the bystander's calls fail.
func TestContextCloseNeverRevives(t *testing.T) {
	f := ltSetup(t)
	dev := f.ctx.Device()
	contexts := fcall(t, "fake_live_contexts")
	// More running threads than CPUs: the kernel then preempts goroutines
	// anywhere, also between an old-style closed check and its increment.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	makers := map[string]func() (*driver.Context, error){
		"PrimaryContext": dev.PrimaryContext,
		"NewContext":     func() (*driver.Context, error) { return dev.NewContext(driver.ContextSchedAuto) },
	}
	for name, make := range makers {
		for round := 0; round < 150; round++ {
			victim, err := make()
			require.NoError(t, err)
			ltRace(16, func(g int) {
				if g%4 != 3 {
					// The cheapest call that takes a reference: it spends
					// most of its time taking and dropping it, so it is the
					// most likely to straddle the last release.
					ltClosedOr(t, "Raw", victim.Raw(func(uintptr) error { return nil }))
					return
				}
				_, _, err := victim.MemGetInfo()
				ltClosedOr(t, "MemGetInfo", err)
				b, err := driver.Alloc[int32](victim, 4)
				ltClosedOr(t, "Alloc", err)
				if err == nil {
					ltClosedOr(t, "Buffer.Close", b.Close())
				}
				ltClosedOr(t, "Synchronize", victim.Synchronize())
				if r, err := seam.Hold(victim); err == nil {
					assert.NoError(t, r.Release())
				} else {
					ltClosedOr(t, "Hold", err)
				}
			}, func() { assert.NoError(t, victim.Close()) })
			// The bystander, f.ctx, still holds the primary context.
			lifetime.Flush() // Buffer.Close drops its reference on the release queue
			_, _, err = f.ctx.MemGetInfo()
			require.NoError(t, err, "%s round %d: a Close released the primary context too often", name, round)
			require.Equal(t, contexts, fcall(t, "fake_live_contexts"), "%s round %d", name, round)
			if fcall(t, "fake_bad_handle_uses") != 0 {
				t.Fatalf("%s round %d: a context was released twice: %s", name, round, faketest.LastBadUse(t))
			}
		}
	}
}

// TestPrimaryContextHandlesAreOneContext: two PrimaryContext handles of one
// device are one CUDA context: buffers of one launch and copy on streams of
// the other, rather than being refused as of "another context".
func TestPrimaryContextHandlesAreOneContext(t *testing.T) {
	f := ltSetup(t)
	other, err := f.ctx.Device().PrimaryContext()
	require.NoError(t, err)
	defer other.Close()
	assert.True(t, f.ctx.Same(other))
	b, err := driver.Alloc[int32](other, 64)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, f.s.Launch(f.fill, g1, b1, b, int32(10), int32(64)))
	args, err := f.fill.NewArgs(b, int32(20), int32(64))
	require.NoError(t, err)
	defer args.Close()
	require.NoError(t, f.s.LaunchArgs(args, g1, b1))
	mine, err := driver.Alloc[int32](f.ctx, 64)
	require.NoError(t, err)
	defer mine.Close()
	require.NoError(t, mine.CopyFromAsync(f.s, b))
	os, err := other.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer os.Close()
	require.NoError(t, f.s.Synchronize())
	require.NoError(t, os.Launch(f.fill, g1, b1, mine, int32(30), int32(64)), "a kernel of one handle on a stream of the other")
	require.NoError(t, os.Synchronize())
	got := make([]int32, 64)
	require.NoError(t, b.CopyToHost(f.ctx.LegacyStream(), got))
	assert.Equal(t, int32(20+63), got[63])
	require.NoError(t, mine.CopyToHost(f.ctx.LegacyStream(), got))
	assert.Equal(t, int32(30+63), got[63])
	ltNoBadUses(t)
}

// TestPanicInBoundCallLeavesNoContext: a panic in a function that runs with
// a context bound (the Raw methods) pops the context on the way out, not
// only on a normal return, so the thread is left as it was, and the call's
// reference on the object is dropped. The Raw methods, which run caller
// functions inside bound, rely on it.
func TestPanicInBoundCallLeavesNoContext(t *testing.T) {
	f := ltSetup(t)
	contexts := fcall(t, "fake_live_contexts")
	c, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	s, err := c.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	e, err := c.NewEvent(driver.EventDefault)
	require.NoError(t, err)

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before cu.CUcontext
	require.NoError(t, cu.CtxGetCurrent(&before))
	raws := map[string]func(func(uintptr) error) error{"Context.Raw": c.Raw, "Stream.Raw": s.Raw, "Event.Raw": e.Raw,
		"LegacyStream.Raw": c.LegacyStream().Raw}
	for name, raw := range raws {
		func() {
			defer func() { assert.Equal(t, "boom", recover(), name) }()
			_ = raw(func(uintptr) error { panic("boom") })
		}()
		var after cu.CUcontext
		require.NoError(t, cu.CtxGetCurrent(&after))
		assert.Equal(t, before, after, "%s: a panic left a context current", name)
	}
	// The references the panicking calls took were dropped: closing
	// everything destroys the context.
	require.NoError(t, e.Close())
	require.NoError(t, s.Close())
	require.NoError(t, c.Close())
	assert.Equal(t, contexts, fcall(t, "fake_live_contexts"), "the context was destroyed")
	ltNoBadUses(t)
}

// TestNoPerThreadStream: PerThreadStream is gone. It named the
// calling OS thread's stream, and goroutines move between threads, so one
// goroutine's copy, launch and Synchronize could land on different streams.
func TestNoPerThreadStream(t *testing.T) {
	_, ok := reflect.TypeFor[*driver.Context]().MethodByName("PerThreadStream")
	assert.False(t, ok, "Context.PerThreadStream is back")
}
