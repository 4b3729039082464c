//go:build linux

package fakedriver_test

// Review tests for 9a0d580 (a Function has its own lifetime.Object, one per
// name, holding its module or library; Close closes the Functions first).
// TestFunctionReviewUnloadFailureCountedOnce and
// TestFunctionReviewConcurrentCloseKeepsFirstResult fail on 9a0d580 and
// pass on its parent; TestFunctionReviewCloseDuringUnrelatedCapture fails
// on both (the unload's context synchronisation predates 9a0d580).

import (
	"runtime"
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

// frFailUnload makes the next unload report CUDA_ERROR_UNKNOWN (999)
// without leaking it in fakecuda: a module's or library's unload first
// synchronises the context (a library's, each context its kernels were
// launched in) and returns that error after unloading.
func frFailUnload(t *testing.T) { faketest.FailCalls(t, "cuCtxSynchronize", 999, 0, 1) }

// A failed unload is one failure, counted once in lifetime's stats and
// reported once by lifetime.Errors, whoever drops the module's last
// reference (the Object doc: "no failure is counted twice"). When that is
// a Function (held by Hold, Args, a graph or a launch in flight past
// Close), the module's Release counts the error and then the Function's
// Object, whose destroy is the module's Release and returns the same
// error, counts it again.
func TestFunctionReviewUnloadFailureCountedOnce(t *testing.T) {
	f := setup(t)
	c := f.ctx
	_ = lifetime.Errors()

	// The owner's Close drops the last reference: one error.
	mod, err := c.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	_, err = mod.Function("empty")
	require.NoError(t, err)
	before := lifetime.ReadStats().ReleaseErrors
	frFailUnload(t)
	assert.Error(t, mod.Close(), "the unload failed")
	assert.Equal(t, int64(1), lifetime.ReadStats().ReleaseErrors-before, "Close: one failed unload, counted once")
	assert.Len(t, lifetime.Errors(), 1, "Close: one failed unload, reported once")

	// A Function's holder drops the last reference: still one error.
	mod, err = c.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	fn, err := mod.Function("empty")
	require.NoError(t, err)
	ref, err := fn.Hold()
	require.NoError(t, err)
	require.NoError(t, mod.Close(), "the Hold keeps the module loaded")
	before = lifetime.ReadStats().ReleaseErrors
	frFailUnload(t)
	_ = ref.Release() // the unload failed (whether this says so is not checked)
	assert.Equal(t, int64(1), lifetime.ReadStats().ReleaseErrors-before, "Hold's release: one failed unload, counted once")
	assert.Len(t, lifetime.Errors(), 1, "Hold's release: one failed unload, reported once")
	fcall(t, "fake_fail_clear")
}

// Close is idempotent and keeps its first result (driver's package doc,
// lifetime I3): Closes racing, and any Close after them, return the same
// thing, here the unload's error. closeWithKernels runs outside any Once:
// a second Close finds no Functions left, drops the module's owner
// reference while the first is still closing the Functions, and returns
// nil before the unload ran although nothing holds the module; the first
// then drops the last reference through a Function, runs the unload and
// returns its error; every later Close returns the second one's nil.
func TestFunctionReviewConcurrentCloseKeepsFirstResult(t *testing.T) {
	f := setup(t)
	names := []string{"add4", "fill", "empty", "copyi"}
	// The window is a few atomic operations wide: race until a round shows
	// the bug, for at most 1.5 s (tens of thousands of rounds; about one in
	// 200 shows it).
	deadline := time.Now().Add(1500 * time.Millisecond)
	failed := false
	for round := 0; !failed && time.Now().Before(deadline); round++ {
		lib := round%2 == 1
		var closeFn func() error
		if lib {
			l, err := driver.LoadLibrary([]byte("FAKE library"))
			require.NoError(t, err)
			for _, n := range names {
				_, err := l.Function(n)
				require.NoError(t, err)
			}
			lf, err := l.Function("empty")
			require.NoError(t, err)
			require.NoError(t, f.s.Launch(lf, g1, b1), "the library's unload syncs f.ctx")
			closeFn = l.Close
		} else {
			m, err := f.ctx.LoadModule([]byte("FAKE module"))
			require.NoError(t, err)
			for _, n := range names {
				_, err := m.Function(n)
				require.NoError(t, err)
			}
			closeFn = m.Close
		}
		require.NoError(t, f.s.Synchronize())
		frFailUnload(t)
		var r [4]error
		var wg sync.WaitGroup
		var ready atomic.Int32
		var start atomic.Bool
		for i := range r {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Add(1)
				for !start.Load() {
					runtime.Gosched()
				}
				r[i] = closeFn()
			}()
		}
		for ready.Load() < int32(len(r)) {
			runtime.Gosched()
		}
		start.Store(true)
		wg.Wait()
		later := closeFn()
		for _, err := range append(r[:], later) {
			if err == nil {
				failed = true
				t.Errorf("library %v, round %d: the unload failed, yet concurrent Closes returned %v and a later Close %v", lib, round, r, later)
				break
			}
		}
		fcall(t, "fake_fail_clear")
	}
	_ = lifetime.Errors()
}

// A graph kernel node (module kernel) and a captured launch (library
// kernel) hold their Function, and through it the module or library, past
// Close: the graph and its executable still run with no bad use, and the
// module and the library are unloaded once the graph and the executable
// are gone (I4, I9).
func TestFunctionReviewGraphAndCaptureHoldThroughFunction(t *testing.T) {
	f := ltSetup(t)
	mods, libs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_libraries")
	buf, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	defer buf.Close()
	mod, err := f.ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	fill, err := mod.Function("fill")
	require.NoError(t, err)
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	lfill, err := lib.Function("fill")
	require.NoError(t, err)

	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	k, err := g.KernelWith(fill, graphCfg, buf, int32(10), int32(4))
	require.NoError(t, err)
	_, err = g.After(k).Capture(f.s, graph.CaptureThreadLocal, func(s *driver.Stream) error {
		return s.Launch(lfill, g1, b1, buf, int32(20), int32(2))
	})
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)

	require.NoError(t, mod.Close())
	require.NoError(t, lib.Close())
	_, err = fill.Hold()
	assert.ErrorIs(t, err, driver.ErrClosed, "the Function is closed with its module")
	assert.Equal(t, mods+1, fcall(t, "fake_live_modules"), "the graph holds the module")
	assert.Equal(t, libs+1, fcall(t, "fake_live_libraries"), "the graph holds the library")
	gcAll()
	require.NoError(t, exe.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	got, err := buf.ToHost()
	require.NoError(t, err)
	assert.Equal(t, []int32{20, 21, 12, 13}, got)
	require.NoError(t, g.Close())
	assert.Equal(t, mods+1, fcall(t, "fake_live_modules"), "the executable still holds the module")
	require.NoError(t, exe.Close())
	settle(t, func() bool {
		return fcall(t, "fake_live_modules") == mods && fcall(t, "fake_live_libraries") == libs
	}, "module and library unloaded after the graph and the executable")
}

// Args dropped without Close after their module was closed: the Args'
// cleanup releases the Function, whose release unloads the module; the
// Functions' lifetime objects are gone with it (I8, I11).
func TestFunctionReviewDroppedArgsUnloadClosedModule(t *testing.T) {
	f := ltSetup(t)
	mods := fcall(t, "fake_live_modules")
	lifetime.Flush()
	objects := lifetime.ReadStats().Objects
	buf, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	mod, err := f.ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	func() {
		fill, err := mod.Function("fill")
		require.NoError(t, err)
		for _, n := range []string{"add4", "empty", "copyi"} {
			_, err := mod.Function(n)
			require.NoError(t, err)
		}
		_, err = fill.NewArgs(buf, int32(1), int32(4)) // dropped
		require.NoError(t, err)
	}()
	require.NoError(t, mod.Close())
	require.NoError(t, buf.Close())
	assert.Equal(t, mods+1, fcall(t, "fake_live_modules"), "the Args hold the module")
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_modules") == mods }),
		"the Args' cleanup unloads the module")
	assert.True(t, ltSettle(func() bool { return lifetime.ReadStats().Objects <= objects }),
		"every lifetime object is gone: %d, was %d", lifetime.ReadStats().Objects, objects)
}

// Graph kernel nodes (from a Function and from Args), launches of Args, Raw
// and attribute reads racing Module.Close and Library.Close: each call
// succeeds or says closed, fakecuda sees no call naming an unloaded module
// or library, and both are unloaded once the graphs that hold their
// Functions are closed. (No capture here: an unload during any capture in
// the context breaks it, TestFunctionReviewCloseDuringUnrelatedCapture.)
func TestFunctionReviewGraphsRaceClose(t *testing.T) {
	f := ltSetup(t)
	mods, libs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_libraries")
	buf, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	defer buf.Close()
	var added, refused atomic.Int64
	for round := 0; round < 20; round++ {
		mod, err := f.ctx.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		lib, err := driver.LoadLibrary([]byte("FAKE library"))
		require.NoError(t, err)
		fill, err := mod.Function("fill")
		require.NoError(t, err)
		lfill, err := lib.Function("fill")
		require.NoError(t, err)
		streams := make([]*driver.Stream, 4)
		for i := range streams {
			streams[i], err = f.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err)
		}
		var mu sync.Mutex
		var graphs []*graph.Graph
		ltRaceN(4, 30, func(g int) {
			fn := fill
			if g%2 == 1 {
				fn = lfill
			}
			gr, err := graph.New(f.ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			graphs = append(graphs, gr)
			mu.Unlock()
			_, err = gr.KernelWith(fn, graphCfg, buf, int32(1), int32(4))
			ltClosedOr(t, "Graph.Kernel", err)
			if err == nil {
				added.Add(1)
			} else {
				refused.Add(1)
			}
			if a, err := fn.NewArgs(buf, int32(3), int32(4)); err == nil {
				ltClosedOr(t, "LaunchArgs", streams[g].LaunchArgs(a, g1, b1))
				_, err = gr.KernelArgs(a, graphCfg.Grid, graphCfg.Block)
				ltClosedOr(t, "Graph.KernelArgs", err)
				assert.NoError(t, a.Close())
			} else {
				ltClosedOr(t, "NewArgs", err)
			}
			ltClosedOr(t, "Raw", fn.Raw(func(uintptr) error { return nil }))
			_, err = fn.MaxThreadsPerBlock()
			ltClosedOr(t, "MaxThreadsPerBlock", err)
		}, func() {
			assert.NoError(t, mod.Close())
			assert.NoError(t, lib.Close())
		})
		for _, s := range streams {
			require.NoError(t, s.Synchronize())
		}
		for _, gr := range graphs {
			exe, err := gr.Instantiate()
			require.NoError(t, err)
			require.NoError(t, exe.Launch(f.s))
			require.NoError(t, f.s.Synchronize())
			require.NoError(t, exe.Close())
			require.NoError(t, gr.Close())
		}
		for _, s := range streams {
			require.NoError(t, s.Close())
		}
		settle(t, func() bool {
			return fcall(t, "fake_live_modules") == mods && fcall(t, "fake_live_libraries") == libs
		}, "module and library unloaded once the graphs are gone")
		ltNoBadUses(t)
	}
	t.Logf("kernel nodes added %d, refused (closed) %d", added.Load(), refused.Load())
}

// Closing a module or library while another stream of the same context is
// being captured: the unload synchronises the context (cuCtxSynchronize),
// which a capture in the context forbids (MODEL.md: it fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture), so
// it waits until the capture ends and then runs. Nothing of the module is
// in the capture.
func TestFunctionReviewCloseDuringUnrelatedCapture(t *testing.T) {
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
