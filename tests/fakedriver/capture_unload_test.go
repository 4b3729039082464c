//go:build linux

package fakedriver_test

// A module's or library's unload while streams of its context are being
// captured. An unload synchronises the context (cuCtxSynchronize), which a
// capture in the context forbids (MODEL.md: it fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture); so
// it consults the registry of streams with a capture sink per CUDA context
// (driver/stream.go, captureIn) and hands itself to the capture's
// AfterCapture instead. lifetime.Counted keeps a failure passed on from
// being counted twice.

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// A BeginCapture that fails after it installed its sink (here
// cuStreamBeginCapture fails; also ErrCapturing for a stream captured
// through Raw, a bad dependency of Graph.BeginCapture) removes the sink with
// ClearCaptureSink without running finish. An unload that found the sink
// meanwhile (captureIn) and handed itself to the sink's AfterCapture still
// runs: the module must not stay loaded for good (holding its context) in
// a list that nothing releases. The same goes for a stream-ordered free
// that AfterCapture took.
func TestUnloadDuringFailedBeginCaptureIsNotLost(t *testing.T) {
	f := setup(t)
	defer fcall(t, "fake_fail_clear")
	mods := fcall(t, "fake_live_modules")
	s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()

	faketest.FailCalls(t, "cuStreamBeginCapture", 999, 0, -1) // every begin fails
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var began atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if sc, err := graph.BeginCapture(s2, graph.CaptureRelaxed); err == nil {
				began.Add(1)
				_ = sc.Abort()
			}
		}
	}()
	deferred := false
	deadline := time.Now().Add(1500 * time.Millisecond)
	rounds := 0
	for ; !deferred && time.Now().Before(deadline); rounds++ {
		m, err := f.ctx.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		require.NoError(t, m.Close())
		// No capture ever began: an unload that did not run at once was
		// handed to a failed begin's sink.
		deferred = fcall(t, "fake_live_modules") != mods
	}
	close(stop)
	wg.Wait()
	fcall(t, "fake_fail_clear")
	require.Zero(t, began.Load(), "no capture began")
	if !deferred {
		t.Logf("no unload met a failing begin in %d rounds", rounds)
		return
	}
	assert.True(t, settleWithin(30*time.Second, func() bool { return fcall(t, "fake_live_modules") == mods }),
		"round %d: a module closed while a BeginCapture was failing is never unloaded (lost in the failed capture's AfterCapture list)", rounds)
}

// Library.unload synchronises every context the library was used in, one
// after another. A capture that begins in a later context while an earlier
// one is being synchronised (its queued kernels take a while) must be
// seen: a check of all contexts up front would miss it, and the later
// cuCtxSynchronize would fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
// invalidate that capture and make Close return that error. (The check and
// each sync must be one step with respect to a capture's begin.)
func TestLibraryUnloadDoesNotInvalidateLaterCapture(t *testing.T) {
	f := setup(t)
	defer func() {
		fcall(t, "fake_set_kernel_delay_us", 0)
		fcall(t, "fake_quiesce", 30000)
		_ = lifetime.Errors()
		fcall(t, "fake_reset_counters")
	}()
	ctxB, err := f.ctx.Device().NewContext(0)
	require.NoError(t, err)
	defer ctxB.Close()
	sB, err := ctxB.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer sB.Close()
	modB, err := ctxB.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	defer modB.Close()
	emptyB, err := modB.Function("empty")
	require.NoError(t, err)

	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	lf, err := lib.Function("empty")
	require.NoError(t, err)
	// Used in f.ctx first, then in ctxB: the unload syncs them in that order.
	require.NoError(t, f.s.Launch(lf, g1, b1))
	require.NoError(t, f.s.Synchronize())
	require.NoError(t, sB.Launch(lf, g1, b1))
	require.NoError(t, sB.Synchronize())
	fcall(t, "fake_set_kernel_delay_us", 300000)
	require.NoError(t, f.s.Launch(lf, g1, b1), "queued for 300 ms")

	closed := make(chan error, 1)
	go func() { closed <- lib.Close() }()
	time.Sleep(60 * time.Millisecond) // the unload waits for f.ctx's kernel
	sc, err := graph.BeginCapture(sB, graph.CaptureRelaxed)
	require.NoError(t, err)
	defer sc.Abort()
	assert.NoError(t, sB.Launch(emptyB, g1, b1), "captured")
	var cerr error
	select {
	case cerr = <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Library.Close did not return")
	}
	assert.NoError(t, cerr, "Library.Close while a capture runs in a context the library was used in")
	assert.NoError(t, sB.Launch(emptyB, g1, b1), "the capture goes on after the library's unload")
	g, err := sc.End()
	assert.NoError(t, err, "the capture survives the library's unload")
	if g != nil {
		assert.NoError(t, g.Close())
	}
}

// The same check-then-sync gap for a module, with nothing slow: an unload
// that asks captureIn, finds no capture, and calls cuCtxSynchronize a
// moment later must not invalidate a capture that began in between.
// Captures run back to back on another stream while modules are closed;
// every End succeeds.
func TestModuleUnloadDoesNotInvalidateConcurrentCapture(t *testing.T) {
	f := setup(t)
	defer func() {
		fcall(t, "fake_quiesce", 30000)
		_ = lifetime.Errors()
		fcall(t, "fake_reset_counters")
	}()
	s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var captures, broken atomic.Int64
	var firstErr atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			sc, err := graph.BeginCapture(s2, graph.CaptureRelaxed)
			if err != nil {
				broken.Add(1)
				firstErr.CompareAndSwap(nil, err)
				continue
			}
			lerr := s2.Launch(f.empty, g1, b1)
			g, err := sc.End()
			captures.Add(1)
			if lerr != nil || err != nil {
				broken.Add(1)
				if err == nil {
					err = lerr
				}
				firstErr.CompareAndSwap(nil, err)
			}
			if g != nil {
				_ = g.Close()
			}
		}
	}()
	var closeErrs int
	deadline := time.Now().Add(time.Second)
	rounds := 0
	for ; broken.Load() == 0 && time.Now().Before(deadline); rounds++ {
		m, err := f.ctx.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		if m.Close() != nil {
			closeErrs++
		}
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, broken.Load(), "%d of %d captures broken by %d module unloads (%d Module.Close errors; an unload the release queue ran fails unseen); first: %v",
		broken.Load(), captures.Load(), rounds, closeErrs, firstErr.Load())
}

// Library.unload may skip the synchronisation of a context it was used in
// only when the CUDA context is gone ("a destroyed context's work is gone
// with it"), not when one Context value of it is. With two PrimaryContext
// values of one device, destroying one releases one retain of the primary
// context, which lives on (and runs the queued kernels) through the other:
// the library must not be unloaded under a kernel still queued there. (The
// capture registry keys by handle for this very reason; Library.used keys
// by Context value.)
func TestLibraryUnloadSyncsSharedPrimaryContext(t *testing.T) {
	f := setup(t)
	defer func() {
		fcall(t, "fake_set_kernel_delay_us", 0)
		fcall(t, "fake_quiesce", 30000)
		fcall(t, "fake_reset_counters")
	}()
	fcall(t, "fake_reset_counters")
	ctx2, err := f.ctx.Device().PrimaryContext()
	require.NoError(t, err)
	require.True(t, ctx2.Same(f.ctx))
	s2, err := ctx2.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	lf, err := lib.Function("empty")
	require.NoError(t, err)

	fcall(t, "fake_set_kernel_delay_us", 100000)
	// A module kernel first (f.empty: the same CUDA context), so that the
	// library's kernel is still queued, not yet started, for 100 ms.
	require.NoError(t, s2.Launch(f.empty, g1, b1))
	require.NoError(t, s2.Launch(lf, g1, b1))
	require.NoError(t, s2.Close())   // destroyed; its queued kernels still run
	require.NoError(t, ctx2.Close()) // one retain released; f.ctx keeps the CUDA context
	require.NoError(t, lib.Close())
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	ptr, handle := fcall(t, "fake_bad_ptr_uses"), fcall(t, "fake_bad_handle_uses")
	assert.Zero(t, handle+ptr, "the library was unloaded under a kernel still queued in the shared primary context: %s", faketest.LastBadUse(t))
}

// The deferred unload of a module and of a library runs exactly once, and
// only once no capture is left in the context, on each of these paths: a
// capture aborted, a StreamCapture dropped and aborted by its cleanup, a
// capture on a stream of a second Context value of the same primary
// context, and two overlapping captures (the unload handed from the first
// to the second). No capture is invalidated, nothing fails, nothing names
// an unloaded module.
func TestCaptureDeferredUnloadPaths(t *testing.T) {
	f := ltSetup(t)
	mods, libs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_libraries")
	ctx2, err := f.ctx.Device().PrimaryContext()
	require.NoError(t, err)
	defer ctx2.Close()
	s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()
	s3, err := ctx2.NewStream(driver.StreamNonBlocking) // same CUDA context, other Context value
	require.NoError(t, err)
	defer s3.Close()

	type loaded struct {
		close func() error
		live  func() bool // still loaded
	}
	load := func(lib bool) loaded {
		if lib {
			l, err := driver.LoadLibrary([]byte("FAKE library"))
			require.NoError(t, err)
			lf, err := l.Function("empty")
			require.NoError(t, err)
			require.NoError(t, f.s.Launch(lf, g1, b1))
			require.NoError(t, f.s.Synchronize())
			return loaded{l.Close, func() bool { return fcall(t, "fake_live_libraries") > libs }}
		}
		m, err := f.ctx.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		_, err = m.Function("empty")
		require.NoError(t, err)
		return loaded{m.Close, func() bool { return fcall(t, "fake_live_modules") > mods }}
	}
	unloaded := func(what string) {
		t.Helper()
		assert.True(t, ltSettle(func() bool {
			return fcall(t, "fake_live_modules") == mods && fcall(t, "fake_live_libraries") == libs
		}), "%s: unloaded once the captures are over", what)
	}

	for _, lib := range []bool{false, true} {
		// Aborted.
		x := load(lib)
		sc, err := graph.BeginCapture(s3, graph.CaptureRelaxed)
		require.NoError(t, err)
		require.NoError(t, x.close(), "lib %v: Close during a capture on another Context value's stream", lib)
		require.NoError(t, s3.Launch(f.empty, g1, b1), "lib %v: the capture goes on", lib)
		assert.True(t, x.live(), "lib %v: waits for the capture", lib)
		require.NoError(t, sc.Abort())
		unloaded("abort")

		// Dropped: the StreamCapture's cleanup aborts it.
		x = load(lib)
		func() {
			_, err := graph.BeginCapture(s2, graph.CaptureRelaxed)
			require.NoError(t, err)
		}()
		require.NoError(t, x.close())
		assert.True(t, x.live(), "lib %v: waits for the dropped capture", lib)
		unloaded("dropped capture")
		st, err := graph.IsCapturing(s2)
		require.NoError(t, err)
		assert.Equal(t, graph.NotCapturing, st)

		// Two overlapping captures, in two Context values: the unload waits
		// for both.
		x = load(lib)
		a, err := graph.BeginCapture(s2, graph.CaptureRelaxed)
		require.NoError(t, err)
		b, err := graph.BeginCapture(s3, graph.CaptureRelaxed)
		require.NoError(t, err)
		require.NoError(t, x.close())
		require.NoError(t, s2.Launch(f.empty, g1, b1))
		ga, err := a.End()
		require.NoError(t, err)
		lifetime.Flush()
		assert.True(t, x.live(), "lib %v: the second capture still runs", lib)
		require.NoError(t, s3.Launch(f.empty, g1, b1), "lib %v: the second capture goes on", lib)
		gb, err := b.End()
		require.NoError(t, err, "lib %v: the second capture was not invalidated", lib)
		unloaded("two captures")
		require.NoError(t, ga.Close())
		require.NoError(t, gb.Close())
	}
	assert.Empty(t, lifetime.Errors())
}

// Closing a module or library while another stream of the same context is
// being captured: the unload synchronises the context (cuCtxSynchronize),
// which a capture in the context forbids (MODEL.md: it fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture), so
// it waits until the capture ends and then runs. Nothing of the module is
// in the capture.
func TestModuleCloseDuringUnrelatedCapture(t *testing.T) {
	f := ltSetup(t)
	defer func() { _ = lifetime.Errors() }()
	mods, libs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_libraries")
	for _, lib := range []bool{false, true} {
		var closeFn func() error
		if lib {
			l, err := driver.LoadLibrary([]byte("FAKE library"))
			require.NoError(t, err)
			lf, err := l.Function("empty")
			require.NoError(t, err)
			require.NoError(t, f.s.Launch(lf, g1, b1), "the library was used in f.ctx")
			require.NoError(t, f.s.Synchronize())
			closeFn = l.Close
		} else {
			m, err := f.ctx.LoadModule([]byte("FAKE module"))
			require.NoError(t, err)
			_, err = m.Function("empty")
			require.NoError(t, err)
			closeFn = m.Close
		}
		s2, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		sc, err := graph.BeginCapture(s2, graph.CaptureRelaxed)
		require.NoError(t, err)
		assert.NoError(t, closeFn(), "library %v: Close during another stream's capture", lib)
		assert.NoError(t, s2.Launch(f.empty, g1, b1), "library %v: the capture goes on", lib)
		g, err := sc.End()
		assert.NoError(t, err, "library %v: the capture ends", lib)
		if g != nil {
			require.NoError(t, g.Close())
		}
		sc.Abort()
		require.NoError(t, s2.Close())
		settle(t, func() bool {
			return fcall(t, "fake_live_modules") == mods && fcall(t, "fake_live_libraries") == libs
		}, "the unload ran once the capture ended")
		assert.Empty(t, lifetime.Errors(), "library %v: no failed release", lib)
		ltNoBadUses(t)
	}
}
