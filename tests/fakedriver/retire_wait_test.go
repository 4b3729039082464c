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

// What an update retires is released only once the launches before it are
// done; when the wait cannot be made (here the switch of the thread's
// capture mode it runs under fails), the owner is kept (a counted leak),
// never released under a running launch. The owner is stream-ordered
// memory of another stream, whose free does not wait for the launch.
func TestRetireWaitFailureKeepsTheOwner(t *testing.T) {
	w := newArgsWorld(t)
	f := w.f
	defer fcall(t, "fake_fail_clear")
	defer func() { _ = lifetime.Errors() }()
	s1, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s1.Close()
	a, err := driver.AllocAsync[int32](s1, 8)
	require.NoError(t, err)
	require.NoError(t, s1.Synchronize())
	require.NoError(t, w.e.SetKernelArg(w.k, 0, a))
	require.NoError(t, a.Close())
	lifetime.Flush()
	_ = lifetime.Errors()
	kept := lifetime.ReadStats().Kept

	release := hold(t, "fake_set_kernel_delay_us") // the launch runs until released: no timing
	require.NoError(t, w.e.Launch(w.f.s))
	faketest.FailNext(t, "cuThreadExchangeStreamCaptureMode", 1)
	require.NoError(t, w.e.SetKernelArg(w.k, 0, w.other)) // retires a behind the launch
	// The wait is made by a goroutine of its own, which neither
	// Synchronize nor Flush waits for: wait for its verdict (while the
	// launch is still held, so a release could only be an early one).
	assert.True(t, ltSettle(func() bool { return lifetime.ReadStats().Kept > kept }), "the failed wait keeps the owner")
	release()
	require.NoError(t, w.f.s.Synchronize())
	lifetime.Flush()
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses"), "the launch ran on freed memory: %s", faketest.LastBadUse(t))
	assert.Equal(t, kept+1, lifetime.ReadStats().Kept, "the owner is kept, a counted leak")
	assert.Len(t, lifetime.Errors(), 1, "and reported")
	fcall(t, "fake_reset_counters")
}
