//go:build linux

package fakedriver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// permutations returns every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// TestPeerCopyClosedInEveryOrder: a copy between two contexts made for
// it, queued behind a slow kernel on a stream of either, then the source,
// the destination, the stream and both contexts closed at once, in every
// order. The copy still runs (fakecuda drops the work of a destroyed
// context, and counts it), reads and writes live memory only, and once it
// has run everything is gone: memory, streams, contexts.
func TestPeerCopyClosedInEveryOrder(t *testing.T) {
	f := ltSetup(t)
	dev := f.ctx.Device()
	lifetime.Flush()
	gauges := []string{"fake_live_allocations", "fake_live_streams", "fake_live_contexts", "fake_live_modules"}
	before := map[string]int64{}
	for _, g := range gauges {
		before[g] = fcall(t, g)
	}
	dropped := fcall(t, "fake_dropped_ops")
	fcall(t, "fake_set_kernel_delay_us", 2000)
	orders := permutations(5)
	for _, onSource := range []bool{true, false} {
		for _, order := range orders {
			cs, err := dev.NewContext(driver.ContextSchedAuto)
			require.NoError(t, err)
			cd, err := dev.NewContext(driver.ContextSchedAuto)
			require.NoError(t, err)
			src, err := driver.AllocCopy(cs.LegacyStream(), seq(3, 16))
			require.NoError(t, err)
			dst, err := driver.Alloc[int32](cd, 16)
			require.NoError(t, err)
			side := cd
			if onSource {
				side = cs
			}
			s, err := side.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err)
			mod, err := side.LoadModule([]byte("FAKE module"))
			require.NoError(t, err)
			empty, err := mod.Function("empty")
			require.NoError(t, err)
			require.NoError(t, s.Launch(empty, g1, b1), "a slow kernel first")
			require.NoError(t, dst.CopyFromAsync(s, src))
			closers := []interface{ Close() error }{src, dst, s, cs, cd}
			for _, i := range order {
				require.NoError(t, closers[i].Close())
			}
			require.NoError(t, mod.Close()) // its unload waits for its kernel
		}
	}
	ok := ltSettle(func() bool {
		for _, g := range gauges {
			if fcall(t, g) != before[g] {
				return false
			}
		}
		return true
	})
	for _, g := range gauges {
		assert.Equal(t, before[g], fcall(t, g), "%s back where it was (all settled: %v)", g, ok)
	}
	assert.Equal(t, dropped, fcall(t, "fake_dropped_ops"), "no queued copy was dropped with its context")
	t.Logf("%d orders, the copy on either context's stream", len(orders))
}

// TestPeerCopyFailedWaitHoldsTheOtherBuffer: when the synchronous copy's
// wait fails (an injected error that is not a fault), the copy may still
// be queued: the other context's buffer, closed at once, stays allocated
// until the stream has passed it.
func TestPeerCopyFailedWaitHoldsTheOtherBuffer(t *testing.T) {
	_, x, y := peerSetup(t)
	src, err := driver.AllocCopy(x.s, seq(9, 16))
	require.NoError(t, err)
	dst, err := driver.Alloc[int32](y.ctx, 16)
	require.NoError(t, err)
	defer dst.Close()
	fcall(t, "fake_set_kernel_delay_us", 20000)
	require.NoError(t, y.s.Launch(y.empty, g1, b1), "a slow kernel first")
	faketest.FailNext(t, "cuStreamSynchronize", int32(driver.ErrInvalidValue))
	require.ErrorIs(t, dst.CopyFrom(y.s, src), driver.ErrInvalidValue)
	require.NoError(t, src.Close())
	require.NoError(t, y.s.Synchronize())
	got, err := dst.ToHost(y.s)
	require.NoError(t, err)
	assert.Equal(t, seq(9, 16), got, "the copy ran, from live memory")
}

// TestPeerCopyAfterAFault: after a fault (a sticky error) a copy is
// refused, and what a copy queued before it held is let go: the buffers,
// closed, are freed (their frees report the fault).
func TestPeerCopyAfterAFault(t *testing.T) {
	f := setup(t) // not ltSetup: the frees after the fault fail, as they should
	fcall(t, "fake_reset_counters")
	x, y := newPeerSide(t, f.ctx.Device(), true), newPeerSide(t, f.ctx.Device(), false)
	lifetime.Flush()
	_ = lifetime.Errors()
	allocs := fcall(t, "fake_live_allocations")
	src, err := driver.AllocCopy(x.s, seq(9, 16))
	require.NoError(t, err)
	dst, err := driver.Alloc[int32](y.ctx, 16)
	require.NoError(t, err)
	fcall(t, "fake_set_kernel_delay_us", 20000)
	defer fcall(t, "fake_set_kernel_delay_us", 0)
	require.NoError(t, y.s.Launch(y.empty, g1, b1), "a slow kernel first")
	require.NoError(t, dst.CopyFromAsync(y.s, src))
	require.NoError(t, src.Close())
	fcall(t, "fake_set_sticky_error", uintptr(driver.ErrIllegalAddress))
	assert.ErrorIs(t, dst.CopyFromAsync(y.s, dst), driver.ErrSticky, "within a context")
	other, err := driver.Alloc[int32](x.ctx, 16)
	require.NoError(t, err)
	assert.ErrorIs(t, dst.CopyFromAsync(y.s, other), driver.ErrSticky, "between contexts")
	assert.ErrorIs(t, dst.CopyFrom(x.s, other), driver.ErrSticky, "between contexts, waiting")
	require.NoError(t, other.Close())
	require.NoError(t, dst.Close())
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_allocations") == allocs }), "all three freed")
	assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	fcall(t, "fake_clear_sticky_error")
	for _, err := range lifetime.Errors() {
		assert.ErrorIs(t, err, driver.ErrIllegalAddress, "a free reports the fault")
	}
	ltNoBadUses(t)
}
