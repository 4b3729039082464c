//go:build linux

package fakedriver_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// A host function closes the last reference of its own stream and of an
// event: the destroys run after it, on the release goroutine, and name
// nothing destroyed; Close returns nil in the host function and the stats
// come back once flushed.
func TestHostFuncClosesItsStreamAndEvent(t *testing.T) {
	f := ltSetup(t)
	streams, events := fcall(t, "fake_live_streams"), fcall(t, "fake_live_events")
	before := lifetime.ReadStats()
	s, err := f.ctx.NewStream(0)
	require.NoError(t, err)
	ev, err := f.ctx.NewEvent(0)
	require.NoError(t, err)
	require.NoError(t, ev.Record(s))
	var errs [2]error
	// No CUDA call on the callback's thread (the fake counts them): the
	// destroys did not run inside the host function. (Counting live
	// streams there instead saw other tests' streams go.)
	inCallback := fcall(t, "fake_callback_cuda_calls")
	require.NoError(t, s.LaunchHostFunc(func() {
		errs = [2]error{ev.Close(), s.Close()}
	}))
	require.NoError(t, f.ctx.Synchronize())
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.Equal(t, inCallback, fcall(t, "fake_callback_cuda_calls"), "not destroyed inside the host function")
	settle(t, func() bool {
		return fcall(t, "fake_live_streams") == streams && fcall(t, "fake_live_events") == events
	}, "stream and event destroyed after the host function")
	lifetime.Flush()
	assert.Equal(t, before.Objects, lifetime.ReadStats().Objects)
	assert.Empty(t, lifetime.Errors())
	ltNoBadUses(t)
}

// A host function that closes the last reference of a module or a buffer
// (a natural "free it when the kernel is done"): the unload and the free
// wait for the device, which waits for the host function, so they must
// not run in it (lifetime I8: its last release hands them to the release
// queue). Were they run there, they would deadlock: the watchdog turns
// the hang into a panic that ends the test binary.
func TestCloseInHostFunctionDoesNotDeadlock(t *testing.T) {
	f := ltSetup(t)
	mods, allocs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_allocations")
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			m, err := f.ctx.LoadModule([]byte("FAKE module"))
			if err != nil {
				return err
			}
			fn, err := m.Function("fill")
			if err != nil {
				return err
			}
			buf, err := driver.Alloc[int32](f.ctx, 4)
			if err != nil {
				return err
			}
			if err := f.s.Launch(fn, g1, b1, buf, int32(1), int32(4)); err != nil {
				return err
			}
			var closeErrs [2]error
			if err := f.s.LaunchHostFunc(func() { closeErrs = [2]error{m.Close(), buf.Close()} }); err != nil {
				return err
			}
			if err := f.s.Synchronize(); err != nil {
				return err
			}
			return errors.Join(closeErrs[0], closeErrs[1])
		}()
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		// Not t.Fatal: its cleanups would wait on the deadlocked fake.
		panic("Close in a host function deadlocked")
	}
	lifetime.Flush()
	settle(t, func() bool {
		return fcall(t, "fake_live_modules") == mods && fcall(t, "fake_live_allocations") == allocs
	}, "the module unloaded and the buffer freed once the host function returned")
	assert.Empty(t, lifetime.Errors())
	ltNoBadUses(t)
}

// Callback ids carry their slot's generation in the high 32 bits, so after
// a few hundred reuses of one slot an id looks like an address in the Go
// heap (0xc0_0000_00xx under the race detector). Such ids go through C as
// host functions' user data while the garbage collector runs. (Whether a
// stray pointer crashes the collector depends on what lives at that address
// at that moment; internal/cu's TestUserDataIsNeverAGoPointer checks the
// cause: the user-data parameters and fields are integers.)
func TestHostFnIDsThatLookLikeHeapAddresses(t *testing.T) {
	f := ltSetup(t)
	for range 400 { // one slot, reused: its generation passes 0xc0
		hostfn.Unregister(hostfn.Register(hostfn.Callback{Fn: func() {}}))
	}
	var ran atomic.Int32
	for i := range 300 {
		require.NoError(t, f.s.LaunchHostFunc(func() { ran.Add(1) }))
		if i%10 == 0 {
			runtime.GC()
		}
	}
	require.NoError(t, f.s.Synchronize())
	runtime.GC()
	assert.EqualValues(t, 300, ran.Load())
}

// CUresult codes the tests inject.
const (
	ltOutOfMemory  = 2   // CUDA_ERROR_OUT_OF_MEMORY
	ltLaunchFailed = 719 // CUDA_ERROR_LAUNCH_FAILED, a sticky error
)

// TestStickyErrorReleasesHostFunctions: after a sticky error CUDA never
// runs the host functions queued on the context; the stream's next call
// that reports the error releases what they hold: the callbacks' handle-map
// entries and the page-locked blocks of async copies of Go slices, which
// would otherwise stay in use forever.
func TestStickyErrorReleasesHostFunctions(t *testing.T) {
	f := ltSetup(t)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	buf, err := driver.Alloc[int32](f.ctx, 64)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, seam.TrimStaging(f.ctx))
	lifetime.Flush()
	before := lifetime.ReadStats()
	hosts := fcall(t, "fake_live_host_allocs")
	release := hold(t, "fake_set_kernel_delay_us") // the kernel runs until released, however slow the machine
	require.NoError(t, s.Launch(f.empty, g1, b1))  // the rest queues behind it
	var ran atomic.Int64
	for i := 0; i < 10; i++ {
		require.NoError(t, s.LaunchHostFunc(func() { ran.Add(1) }))
	}
	require.NoError(t, buf.CopyToHostAsync(s, make([]int32, 64)))
	require.NoError(t, buf.CopyFromHostAsync(s, make([]int32, 64)))
	mid := lifetime.ReadStats()
	assert.Equal(t, before.Callbacks+12, mid.Callbacks, "ten host functions and two keep-alives registered")
	assert.Equal(t, before.Pinned, mid.Pinned, "the slices are not pinned: they were staged")
	assert.Equal(t, hosts+2, fcall(t, "fake_live_host_allocs"), "two page-locked blocks in use")

	fcall(t, "fake_set_sticky_error", ltLaunchFailed)
	assert.ErrorIs(t, s.Synchronize(), driver.ErrLaunchFailed)
	after := lifetime.ReadStats()
	assert.Equal(t, before.Callbacks, after.Callbacks, "the host functions CUDA will never run were released")
	assert.Equal(t, before.Pinned, after.Pinned)
	assert.Zero(t, ran.Load(), "none ran")
	// Let fakecuda drop the queued work before the error is cleared (a real
	// sticky error is never cleared).
	release()
	assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	fcall(t, "fake_clear_sticky_error")
	require.NoError(t, seam.TrimStaging(f.ctx))
	lifetime.Flush()
	assert.Equal(t, hosts, fcall(t, "fake_live_host_allocs"), "the blocks came back and were freed")
	ltNoBadUses(t)
}

// TestAsyncCopyKeepAliveFailureWaitsForCopy: when the host function that
// keeps an async copy's Go slice pinned cannot be queued after the copy
// was, the call waits for the copy instead, so it neither returns an error
// for a copy that was queued nor lets the slice go while the copy may read
// it (the slowed copy would then read whatever the caller wrote into it
// after the call).
func TestAsyncCopyKeepAliveFailureWaitsForCopy(t *testing.T) {
	f := ltSetup(t)
	buf, err := driver.Alloc[int32](f.ctx, 256)
	require.NoError(t, err)
	defer buf.Close()
	lifetime.Flush()
	before := lifetime.ReadStats()
	fcall(t, "fake_set_copy_delay_us", 5000)

	src := make([]int32, 256)
	for i := range src {
		src[i] = int32(i + 1)
	}
	faketest.FailCalls(t, "cuLaunchHostFunc", ltOutOfMemory, 0, 1)
	assert.NoError(t, buf.CopyFromHostAsync(f.s, src), "the copy was queued: the call succeeds")
	for i := range src {
		src[i] = -1 // the caller may reuse the slice once the call returned... only after a sync, but the copy has run
	}
	require.NoError(t, f.s.Synchronize())
	got := make([]int32, 256)
	require.NoError(t, buf.CopyToHost(f.ctx.LegacyStream(), got))
	assert.Equal(t, int32(1), got[0])
	assert.Equal(t, int32(256), got[255], "the copy read the slice before the call returned")

	dst := make([]int32, 256)
	faketest.FailCalls(t, "cuLaunchHostFunc", ltOutOfMemory, 0, 1)
	assert.NoError(t, buf.CopyToHostAsync(f.s, dst))
	assert.Equal(t, int32(256), dst[255], "the copy into the slice is complete when the call returns")

	fcall(t, "fake_set_copy_delay_us", 0)
	after := lifetime.ReadStats()
	assert.Equal(t, before.Pinned, after.Pinned, "nothing left pinned")
	assert.Equal(t, before.Callbacks, after.Callbacks, "nothing left registered")
	ltNoBadUses(t)
}

// A host function that panicked before its stream's Close, with no
// Synchronize between: Close hands the panic to the context, whose next
// Synchronize returns it, once.
func TestHostFuncPanicBeforeCloseGoesToContext(t *testing.T) {
	f := ltSetup(t)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, s.LaunchHostFunc(func() { panic("early") }))
	waitHostFuncs(t, s)
	require.NoError(t, s.Close())
	err = f.ctx.Synchronize()
	assert.ErrorContains(t, err, "host function panicked: early")
	assert.NoError(t, f.ctx.Synchronize(), "returned once")
}

// A host function that panics after its stream and its context were both
// closed: no Synchronize can return the panic, so lifetime.Errors reports
// it (without counting a failed release), and it is counted in
// CallbackPanics.
func TestHostFuncPanicAfterContextCloseGoesToErrors(t *testing.T) {
	f := ltSetup(t)
	c, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	s, err := c.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	_ = lifetime.Errors()
	before := lifetime.ReadStats()
	gate, ran := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.LaunchHostFunc(func() { <-gate; panic("orphan") }))
	require.NoError(t, s.LaunchHostFunc(func() { close(ran) }))
	require.NoError(t, s.Close())
	require.NoError(t, c.Close())
	close(gate)
	<-ran // the panic was reported before the next host function ran
	assert.Equal(t, before.CallbackPanics+1, lifetime.ReadStats().CallbackPanics)
	errs := lifetime.Errors()
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], "host function panicked: orphan")
	assert.Equal(t, before.ReleaseErrors, lifetime.ReadStats().ReleaseErrors, "not a failed release")
	assert.ErrorIs(t, c.Synchronize(), driver.ErrClosed)
}

// Panics kept by a context for its Synchronize and not returned when the
// context is closed go to lifetime.Errors: nothing is lost.
func TestHostFuncPanicKeptByContextReportedAtClose(t *testing.T) {
	f := ltSetup(t)
	c, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	s, err := c.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	_ = lifetime.Errors()
	require.NoError(t, s.LaunchHostFunc(func() { panic("kept") }))
	ran := make(chan struct{})
	require.NoError(t, s.LaunchHostFunc(func() { close(ran) }))
	require.NoError(t, s.Close())
	<-ran // the panic was reported before the next host function ran
	assert.Empty(t, lifetime.Errors(), "kept for the context's Synchronize")
	require.NoError(t, c.Close())
	errs := lifetime.Errors()
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], "host function panicked: kept")
}

// Each LegacyStream call returns a new Stream value: a host function's
// panic on one is returned by the next Synchronize of another, or of the
// context, once.
func TestHostFuncPanicOnLegacyStream(t *testing.T) {
	f := ltSetup(t)
	require.NoError(t, f.ctx.LegacyStream().LaunchHostFunc(func() { panic("legacy one") }))
	err := f.ctx.LegacyStream().Synchronize()
	assert.ErrorContains(t, err, "host function panicked: legacy one")
	assert.NoError(t, f.ctx.Synchronize(), "returned once")

	require.NoError(t, f.ctx.LegacyStream().LaunchHostFunc(func() { panic("legacy two") }))
	assert.ErrorContains(t, f.ctx.Synchronize(), "host function panicked: legacy two")
	assert.NoError(t, f.ctx.LegacyStream().Synchronize(), "returned once")
}

// waitHostFuncs waits until the host functions queued on s so far have
// run, their panics reported (a host function's panic is handed over
// before the next one on its stream runs), without a Synchronize.
func waitHostFuncs(t *testing.T, s *driver.Stream) {
	t.Helper()
	ran := make(chan struct{})
	require.NoError(t, s.LaunchHostFunc(func() { close(ran) }))
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the host functions did not run")
	}
}

// A host function holds its stream until it has run, so that a free's wait
// finds it on a closed stream; one that CUDA never runs (a fault stopped
// the context) is released once the fault is seen, by a Synchronize or by
// a free's wait, and its stream and context with it.
func TestHostFuncOfAClosedStreamAfterAFault(t *testing.T) {
	f := setup(t)
	defer func() { _ = lifetime.Errors() }()
	for _, seenBy := range []string{"Synchronize", "free"} {
		msg := "seen by " + seenBy
		ctxs, streams := fcall(t, "fake_live_contexts"), fcall(t, "fake_live_streams")
		callbacks := lifetime.ReadStats().Callbacks
		c2, err := f.ctx.Device().NewContext(0)
		require.NoError(t, err, msg)
		b, err := driver.Alloc[int32](c2, 16)
		require.NoError(t, err, msg)
		s, err := c2.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err, msg)
		gate := make(chan struct{})
		var ran atomic.Bool
		require.NoError(t, s.LaunchHostFunc(func() { <-gate }), msg)
		require.NoError(t, s.LaunchHostFunc(func() { ran.Store(true) }), msg)
		require.NoError(t, s.Close(), msg)
		assert.Equal(t, streams+1, fcall(t, "fake_live_streams"), msg+": the host functions hold the closed stream")
		fcall(t, "fake_set_sticky_error", ltLaunchFailed)
		close(gate)
		assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000), msg) // the second host function is dropped
		if seenBy == "Synchronize" {
			assert.ErrorIs(t, c2.Synchronize(), driver.ErrLaunchFailed, msg)
			require.NoError(t, b.Close(), msg)
		} else {
			require.NoError(t, b.Close(), msg)
			lifetime.Flush()
		}
		require.NoError(t, c2.Close(), msg)
		lifetime.Flush()
		assert.True(t, settleWithin(30*time.Second, func() bool {
			return fcall(t, "fake_live_streams") == streams && fcall(t, "fake_live_contexts") == ctxs &&
				lifetime.ReadStats().Callbacks == callbacks
		}), "%s: stream, context and callback released: %d streams (were %d), %d contexts (were %d), %d callbacks (were %d)",
			msg, fcall(t, "fake_live_streams"), streams, fcall(t, "fake_live_contexts"), ctxs, lifetime.ReadStats().Callbacks, callbacks)
		assert.False(t, ran.Load(), msg)
		fcall(t, "fake_clear_sticky_error")
		fcall(t, "fake_reset_counters")
	}
}
