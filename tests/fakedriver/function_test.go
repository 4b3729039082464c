//go:build linux

package fakedriver_test

import (
	"errors"
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
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// A module or library hands out one Function per name, each holding it
// loaded until it is closed and nothing holds the Function: a lookup that
// fails leaves nothing behind, Close unloads at once when nothing holds a
// Function, and a Function held by Args or a graph keeps it loaded (I2,
// I3).
func TestFunctionOnePerNameHoldsItsModule(t *testing.T) {
	f := ltSetup(t)
	mods, libs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_libraries")

	mod, err := f.ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	a, err := mod.Function("add4")
	require.NoError(t, err)
	b, err := mod.Function("add4")
	require.NoError(t, err)
	assert.Same(t, a, b, "one Function per name")
	other, err := mod.Function("fill")
	require.NoError(t, err)
	assert.NotSame(t, a, other)
	_, err = mod.Function("nope")
	assert.ErrorIs(t, err, driver.ErrNotFound)
	_, err = mod.Function("add4\x00x")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	require.NoError(t, mod.Close())
	assert.Equal(t, mods, fcall(t, "fake_live_modules"), "nothing held a Function: Close unloads")
	_, err = mod.Function("add4")
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = seam.Hold(a)
	assert.ErrorIs(t, err, driver.ErrClosed)
	assert.ErrorIs(t, f.s.Launch(a, g1, b1), driver.ErrClosed)
	assert.NoError(t, mod.Close(), "idempotent")

	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	la, err := lib.Function("fill")
	require.NoError(t, err)
	lb, err := lib.Function("fill")
	require.NoError(t, err)
	assert.Same(t, la, lb)
	_, err = lib.Function("nope")
	assert.ErrorIs(t, err, driver.ErrNotFound)
	buf, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	defer buf.Close()
	args, err := la.NewArgs(buf, int32(7), int32(4))
	require.NoError(t, err)
	ref, err := seam.Hold(la)
	require.NoError(t, err)
	require.NoError(t, lib.Close())
	assert.Equal(t, libs+1, fcall(t, "fake_live_libraries"), "the Args and the Hold keep the library")
	_, err = lib.Function("fill")
	assert.ErrorIs(t, err, driver.ErrClosed)
	require.NoError(t, f.s.LaunchArgs(args, g1, b1), "the Args still launch")
	require.NoError(t, args.Close())
	assert.Equal(t, libs+1, fcall(t, "fake_live_libraries"), "the Hold keeps the library")
	require.NoError(t, ref.Release())
	assert.Equal(t, libs, fcall(t, "fake_live_libraries"))
	require.NoError(t, f.s.Synchronize())
	ltNoBadUses(t)
}

// Lookups, launches and holds racing Module.Close: every call succeeds or
// says closed, none reaches the fake with an unloaded module, and the
// module is unloaded exactly once, after the last of them, whatever the
// order (a lookup that registers a Function after Close took the list
// would keep the module loaded for good).
func TestFunctionLookupRacesModuleClose(t *testing.T) {
	f := ltSetup(t)
	mods := fcall(t, "fake_live_modules")
	buf, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer buf.Close()
	for round := 0; round < 200; round++ {
		mod, err := f.ctx.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		var wg sync.WaitGroup
		var ok atomic.Int64
		start := make(chan struct{})
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < 20; i++ {
					name := [...]string{"add4", "fill", "empty"}[(g+i)%3]
					fn, err := mod.Function(name)
					if err != nil {
						if !errors.Is(err, driver.ErrClosed) {
							t.Errorf("Function(%s): %v", name, err)
						}
						return
					}
					var lerr error
					switch name {
					case "add4":
						lerr = f.s.Launch(fn, g1, b1, buf, uint32(1), uint32(2), uint32(3))
					case "fill":
						if r, err := seam.Hold(fn); err == nil {
							lerr = r.Release()
						} else {
							lerr = err
						}
					default:
						lerr = f.s.Launch(fn, g1, b1)
					}
					if lerr != nil && !errors.Is(lerr, driver.ErrClosed) {
						t.Errorf("%s: %v", name, lerr)
						return
					}
					ok.Add(1)
				}
			}()
		}
		close(start)
		if round%2 == 1 {
			for ok.Load() < int64(round%7) {
				// let some calls in before the close
			}
		}
		require.NoError(t, mod.Close())
		wg.Wait()
		require.Equal(t, mods, fcall(t, "fake_live_modules"), "round %d: the module is unloaded after the last call", round)
	}
	require.NoError(t, f.s.Synchronize())
	ltNoBadUses(t)
}

// failUnload makes the next unload report CUDA_ERROR_UNKNOWN (999)
// without leaking it in fakecuda: a module's or library's unload first
// synchronises the context (a library's, each context its kernels were
// launched in) and returns that error after unloading.
func failUnload(t *testing.T) { faketest.FailCalls(t, "cuCtxSynchronize", 999, 0, 1) }

// A failed unload is one failure, counted once in lifetime's stats and
// reported once by lifetime.Errors, whoever drops the module's last
// reference (the Object doc: "no failure is counted twice"). When that is
// a Function (held by Hold, Args, a graph or a launch in flight past
// Close), the module's Release counts the error, and the Function's
// Object, whose destroy is the module's Release and returns the same
// error, must not count it again.
func TestFunctionUnloadFailureCountedOnce(t *testing.T) {
	f := setup(t)
	c := f.ctx
	_ = lifetime.Errors()

	// The owner's Close drops the last reference: one error.
	mod, err := c.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	_, err = mod.Function("empty")
	require.NoError(t, err)
	before := lifetime.ReadStats().ReleaseErrors
	failUnload(t)
	assert.Error(t, mod.Close(), "the unload failed")
	assert.Equal(t, int64(1), lifetime.ReadStats().ReleaseErrors-before, "Close: one failed unload, counted once")
	assert.Len(t, lifetime.Errors(), 1, "Close: one failed unload, reported once")

	// A Function's holder drops the last reference: still one error.
	mod, err = c.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	fn, err := mod.Function("empty")
	require.NoError(t, err)
	ref, err := seam.Hold(fn)
	require.NoError(t, err)
	require.NoError(t, mod.Close(), "the Hold keeps the module loaded")
	before = lifetime.ReadStats().ReleaseErrors
	failUnload(t)
	_ = ref.Release() // the unload failed (whether this says so is not checked)
	assert.Equal(t, int64(1), lifetime.ReadStats().ReleaseErrors-before, "Hold's release: one failed unload, counted once")
	assert.Len(t, lifetime.Errors(), 1, "Hold's release: one failed unload, reported once")
	fcall(t, "fake_fail_clear")
}

// A failed release is counted once (lifetime I11), also when Args hold the
// last reference of a buffer whose free fails: the allocation's Object
// counts the failure, and the Args' Object, whose destroy returns the same
// error, must not count it again (an error passed on is marked with
// lifetime.Counted, as a Function's pass-on of its module's error is).
func TestArgsFailedFreeCountedOnce(t *testing.T) {
	f := setup(t)
	defer fcall(t, "fake_fail_clear")
	_ = lifetime.Errors()
	buf, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	args, err := f.fill.NewArgs(buf, int32(1), int32(4))
	require.NoError(t, err)
	require.NoError(t, buf.Close(), "the Args hold the memory")
	lifetime.Flush() // Close drops its reference on the release queue
	before := lifetime.ReadStats().ReleaseErrors
	faketest.FailCalls(t, "cuMemFree", 999, 0, 1)
	assert.Error(t, args.Close(), "the free failed")
	assert.Equal(t, int64(1), lifetime.ReadStats().ReleaseErrors-before, "one failed free, counted once")
	assert.Len(t, lifetime.Errors(), 1, "one failed free, reported once")
}

// Close is idempotent and keeps its first result (driver's package doc,
// lifetime I3): Closes racing, and any Close after them, return the same
// thing, here the unload's error. The case to rule out: a second Close
// that finds no Functions left, drops the module's owner reference while
// the first is still closing the Functions, and returns nil before the
// unload ran, while the first drops the last reference through a
// Function, runs the unload and returns its error.
func TestModuleConcurrentCloseKeepsFirstResult(t *testing.T) {
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
		failUnload(t)
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
func TestGraphAndCaptureHoldModuleThroughFunction(t *testing.T) {
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
	_, err = seam.Hold(fill)
	assert.ErrorIs(t, err, driver.ErrClosed, "the Function is closed with its module")
	assert.Equal(t, mods+1, fcall(t, "fake_live_modules"), "the graph holds the module")
	assert.Equal(t, libs+1, fcall(t, "fake_live_libraries"), "the graph holds the library")
	gcAll()
	require.NoError(t, exe.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	got, err := buf.ToHost(f.ctx.LegacyStream())
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
func TestDroppedArgsUnloadClosedModule(t *testing.T) {
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
// the context breaks it, TestModuleCloseDuringUnrelatedCapture.)
func TestFunctionGraphsRaceModuleClose(t *testing.T) {
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
