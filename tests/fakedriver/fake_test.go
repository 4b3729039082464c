//go:build linux

package fakedriver_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/internal/stress"
	"github.com/purecuda/cuda/lifetime"
)

func TestFakeDriverFlow(t *testing.T) {
	f := setup(t)
	path, err := driver.LibraryPath()
	require.NoError(t, err)
	assert.Equal(t, faketest.Path(), path)
	dev := f.ctx.Device()
	assert.Equal(t, "sm_90", dev.Arch())
	name, err := dev.Name()
	require.NoError(t, err)
	assert.Equal(t, "Fake GPU", name)

	buf, err := driver.Alloc[int32](f.ctx, 100)
	require.NoError(t, err)
	defer buf.Close()
	in := make([]int32, 100)
	for i := range in {
		in[i] = int32(i * i)
	}
	require.NoError(t, buf.CopyFromHost(f.ctx.LegacyStream(), in))
	out := make([]int32, 100)
	require.NoError(t, buf.CopyToHost(f.ctx.LegacyStream(), out))
	assert.Equal(t, in, out)
	require.NoError(t, buf.Memset32(f.ctx.LegacyStream(), 9))
	require.NoError(t, buf.CopyToHost(f.ctx.LegacyStream(), out[:2]))
	assert.Equal(t, []int32{9, 9}, out[:2])

	require.NoError(t, f.s.Launch(f.fill, driver.Grid(1), driver.Block(100), buf, int32(1000), int32(100)))
	require.NoError(t, buf.CopyToHostAsync(f.s, out))
	require.NoError(t, f.s.Synchronize())
	assert.Equal(t, int32(1000), out[0])
	assert.Equal(t, int32(1099), out[99])

	res, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer res.Close()
	args, err := f.add4.NewArgs(res, uint32(1), uint32(2), uint32(3))
	require.NoError(t, err)
	defer args.Close()
	require.NoError(t, f.s.LaunchArgs(args, driver.Grid(1), driver.Block(1)))
	require.NoError(t, driver.SetArg(args, 2, uint32(40)))
	require.NoError(t, f.s.LaunchArgs(args, driver.Grid(1), driver.Block(1)))
	u := make([]uint32, 1)
	require.NoError(t, res.CopyToHost(f.ctx.LegacyStream(), u))
	assert.Equal(t, uint32(44), u[0])

	// Errors the fake reports come back as driver errors.
	_, err = f.mod.Function("nope")
	assert.ErrorIs(t, err, driver.ErrNotFound)
	_, err = f.ctx.LoadModule([]byte("not ptx"))
	var me *driver.ModuleError
	assert.ErrorAs(t, err, &me)
	assert.ErrorIs(t, err, driver.ErrInvalidPtx)
	_, err = driver.Alloc[byte](f.ctx, 1<<41)
	assert.ErrorIs(t, err, driver.ErrOutOfMemory)
	assert.ErrorContains(t, f.s.Launch(f.add4, driver.Grid(1), driver.Block(1), res, uint32(1)), "takes 4 arguments, got 2")
	assert.NoError(t, f.ctx.Synchronize())
}

// TestFakeDetectsMissingBinding is the control for the stress test: on a
// thread with no current context, fakecuda refuses context-bound calls.
func TestFakeDetectsMissingBinding(t *testing.T) {
	setup(t)
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // this goroutine's thread exits with it: a fresh thread
		var p cu.CUdeviceptr
		_ = cu.CtxSetCurrent(0)
		done <- cu.MemAlloc(&p, 16)
	}()
	assert.ErrorIs(t, <-done, driver.ErrInvalidContext)
}

// TestFakeRawHandles: Raw hands out the handles while their owners are open
// and refuses once they are closed.
func TestFakeRawHandles(t *testing.T) {
	f := setup(t)
	var fh, sh uintptr
	require.NoError(t, f.add4.Raw(func(h uintptr) error { fh = h; return nil }))
	require.NoError(t, f.s.Raw(func(h uintptr) error { sh = h; return nil }))
	assert.NotZero(t, fh)
	assert.NotZero(t, sh)
	assert.ErrorIs(t, f.s.Raw(func(uintptr) error { return driver.ErrNotFound }), driver.ErrNotFound, "f's error comes back")

	mod, err := f.ctx.LoadModule([]byte("FAKE"))
	require.NoError(t, err)
	fill, err := mod.Function("fill")
	require.NoError(t, err)
	require.NoError(t, mod.Close())
	assert.ErrorIs(t, fill.Raw(func(uintptr) error { return nil }), driver.ErrClosed)
	s, err := f.ctx.NewStream(driver.StreamDefault)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.ErrorIs(t, s.Raw(func(uintptr) error { return nil }), driver.ErrClosed)
}

// TestFakeLeavesThreadContext: a bound call restores the thread's context,
// so destroying a context elsewhere cannot break later work on the thread.
func TestFakeLeavesThreadContext(t *testing.T) {
	f := setup(t)
	assert.NoError(t, stress.LeftCurrent(f.ctx, f.s))
}

// TestFakeMigrationStress: goroutines over two contexts, with scheduler, GC
// and thread-locking churn; any call that reached fakecuda without its
// context current fails with CUDA_ERROR_INVALID_CONTEXT.
func TestFakeMigrationStress(t *testing.T) {
	f := setup(t)
	created, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer created.Close()
	cmod, err := created.LoadModule([]byte("FAKE"))
	require.NoError(t, err)
	defer cmod.Close()
	cfill, err := cmod.Function("fill")
	require.NoError(t, err)
	liveBefore := fcall(t, "fake_live_allocations")

	const workers, ops, n = 32, 2000, 64
	require.NoError(t, stress.Run([]stress.Target{{Ctx: f.ctx, Fill: f.fill}, {Ctx: created, Fill: cfill}}, workers, ops, n))
	lifetime.Flush() // Buffer.Close hands the frees to the release queue
	assert.Equal(t, liveBefore, fcall(t, "fake_live_allocations"), "every buffer was freed")
}

func TestFakeHostFunctions(t *testing.T) {
	f := setup(t)
	before := lifetime.ReadStats().Callbacks
	callsBefore := fcall(t, "fake_host_calls")
	var n atomic.Int64
	for i := 0; i < 300; i++ {
		require.NoError(t, f.s.LaunchHostFunc(func() { n.Add(1) }))
	}
	require.NoError(t, f.s.Synchronize())
	assert.EqualValues(t, 300, n.Load())
	assert.EqualValues(t, 300, fcall(t, "fake_host_calls")-callsBefore, "each ran on a fakecuda thread")
	assert.Equal(t, before, lifetime.ReadStats().Callbacks, "and was released")

	require.NoError(t, f.s.LaunchHostFunc(func() { panic("from a C thread") }))
	err := f.s.Synchronize()
	assert.ErrorContains(t, err, "host function panicked: from a C thread")
	assert.NoError(t, f.s.Synchronize())
	// Two panics before one Synchronize: it returns both, the next none.
	require.NoError(t, f.s.LaunchHostFunc(func() { panic("first") }))
	require.NoError(t, f.s.LaunchHostFunc(func() { panic("second") }))
	err = f.s.Synchronize()
	assert.ErrorContains(t, err, "host function panicked: first")
	assert.ErrorContains(t, err, "host function panicked: second")
	assert.NoError(t, f.s.Synchronize())
	assert.Equal(t, before, lifetime.ReadStats().Callbacks)
}

// A host function queued before Close that panics after it: the closed
// stream's Synchronize returns ErrClosed alone, and the context's next
// Synchronize (which waits for the host function) returns the panic, once.
func TestFakeHostFunctionPanicAfterClose(t *testing.T) {
	f := setup(t)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, s.LaunchHostFunc(func() { panic("late") }))
	require.NoError(t, s.Close())
	err = f.ctx.Synchronize()
	assert.ErrorContains(t, err, "host function panicked: late")
	assert.NoError(t, f.ctx.Synchronize(), "returned once")
	err = s.Synchronize()
	assert.ErrorIs(t, err, driver.ErrClosed)
	assert.NotContains(t, err.Error(), "panicked")
}

func TestFakeFreesAndCleanup(t *testing.T) {
	f := setup(t)
	base := fcall(t, "fake_live_allocations")
	var keep []*driver.Buffer[float64]
	for i := 0; i < 10; i++ {
		b, err := driver.Alloc[float64](f.ctx, 8)
		require.NoError(t, err)
		keep = append(keep, b)
	}
	assert.Equal(t, base+10, fcall(t, "fake_live_allocations"))
	for _, b := range keep[:5] {
		require.NoError(t, b.Close())
	}
	lifetime.Flush() // Close hands the free to the release queue
	assert.Equal(t, base+5, fcall(t, "fake_live_allocations"))
	// A hold (a graph node's) keeps the memory after Close.
	ref, err := seam.Hold(keep[5])
	require.NoError(t, err)
	require.NoError(t, keep[5].Close())
	lifetime.Flush()
	assert.Equal(t, base+5, fcall(t, "fake_live_allocations"))
	require.NoError(t, ref.Release())
	assert.Equal(t, base+4, fcall(t, "fake_live_allocations"))
	// The rest are forgotten: the cleanup frees them.
	keep = nil
	deadline := time.Now().Add(30 * time.Second)
	for fcall(t, "fake_live_allocations") > base && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	assert.Equal(t, base, fcall(t, "fake_live_allocations"))

	// A created context is destroyed when its last child closes.
	ctxBase := fcall(t, "fake_live_contexts")
	c, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	b, err := driver.Alloc[int32](c, 1)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.Equal(t, ctxBase+1, fcall(t, "fake_live_contexts"), "kept alive by the buffer")
	require.NoError(t, b.Close())
	lifetime.Flush()
	assert.Equal(t, ctxBase, fcall(t, "fake_live_contexts"))
}

// Args keep their kernel's module loaded and their buffers allocated until
// they are closed (or forgotten) and no launch with them is in progress.
func TestFakeArgsHoldModuleAndBuffers(t *testing.T) {
	f := setup(t)
	mods, allocs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_allocations")
	mod, err := f.ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	add4, err := mod.Function("add4")
	require.NoError(t, err)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	args, err := add4.NewArgs(out, uint32(1), uint32(2), uint32(3))
	require.NoError(t, err)
	require.NoError(t, mod.Close())
	require.NoError(t, out.Close())
	lifetime.Flush() // the buffer's Close drops its reference on the release queue
	assert.Equal(t, mods+1, fcall(t, "fake_live_modules"), "the Args keep the module")
	assert.Equal(t, allocs+1, fcall(t, "fake_live_allocations"), "the Args keep the buffer")
	_, err = mod.Function("add4")
	assert.ErrorIs(t, err, driver.ErrClosed)
	assert.ErrorIs(t, f.s.Launch(add4, driver.Grid(1), driver.Block(1), uint32(0), uint32(1), uint32(2), uint32(3)), driver.ErrClosed)
	g, b := driver.Grid(1), driver.Block(1)
	require.NoError(t, f.s.LaunchArgs(args, g, b), "the Args still launch")
	require.NoError(t, f.s.Synchronize())
	require.NoError(t, args.Close())
	assert.Equal(t, mods, fcall(t, "fake_live_modules"))
	assert.Equal(t, allocs, fcall(t, "fake_live_allocations"))
	assert.ErrorIs(t, f.s.LaunchArgs(args, g, b), driver.ErrClosed)
	assert.NoError(t, args.Close(), "Close is idempotent")

	// Closing Args while goroutines launch with them: every launch succeeds
	// or says closed, and the module is unloaded once, after the last.
	mod, err = f.ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	empty, err := mod.Function("empty")
	require.NoError(t, err)
	args, err = empty.NewArgs()
	require.NoError(t, err)
	require.NoError(t, mod.Close())
	var wg sync.WaitGroup
	var launched, refused atomic.Int64
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 2000; j++ {
				switch err := f.s.LaunchArgs(args, g, b); {
				case err == nil:
					launched.Add(1)
				case errors.Is(err, driver.ErrClosed):
					refused.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(time.Millisecond)
	require.NoError(t, args.Close())
	wg.Wait()
	assert.Equal(t, int64(8*2000), launched.Load()+refused.Load())
	assert.Equal(t, mods, fcall(t, "fake_live_modules"))
	t.Logf("%d launches before the close, %d refused after", launched.Load(), refused.Load())

	// Forgotten Args release the module through their cleanup.
	mod, err = f.ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	empty, err = mod.Function("empty")
	require.NoError(t, err)
	_, err = empty.NewArgs()
	require.NoError(t, err)
	require.NoError(t, mod.Close())
	deadline := time.Now().Add(30 * time.Second)
	for fcall(t, "fake_live_modules") > mods && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	assert.Equal(t, mods, fcall(t, "fake_live_modules"))
}

func TestFakeZeroAllocHotPaths(t *testing.T) {
	if gputest.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	f := setup(t)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	args, err := f.add4.NewArgs(out, uint32(1), uint32(2), uint32(3))
	require.NoError(t, err)
	defer args.Close()
	ev, err := f.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer ev.Close()
	g, b := driver.Grid(1), driver.Block(1)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = f.s.LaunchArgs(args, g, b) }), "LaunchArgs")
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = f.s.Launch(f.empty, g, b) }), "Launch without arguments")
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = f.s.Launch(f.add4, g, b, out, uint32(1), uint32(2), uint32(3)) }), "Launch with constant arguments")
	fillOut, err := driver.Alloc[int32](f.ctx, 64)
	require.NoError(t, err)
	defer fillOut.Close()
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = f.s.Launch(f.fill, g, b, fillOut, int32(1), int32(64)) }), "Launch with a buffer")
	small := driver.LaunchConfig{Grid: g, Block: b, SharedMem: 16}
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = f.s.LaunchWith(f.fill, small, fillOut, int32(1), int32(64)) }),
		"LaunchWith with a buffer (the small block: a buffer of another context would be held, one of the stream's costs nothing)")
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = ev.Record(f.s) }), "Event.Record")
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = f.s.Synchronize() }), "Stream.Synchronize")
	nop := func() {}
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = f.s.LaunchHostFunc(nop) }), "Stream.LaunchHostFunc (it holds its stream without a closure)")
	require.NoError(t, f.s.Synchronize())
}

// Benchmarks of the binding's own CPU cost: fakecuda's functions return at
// once, so these time purecuda, not CUDA. With FAKE_EVICT_KB set, each
// launch also writes that much memory of fakecuda's, to see what the code
// around a launch costs once libcuda has evicted it from the caches.

// benchLoop runs call b.N times with allocations reported; setup gets the
// fixture and a one-element output buffer and returns the call.
func benchLoop(b *testing.B, setupCall func(f *fixture, out *driver.Buffer[uint32]) func() error) {
	f := setup(b)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(b, err)
	defer out.Close()
	call := setupCall(f, out)
	b.ReportAllocs()
	for b.Loop() {
		_ = call()
	}
}

// fakeArgs makes Args for the benchmark's lifetime.
func fakeArgs(b *testing.B, fn *driver.Function, args ...any) *driver.Args {
	a, err := fn.NewArgs(args...)
	require.NoError(b, err)
	b.Cleanup(func() { a.Close() })
	return a
}

func BenchmarkFakeLaunchArgs(b *testing.B) {
	benchLoop(b, func(f *fixture, _ *driver.Buffer[uint32]) func() error {
		a := fakeArgs(b, f.empty)
		return func() error { return f.s.LaunchArgs(a, g1, b1) }
	})
}

func BenchmarkFakeLaunch(b *testing.B) {
	benchLoop(b, func(f *fixture, _ *driver.Buffer[uint32]) func() error {
		return func() error { return f.s.Launch(f.empty, g1, b1) }
	})
}

func BenchmarkFakeSynchronize(b *testing.B) {
	benchLoop(b, func(f *fixture, _ *driver.Buffer[uint32]) func() error { return f.s.Synchronize })
}

func BenchmarkFakeContextBound(b *testing.B) {
	benchLoop(b, func(f *fixture, _ *driver.Buffer[uint32]) func() error {
		return func() error { _, err := f.ctx.Limit(driver.LimitStackSize); return err }
	})
}

func BenchmarkFakeLaunch4Args(b *testing.B) {
	benchLoop(b, func(f *fixture, out *driver.Buffer[uint32]) func() error {
		return func() error { return f.s.Launch(f.add4, g1, b1, out, uint32(1), uint32(2), uint32(3)) }
	})
}

func BenchmarkFakeLaunchArgs4(b *testing.B) {
	benchLoop(b, func(f *fixture, out *driver.Buffer[uint32]) func() error {
		a := fakeArgs(b, f.add4, out, uint32(1), uint32(2), uint32(3))
		return func() error { return f.s.LaunchArgs(a, g1, b1) }
	})
}

// BenchmarkFakeLaunchRaw4 is the floor: the generated table's call with
// arguments prepared by hand.
func BenchmarkFakeLaunchRaw4(b *testing.B) {
	benchLoop(b, func(f *fixture, out *driver.Buffer[uint32]) func() error {
		var fh, sh uintptr
		require.NoError(b, f.add4.Raw(func(h uintptr) error { fh = h; return nil }))
		require.NoError(b, f.s.Raw(func(h uintptr) error { sh = h; return nil }))
		p, x, y, z := uint64(out.Ptr()), uint32(1), uint32(2), uint32(3)
		params := []unsafe.Pointer{unsafe.Pointer(&p), unsafe.Pointer(&x), unsafe.Pointer(&y), unsafe.Pointer(&z)}
		return func() error {
			return cu.LaunchKernel(cu.CUfunction(fh), 1, 1, 1, 1, 1, 1, 0, cu.CUstream(sh), &params[0], nil)
		}
	})
}

func BenchmarkFakeEventRecord(b *testing.B) {
	benchLoop(b, func(f *fixture, _ *driver.Buffer[uint32]) func() error {
		e, err := f.ctx.NewEvent(driver.EventDisableTiming)
		require.NoError(b, err)
		b.Cleanup(func() { e.Close() })
		return func() error { return e.Record(f.s) }
	})
}
