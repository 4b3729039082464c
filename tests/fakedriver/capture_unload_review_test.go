//go:build linux

package fakedriver_test

// Review tests for 185c8b2: the registry of streams with a capture sink per
// CUDA context (driver/stream.go captures), which a module's or library's
// unload consults (captureIn) to hand itself to the capture's AfterCapture
// instead of synchronising the context; lifetime.Counted.
//
// Failing on 185c8b2, passing after the fix:
//   - TestCaptureUnloadReviewFailedBeginLosesUnload
//   - TestCaptureUnloadReviewLibraryLaterContextSyncInvalidatesCapture
//   - TestCaptureUnloadReviewModuleCheckThenSyncRace
//   - TestCaptureUnloadReviewLibrarySkipsSharedPrimaryContext
//   - TestCaptureUnloadReviewArgsFailedFreeCountedOnce
// Passing (coverage the commit's tests lack):
//   - TestCaptureUnloadReviewDeferredUnloadPaths
//   - TestCaptureUnloadReviewRegistryKeepsNoStream

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// A BeginCapture that fails after it installed its sink (here
// cuStreamBeginCapture fails; also ErrCapturing for a stream captured
// through Raw, a bad dependency of Graph.BeginCapture) removes the sink with
// ClearCaptureSink but never runs finish. An unload that found the sink
// meanwhile (captureIn) handed itself to the sink's AfterCapture, which
// appended it to st.after; nothing ever releases st.after, so the module
// stays loaded for good (and holds its context). The same goes for a
// stream-ordered free that AfterCapture took.
func TestCaptureUnloadReviewFailedBeginLosesUnload(t *testing.T) {
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
	assert.True(t, settleWithin(time.Second, func() bool { return fcall(t, "fake_live_modules") == mods }),
		"round %d: a module closed while a BeginCapture was failing is never unloaded (lost in the failed capture's AfterCapture list)", rounds)
}

// Library.unload checks every context the library was used in for a
// capture once, up front, and then synchronises them one after another. A
// capture that begins in a later context while an earlier one is being
// synchronised (its queued kernels take a while) is not seen: the later
// cuCtxSynchronize fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
// invalidates that capture, and Close returns that error, which is exactly
// what 185c8b2 set out to prevent. (The check and each sync must be one
// step with respect to a capture's begin.)
func TestCaptureUnloadReviewLibraryLaterContextSyncInvalidatesCapture(t *testing.T) {
	f := setup(t)
	defer func() {
		fcall(t, "fake_set_kernel_delay_us", 0)
		fcall(t, "fake_quiesce", 5000)
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
	case <-time.After(5 * time.Second):
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

// The same check-then-sync gap for a module, with nothing slow: the unload
// asks captureIn, finds no capture, and calls cuCtxSynchronize a moment
// later; a capture that began in between is invalidated. Captures run back
// to back on another stream while modules are closed; one End failing is
// the bug.
func TestCaptureUnloadReviewModuleCheckThenSyncRace(t *testing.T) {
	f := setup(t)
	defer func() {
		fcall(t, "fake_quiesce", 5000)
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

// Library.unload skips the synchronisation of a context it was used in
// whose Context value is destroyed ("a destroyed context's work is gone
// with it"). With two PrimaryContext values of one device, destroying one
// releases one retain of the primary context, which lives on (and runs the
// queued kernels) through the other: the library is unloaded under a
// kernel still queued there. (The capture registry keys by handle for this
// very reason; Library.used keys by Context value.)
func TestCaptureUnloadReviewLibrarySkipsSharedPrimaryContext(t *testing.T) {
	f := setup(t)
	defer func() {
		fcall(t, "fake_set_kernel_delay_us", 0)
		fcall(t, "fake_quiesce", 5000)
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
	require.Equal(t, int64(1), fcall(t, "fake_quiesce", 5000))
	ptr, handle := fcall(t, "fake_bad_ptr_uses"), fcall(t, "fake_bad_handle_uses")
	assert.Zero(t, handle+ptr, "the library was unloaded under a kernel still queued in the shared primary context: %s", faketest.LastBadUse(t))
}

// A failed release is counted once (lifetime I11, as 185c8b2 states it):
// the commit marks a Function's pass-on of its module's error with
// Counted, but Args pass on their buffers' errors unmarked. Args holding
// the last reference of a buffer whose free fails: the allocation's
// Object counts the failure, and the Args' Object, whose destroy returns
// the same error, counts it again.
func TestCaptureUnloadReviewArgsFailedFreeCountedOnce(t *testing.T) {
	f := setup(t)
	defer fcall(t, "fake_fail_clear")
	_ = lifetime.Errors()
	buf, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	args, err := f.fill.NewArgs(buf, int32(1), int32(4))
	require.NoError(t, err)
	require.NoError(t, buf.Close(), "the Args hold the memory")
	before := lifetime.ReadStats().ReleaseErrors
	faketest.FailCalls(t, "cuMemFree", 999, 0, 1)
	assert.Error(t, args.Close(), "the free failed")
	assert.Equal(t, int64(1), lifetime.ReadStats().ReleaseErrors-before, "one failed free, counted once")
	assert.Len(t, lifetime.Errors(), 1, "one failed free, reported once")
}

// Passing: the deferred unload of a module and of a library runs exactly
// once, and only once no capture is left in the context, on the paths the
// commit's test does not take: a capture aborted, a StreamCapture dropped
// and aborted by its cleanup, a capture on a stream of a second Context
// value of the same primary context, and two overlapping captures (the
// unload handed from the first to the second). No capture is invalidated,
// nothing fails, nothing names an unloaded module.
func TestCaptureUnloadReviewDeferredUnloadPaths(t *testing.T) {
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

// Passing: the registry of capturing streams lets go of every stream once
// its capture is over, whichever way it ended (End, Abort, a failed begin,
// a failed fork, a join through WaitEvent, a wait for an event of a capture
// already over, a StreamCapture dropped): closed and dropped, each Stream
// is collected.
func TestCaptureUnloadReviewRegistryKeepsNoStream(t *testing.T) {
	f := ltSetup(t)
	defer fcall(t, "fake_fail_clear")
	newS := func() *driver.Stream {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		return s
	}
	ev, err := f.ctx.NewEvent(0)
	require.NoError(t, err)
	defer ev.Close()
	paths := []struct {
		name string
		run  func(s *driver.Stream)
	}{
		{"End", func(s *driver.Stream) {
			sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
			require.NoError(t, err)
			g, err := sc.End()
			require.NoError(t, err)
			require.NoError(t, g.Close())
		}},
		{"Abort", func(s *driver.Stream) {
			sc, err := graph.BeginCapture(s, graph.CaptureThreadLocal)
			require.NoError(t, err)
			require.NoError(t, sc.Abort())
		}},
		{"failed begin", func(s *driver.Stream) {
			faketest.FailCalls(t, "cuStreamBeginCapture", 999, 0, 1)
			_, err := graph.BeginCapture(s, graph.CaptureRelaxed)
			require.Error(t, err)
		}},
		{"fork, and a failed fork", func(s *driver.Stream) {
			o1, o2 := newS(), newS()
			defer o1.Close()
			defer o2.Close()
			sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
			require.NoError(t, err)
			require.NoError(t, sc.Fork(o1))
			faketest.FailCalls(t, "cuStreamWaitEvent", 999, 0, 1)
			require.Error(t, sc.Fork(o2))
			g, err := sc.End()
			require.NoError(t, err)
			require.NoError(t, g.Close())
		}},
		{"WaitEvent join", func(s *driver.Stream) {
			o := newS()
			defer o.Close()
			sc, err := graph.BeginCapture(o, graph.CaptureRelaxed)
			require.NoError(t, err)
			require.NoError(t, ev.Record(o))
			require.NoError(t, s.WaitEvent(ev))
			require.Equal(t, capture.Installed(o), capture.Installed(s), "s joined")
			require.NotNil(t, capture.Installed(s))
			require.NoError(t, ev.Record(s))
			require.NoError(t, o.WaitEvent(ev))
			g, err := sc.End()
			require.NoError(t, err)
			require.NoError(t, g.Close())
			require.NoError(t, ev.Record(f.s)) // ev forgets the capture
		}},
		{"wait for an event of a capture over", func(s *driver.Stream) {
			o := newS()
			defer o.Close()
			sc, err := graph.BeginCapture(o, graph.CaptureRelaxed)
			require.NoError(t, err)
			require.NoError(t, ev.Record(o))
			require.NoError(t, sc.Abort())
			require.NoError(t, s.WaitEvent(ev))
			assert.Nil(t, capture.Installed(s))
			require.NoError(t, ev.Record(f.s))
		}},
		{"dropped StreamCapture", func(s *driver.Stream) {
			_, err := graph.BeginCapture(s, graph.CaptureRelaxed)
			require.NoError(t, err)
		}},
	}
	for _, p := range paths {
		w := func() weak.Pointer[driver.Stream] {
			s := newS()
			p.run(s)
			require.NoError(t, s.Close())
			return weak.Make(s)
		}()
		assert.True(t, settleWithin(2*time.Second, func() bool { return w.Value() == nil }), "%s: the Stream is still reachable", p.name)
	}
	_ = lifetime.Errors()
}

// A host function that closes the last reference of a module or a buffer
// (a natural "free it when the kernel is done"): the unload and the free
// wait for the device, which waits for the host function, so they must
// not run in it (lifetime I8: its last release hands them to the release
// queue). Before, this deadlocked; the watchdog turns the hang into a
// panic that ends the test binary.
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
