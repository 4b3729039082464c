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

// A free first waits for the context's work through events on its streams,
// then synchronises the context and frees: a failure of that first wait
// (an event that cannot be made, recorded or waited for) leaves the free
// correct, and is no failure of the free; a fault is still reported, once
// (by the synchronisation).
func TestFreeWaitFailureFailsNoFree(t *testing.T) {
	f := setup(t)
	defer fcall(t, "fake_fail_clear")
	for _, fn := range []string{"cuEventCreate", "cuEventRecord", "cuEventSynchronize", "cuStreamIsCapturing"} {
		lifetime.Flush()
		_ = lifetime.Errors()
		errs0 := lifetime.ReadStats().ReleaseErrors
		allocs := fcall(t, "fake_live_allocations")
		b, err := driver.Alloc[int32](f.ctx, 16)
		require.NoError(t, err, fn)
		require.NoError(t, f.s.Launch(f.fill, g1, b1, b, int32(1), int32(16)), fn)
		faketest.FailNext(t, fn, 2) // CUDA_ERROR_OUT_OF_MEMORY
		require.NoError(t, b.Close(), fn)
		lifetime.Flush()
		assert.Equal(t, allocs, fcall(t, "fake_live_allocations"), "%s: freed", fn)
		assert.Equal(t, errs0, lifetime.ReadStats().ReleaseErrors, "%s: the free did not fail: %v", fn, lifetime.Errors())
		fcall(t, "fake_fail_clear")
	}
	noBadUses(t)
}

// After a fault, a free reports it once.
func TestFreeAfterAFaultReportsItOnce(t *testing.T) {
	f := setup(t)
	defer fcall(t, "fake_clear_sticky_error")
	lifetime.Flush()
	_ = lifetime.Errors()
	errs0 := lifetime.ReadStats().ReleaseErrors
	allocs := fcall(t, "fake_live_allocations")
	b, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	fcall(t, "fake_set_sticky_error", ltLaunchFailed)
	require.NoError(t, b.Close())
	lifetime.Flush()
	assert.Equal(t, allocs, fcall(t, "fake_live_allocations"), "freed")
	assert.Equal(t, errs0+1, lifetime.ReadStats().ReleaseErrors, "one failure counted")
	errs := lifetime.Errors()
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], driver.ErrLaunchFailed)
	fcall(t, "fake_clear_sticky_error")
	fcall(t, "fake_reset_counters")
}
