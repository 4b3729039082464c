//go:build linux

package fakedriver_test

// Regression tests for issue 9's fixes 1–16 (lifetime/DESIGN.md I1–I11),
// one test per fix, named after it, against fakecuda: the fake counts
// every call that names freed device memory (fake_bad_ptr_uses) or a
// destroyed handle (fake_bad_handle_uses), slows copies and kernels down so
// that a Close can land while they run, injects failures and sticky
// errors. Each test says what it proves and why it failed before the fix
// (commit b286203). Fix 11 (nil and zero values) is driver/zero_test.go;
// fix 13 needs a GPU (driver/lifetime_gpu_test.go).

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
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
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nvrtc"
)

// CUresult codes the tests inject.
const (
	ltOutOfMemory  = 2   // CUDA_ERROR_OUT_OF_MEMORY
	ltLaunchFailed = 719 // CUDA_ERROR_LAUNCH_FAILED, a sticky error
)

// ---- fix 1 ----

// TestFix01_ContextCloseNeverRevives: calls racing Context.Close never take
// a reference after the last one is gone (I1), so the context is released
// exactly once. Before the fix Context.acquire checked closed and then
// added: a call in between revived the context, and its release destroyed
// it again, a second cuDevicePrimaryCtxRelease that took the reference of
// another owner of the same primary context; fakecuda counts the
// over-release as a bad handle use and the bystander's calls fail.
func TestFix01_ContextCloseNeverRevives(t *testing.T) {
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
				if r, err := victim.Hold(); err == nil {
					assert.NoError(t, r.Release())
				} else {
					ltClosedOr(t, "Hold", err)
				}
			}, func() { assert.NoError(t, victim.Close()) })
			// The bystander, f.ctx, still holds the primary context.
			_, _, err = f.ctx.MemGetInfo()
			require.NoError(t, err, "%s round %d: a Close released the primary context too often", name, round)
			require.Equal(t, contexts, fcall(t, "fake_live_contexts"), "%s round %d", name, round)
			if fcall(t, "fake_bad_handle_uses") != 0 {
				t.Fatalf("%s round %d: a context was released twice: %s", name, round, faketest.LastBadUse(t))
			}
		}
	}
}

// ---- fix 2 ----

// TestFix02_BufferMethodsHoldMemory: every Buffer method holds the memory
// while CUDA uses it (I4), so a Close racing a slowed copy frees nothing
// under it (I3). Before the fix only Launch held a reference: Close freed
// the memory while cuMemcpy* still ran, which fakecuda reports as "freed
// during the copy".
func TestFix02_BufferMethodsHoldMemory(t *testing.T) {
	f := ltSetup(t)
	allocs := fcall(t, "fake_live_allocations")
	src, err := driver.Alloc[int32](f.ctx, 4096)
	require.NoError(t, err)
	defer src.Close()
	pinned, err := driver.AllocHost[int32](f.ctx, 4096, driver.HostAllocDefault)
	require.NoError(t, err)
	defer pinned.Close()
	host := make([]int32, 4096)
	ops := map[string]func(b *driver.Buffer[int32]) error{
		"CopyFromHost":        func(b *driver.Buffer[int32]) error { return b.CopyFromHost(host) },
		"CopyToHost":          func(b *driver.Buffer[int32]) error { return b.CopyToHost(make([]int32, 4096)) },
		"CopyFrom":            func(b *driver.Buffer[int32]) error { return b.CopyFrom(src) },
		"CopyFrom (as src)":   func(b *driver.Buffer[int32]) error { return src.CopyFrom(b) },
		"CopyFromHostAsync":   func(b *driver.Buffer[int32]) error { return b.CopyFromHostAsync(f.s, host) },
		"CopyToHostAsync":     func(b *driver.Buffer[int32]) error { return b.CopyToHostAsync(f.s, make([]int32, 4096)) },
		"CopyFromAsync":       func(b *driver.Buffer[int32]) error { return b.CopyFromAsync(f.s, src) },
		"CopyFromAsync (src)": func(b *driver.Buffer[int32]) error { return src.CopyFromAsync(f.s, b) },
		"CopyFromPinnedAsync": func(b *driver.Buffer[int32]) error { return b.CopyFromPinnedAsync(f.s, pinned) },
		"CopyToPinnedAsync":   func(b *driver.Buffer[int32]) error { return b.CopyToPinnedAsync(f.s, pinned) },
		"ToHost":              func(b *driver.Buffer[int32]) error { _, err := b.ToHost(); return err },
	}
	fcall(t, "fake_set_copy_delay_us", 3000)
	for name, op := range ops {
		for i := 0; i < 3; i++ {
			b, err := driver.Alloc[int32](f.ctx, 4096)
			require.NoError(t, err)
			done := make(chan error)
			go func() { done <- op(b) }()
			time.Sleep(time.Duration(i) * time.Millisecond) // before, at and during the copy
			assert.NoError(t, b.Close())
			ltClosedOr(t, name, <-done)
		}
		require.NoError(t, f.s.Synchronize())
	}
	fcall(t, "fake_set_copy_delay_us", 0)
	require.NoError(t, src.Close())
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_allocations") == allocs }), "every buffer was freed")
	ltNoBadUses(t)
}

// TestFix02_LastUseIsHeld: when a copy is the caller's last use of a
// Buffer, the cleanup that frees an unreachable Buffer cannot free the
// memory under the copy: the call holds it (I4). Before the fix the
// Buffer could be collected while the slowed copy ran, and its cleanup
// freed the memory mid-copy.
func TestFix02_LastUseIsHeld(t *testing.T) {
	f := ltSetup(t)
	allocs := fcall(t, "fake_live_allocations")
	stop := make(chan struct{})
	var gcs sync.WaitGroup
	gcs.Add(1)
	go func() {
		defer gcs.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
				lifetime.Flush()
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	fcall(t, "fake_set_copy_delay_us", 5000)
	host := make([]int32, 1024)
	for i := 0; i < 10; i++ {
		func() {
			b, err := driver.Alloc[int32](f.ctx, 1024)
			require.NoError(t, err)
			if i%2 == 0 {
				assert.NoError(t, b.CopyFromHost(host)) // b is unreachable from here on
			} else {
				assert.NoError(t, b.CopyToHostAsync(f.s, host))
			}
		}()
	}
	require.NoError(t, f.s.Synchronize())
	fcall(t, "fake_set_copy_delay_us", 0)
	closeStop(stop)
	gcs.Wait()
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_allocations") == allocs }), "the cleanups freed every buffer")
	ltNoBadUses(t)
}

// ---- fix 3 ----

// TestFix03_HostSliceKeepsManagedMemory: once a managed Buffer has handed
// out a host slice, its cleanup no longer frees the memory: a Go slice of
// CUDA memory cannot keep the Buffer reachable. Before the fix the Buffer
// could be dropped while the slice was still in use; the cleanup freed the
// memory and the next access through the slice read freed memory (on a
// GPU, a fault).
func TestFix03_HostSliceKeepsManagedMemory(t *testing.T) {
	f := ltSetup(t)
	allocs := fcall(t, "fake_live_allocations")
	var hs []int32
	func() {
		b, err := driver.AllocManaged[int32](f.ctx, 256)
		require.NoError(t, err)
		hs, err = b.HostSlice()
		require.NoError(t, err)
		hs[0] = 7
	}()
	for i := 0; i < 20; i++ {
		runtime.GC()
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, allocs+1, fcall(t, "fake_live_allocations"), "the memory behind a host slice stays allocated")
	hs[255] = 9
	assert.Equal(t, int32(7), hs[0], "the slice still reads what was written (freed fake memory reads 0xdddddddd)")
	// Free it by hand so the counters balance: nothing else can now.
	p := uintptr(unsafe.Pointer(&hs[0]))
	require.NoError(t, f.ctx.Raw(func(uintptr) error { return cu.MemFree(cu.CUdeviceptr(p)) }))
	assert.Equal(t, allocs, fcall(t, "fake_live_allocations"))
}

// ---- fix 4 ----

// TestFix04_StreamCloseRacesCalls: Stream.Close racing every call on the
// stream destroys it only after the last call returns (I3): no call reaches
// fakecuda with the destroyed handle. Before the fix Close destroyed the
// stream at once and calls that had passed the open check named a dead
// handle (on the H200, SIGSEGV).
func TestFix04_StreamCloseRacesCalls(t *testing.T) {
	f := ltSetup(t)
	streams := fcall(t, "fake_live_streams")
	buf, err := driver.Alloc[int32](f.ctx, 64)
	require.NoError(t, err)
	defer buf.Close()
	ev, err := f.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer ev.Close()
	args, err := f.fill.NewArgs(buf, int32(1), int32(64))
	require.NoError(t, err)
	defer args.Close()
	host := make([]int32, 64)
	for round := 0; round < 40; round++ {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		ltRace(8, func(g int) {
			var err error
			switch g {
			case 0:
				err = s.Launch(f.fill, g1, b1, buf, int32(2), int32(64))
			case 1:
				err = s.LaunchArgs(args, g1, b1)
			case 2:
				err = ev.Record(s)
			case 3:
				err = s.WaitEvent(ev)
			case 4:
				err = s.LaunchHostFunc(func() {})
			case 5:
				err = buf.CopyToHostAsync(s, host[:8])
			case 6:
				err = buf.Memset32Async(s, 3)
			case 7:
				if _, err = s.Query(); err == nil {
					if _, err = s.Priority(); err == nil {
						err = s.Synchronize()
					}
				}
			}
			ltClosedOr(t, "stream call", err)
		}, func() { assert.NoError(t, s.Close()) })
	}
	require.NoError(t, f.ctx.Synchronize())
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_streams") == streams }), "every stream destroyed")
	ltNoBadUses(t)
}

// TestFix04_EventCloseRacesCalls: the same for Event.Close.
func TestFix04_EventCloseRacesCalls(t *testing.T) {
	f := ltSetup(t)
	events := fcall(t, "fake_live_events")
	for round := 0; round < 200; round++ {
		e, err := f.ctx.NewEvent(driver.EventDefault)
		require.NoError(t, err)
		require.NoError(t, e.Record(f.s))
		ltRace(8, func(g int) {
			var err error
			switch g % 5 {
			case 0:
				err = e.Record(f.s)
			case 1:
				_, err = e.Query()
			case 2:
				err = e.Synchronize()
			case 3:
				err = f.s.WaitEvent(e)
			case 4:
				_, err = driver.Elapsed(e, e)
			}
			ltClosedOr(t, "event call", err)
		}, func() { assert.NoError(t, e.Close()) })
	}
	require.NoError(t, f.s.Synchronize())
	assert.Equal(t, events, fcall(t, "fake_live_events"))
	ltNoBadUses(t)
}

// TestFix04_MemPoolCloseRacesCalls: the same for MemPool.Close, with
// buffers allocated from the pool holding it until they are freed.
func TestFix04_MemPoolCloseRacesCalls(t *testing.T) {
	f := ltSetup(t)
	pools, allocs := fcall(t, "fake_live_pools"), fcall(t, "fake_live_allocations")
	for round := 0; round < 40; round++ {
		p, err := f.ctx.NewMemPool()
		require.NoError(t, err)
		ltRace(8, func(g int) {
			var err error
			switch g % 4 {
			case 0:
				_, err = p.Attribute(driver.PoolAttrReleaseThreshold)
			case 1:
				err = p.SetAttribute(driver.PoolAttrReleaseThreshold, 1<<20)
			case 2:
				err = p.Trim(0)
			case 3:
				var b *driver.Buffer[int32]
				if b, err = driver.AllocFromPool[int32](f.s, p, 16); err == nil {
					err = b.Memset32Async(f.s, 1)
					assert.NoError(t, b.Close())
				}
			}
			ltClosedOr(t, "pool call", err)
		}, func() { assert.NoError(t, p.Close()) })
	}
	require.NoError(t, f.s.Synchronize())
	assert.Equal(t, pools, fcall(t, "fake_live_pools"))
	assert.Equal(t, allocs, fcall(t, "fake_live_allocations"))
	ltNoBadUses(t)
}

// TestFix04_HostBufferCloseWaitsForCopies: HostBuffer.Close frees the
// pinned memory only after the copies queued to or from it have run.
// Before the fix cuMemFreeHost ran at once and the slowed copies then used
// freed host memory.
func TestFix04_HostBufferCloseWaitsForCopies(t *testing.T) {
	f := ltSetup(t)
	hosts := fcall(t, "fake_live_host_allocs")
	buf, err := driver.Alloc[int32](f.ctx, 1024)
	require.NoError(t, err)
	defer buf.Close()
	fcall(t, "fake_set_copy_delay_us", 2000)
	for round := 0; round < 10; round++ {
		h, err := driver.AllocHost[int32](f.ctx, 1024, driver.HostAllocDefault)
		require.NoError(t, err)
		require.NoError(t, buf.CopyToPinnedAsync(f.s, h))
		require.NoError(t, buf.CopyFromPinnedAsync(f.s, h))
		ltRaceN(4, 3, func(g int) {
			if g%2 == 0 {
				ltClosedOr(t, "CopyToPinnedAsync", buf.CopyToPinnedAsync(f.s, h))
			} else {
				ltClosedOr(t, "CopyFromPinnedAsync", buf.CopyFromPinnedAsync(f.s, h))
			}
		}, func() { assert.NoError(t, h.Close()) })
	}
	require.NoError(t, f.s.Synchronize())
	fcall(t, "fake_set_copy_delay_us", 0)
	assert.Equal(t, hosts, fcall(t, "fake_live_host_allocs"))
	ltNoBadUses(t)
}

// ---- fix 5 ----

// TestFix05_StreamOrderedFreeAfterStreamClose: memory allocated in stream
// order is freed in order on its stream, which the buffer holds, even when
// the stream was closed first. Before the fix a closed stream meant plain
// cuMemFree, which does not wait for queued work on stream-ordered memory:
// the slowed kernel still queued then wrote freed memory.
func TestFix05_StreamOrderedFreeAfterStreamClose(t *testing.T) {
	f := ltSetup(t)
	allocs, streams := fcall(t, "fake_live_allocations"), fcall(t, "fake_live_streams")
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	b, err := driver.AllocAsync[int32](s, 256)
	require.NoError(t, err)
	fcall(t, "fake_set_kernel_delay_us", 20000)
	require.NoError(t, s.Launch(f.fill, g1, b1, b, int32(5), int32(256)))
	require.NoError(t, s.Close())
	require.NoError(t, b.Close())
	require.NoError(t, f.ctx.Synchronize())
	fcall(t, "fake_set_kernel_delay_us", 0)
	assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 10000))
	assert.Equal(t, allocs, fcall(t, "fake_live_allocations"), "the buffer was freed")
	assert.Equal(t, streams, fcall(t, "fake_live_streams"), "and then its stream destroyed")
	ltNoBadUses(t)
}

// TestFix05_StreamOrderedFreeWaitsForOtherStreams: a stream-ordered buffer
// used on another stream is freed only after that stream's work: the free
// on the allocating stream waits for it. Before the fix cuMemFreeAsync on
// the allocating stream ran at once, while a slowed kernel, copy or memset
// on the other stream still used the memory.
func TestFix05_StreamOrderedFreeWaitsForOtherStreams(t *testing.T) {
	f := ltSetup(t)
	allocs := fcall(t, "fake_live_allocations")
	other, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer other.Close()
	pool, err := f.ctx.NewMemPool()
	require.NoError(t, err)
	defer pool.Close()
	plain, err := driver.Alloc[int32](f.ctx, 256)
	require.NoError(t, err)
	defer plain.Close()
	uses := map[string]func(b *driver.Buffer[int32]) error{
		"Launch": func(b *driver.Buffer[int32]) error {
			return other.Launch(f.fill, g1, b1, b, int32(1), int32(256))
		},
		"LaunchArgs": func(b *driver.Buffer[int32]) error {
			a, err := f.fill.NewArgs(b, int32(1), int32(256))
			if err != nil {
				return err
			}
			defer a.Close()
			return other.LaunchArgs(a, g1, b1)
		},
		"CopyToHostAsync": func(b *driver.Buffer[int32]) error { return b.CopyToHostAsync(other, make([]int32, 256)) },
		"CopyFromAsync":   func(b *driver.Buffer[int32]) error { return b.CopyFromAsync(other, plain) },
		"CopyFromAsync (as src)": func(b *driver.Buffer[int32]) error {
			return plain.CopyFromAsync(other, b)
		},
		"Memset32Async": func(b *driver.Buffer[int32]) error { return b.Memset32Async(other, 4) },
	}
	for name, use := range uses {
		for _, fromPool := range []bool{false, true} {
			var b *driver.Buffer[int32]
			if fromPool {
				b, err = driver.AllocFromPool[int32](f.s, pool, 256)
			} else {
				b, err = driver.AllocAsync[int32](f.s, 256)
			}
			require.NoError(t, err)
			require.NoError(t, f.s.Synchronize()) // the allocation has happened
			fcall(t, "fake_set_kernel_delay_us", 10000)
			fcall(t, "fake_set_copy_delay_us", 10000)
			// Something slow first, so that the use is still queued on
			// other when the buffer is closed.
			require.NoError(t, other.Launch(f.empty, g1, b1))
			require.NoError(t, use(b), name)
			require.NoError(t, b.Close())
			require.NoError(t, other.Synchronize())
			require.NoError(t, f.s.Synchronize())
			fcall(t, "fake_set_kernel_delay_us", 0)
			fcall(t, "fake_set_copy_delay_us", 0)
			if fcall(t, "fake_bad_ptr_uses") != 0 {
				t.Errorf("%s (pool %v): the memory was freed while the other stream used it: %s", name, fromPool, faketest.LastBadUse(t))
				fcall(t, "fake_reset_counters")
			}
		}
	}
	assert.Equal(t, allocs+1, fcall(t, "fake_live_allocations"), "only plain is left")
	ltNoBadUses(t)
}

// TestFix05_FreeRacingStreamClose: Buffer.Close racing Stream.Close never
// loses the free. Before the fix the release checked that the stream was
// open and then freed on it: a Stream.Close in between made
// cuMemFreeAsync fail on a dead handle, and the memory leaked.
func TestFix05_FreeRacingStreamClose(t *testing.T) {
	f := ltSetup(t)
	allocs, streams := fcall(t, "fake_live_allocations"), fcall(t, "fake_live_streams")
	lifetime.Errors()
	relErrs := lifetime.ReadStats().ReleaseErrors
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16)) // preemption anywhere (see fix 1)
	for i := 0; i < 10000; i++ {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		b, err := driver.AllocAsync[int32](s, 64)
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); assert.NoError(t, s.Close()) }()
		go func() { defer wg.Done(); assert.NoError(t, b.Close()) }()
		wg.Wait()
	}
	require.NoError(t, f.ctx.Synchronize())
	assert.True(t, ltSettle(func() bool {
		return fcall(t, "fake_live_allocations") == allocs && fcall(t, "fake_live_streams") == streams
	}), "every buffer freed and every stream destroyed")
	assert.Equal(t, relErrs, lifetime.ReadStats().ReleaseErrors, "no release failed: %v", lifetime.Errors())
	ltNoBadUses(t)
}

// ---- fix 6 ----

// TestFix06_NoPerThreadStream: PerThreadStream is gone. It named the
// calling OS thread's stream, and goroutines move between threads, so one
// goroutine's copy, launch and Synchronize could land on different streams.
func TestFix06_NoPerThreadStream(t *testing.T) {
	_, ok := reflect.TypeFor[*driver.Context]().MethodByName("PerThreadStream")
	assert.False(t, ok, "Context.PerThreadStream is back")
}

// ---- fix 7 ----

// TestFix07_LibraryKernelArgsCheckContexts: Args of a library kernel (which
// belongs to no context) check their buffers' contexts against the stream
// at every LaunchArgs, as Launch does. Before the fix NewArgs/LaunchArgs
// skipped the check and a buffer of context B was launched on a stream of
// context A; fakecuda counts that as a bad pointer use.
func TestFix07_LibraryKernelArgsCheckContexts(t *testing.T) {
	f := ltSetup(t)
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	defer lib.Close()
	fill, err := lib.Function("fill")
	require.NoError(t, err)
	other, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer other.Close()
	foreign, err := driver.Alloc[int32](other, 16)
	require.NoError(t, err)
	defer foreign.Close()
	mine, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	defer mine.Close()

	args, err := fill.NewArgs(foreign, int32(1), int32(16))
	if err == nil {
		defer args.Close()
		assert.ErrorIs(t, f.s.LaunchArgs(args, g1, b1), driver.ErrInvalidArgument, "LaunchArgs")
	} else {
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, "NewArgs may refuse at once")
	}
	assert.ErrorIs(t, f.s.Launch(fill, g1, b1, foreign, int32(1), int32(16)), driver.ErrInvalidArgument, "Launch")
	mixed, err := fill.NewArgs(mine, int32(1), int32(16))
	require.NoError(t, err)
	defer mixed.Close()
	os, err := other.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer os.Close()
	assert.ErrorIs(t, os.LaunchArgs(mixed, g1, b1), driver.ErrInvalidArgument, "Args of context A on a stream of B")

	// The control: the same kernel with a buffer of the stream's context.
	require.NoError(t, f.s.LaunchArgs(mixed, g1, b1))
	require.NoError(t, f.s.Synchronize())
	got := make([]int32, 16)
	require.NoError(t, mine.CopyToHost(got))
	assert.Equal(t, int32(16), got[15])
	ltNoBadUses(t)
}

// ---- fix 8 ----

// TestFix08_StickyErrorReleasesHostFunctions: after a sticky error CUDA
// never runs the host functions queued on the context; the stream's next
// call that reports the error releases what they hold: the callbacks'
// handle-map entries and the Go slices pinned for async copies. Before the
// fix they stayed registered and pinned forever.
func TestFix08_StickyErrorReleasesHostFunctions(t *testing.T) {
	f := ltSetup(t)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	buf, err := driver.Alloc[int32](f.ctx, 64)
	require.NoError(t, err)
	defer buf.Close()
	lifetime.Flush()
	before := lifetime.ReadStats()
	fcall(t, "fake_set_kernel_delay_us", 300000)
	require.NoError(t, s.Launch(f.empty, g1, b1)) // the rest queues behind it (for long enough even under -race)
	var ran atomic.Int64
	for i := 0; i < 10; i++ {
		require.NoError(t, s.LaunchHostFunc(func() { ran.Add(1) }))
	}
	require.NoError(t, buf.CopyToHostAsync(s, make([]int32, 64)))
	require.NoError(t, buf.CopyFromHostAsync(s, make([]int32, 64)))
	mid := lifetime.ReadStats()
	assert.Equal(t, before.Callbacks+12, mid.Callbacks, "ten host functions and two keep-alives registered")
	assert.Equal(t, before.Pinned+2, mid.Pinned, "two slices pinned")

	fcall(t, "fake_set_sticky_error", ltLaunchFailed)
	assert.ErrorIs(t, s.Synchronize(), driver.ErrLaunchFailed)
	after := lifetime.ReadStats()
	assert.Equal(t, before.Callbacks, after.Callbacks, "the host functions CUDA will never run were released")
	assert.Equal(t, before.Pinned, after.Pinned, "and the slices unpinned")
	assert.Zero(t, ran.Load(), "none ran")
	// Let fakecuda drop the queued work before the error is cleared (a real
	// sticky error is never cleared).
	assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 10000))
	fcall(t, "fake_set_kernel_delay_us", 0)
	fcall(t, "fake_clear_sticky_error")
	ltNoBadUses(t)
}

// ---- fix 9 ----

// TestFix09_AsyncCopyKeepAliveFailure: when the host function that keeps an
// async copy's Go slice pinned cannot be queued after the copy was, the
// call waits for the copy instead, so it neither returns an error for a
// copy that was queued nor lets the slice go while the copy may read it.
// Before the fix it returned the error, the copy still ran later, and the
// slice was no longer held: the slowed copy read whatever the caller wrote
// into it after the call.
func TestFix09_AsyncCopyKeepAliveFailure(t *testing.T) {
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
	require.NoError(t, buf.CopyToHost(got))
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

// ---- fix 10 ----

// TestFix10_PrimaryContextHandlesAreOneContext: two PrimaryContext handles
// of one device are one CUDA context: buffers of one launch and copy on
// streams of the other. Before the fix the launch was refused as "another
// context".
func TestFix10_PrimaryContextHandlesAreOneContext(t *testing.T) {
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
	require.NoError(t, b.CopyToHost(got))
	assert.Equal(t, int32(20+63), got[63])
	require.NoError(t, mine.CopyToHost(got))
	assert.Equal(t, int32(30+63), got[63])
	ltNoBadUses(t)
}

// ---- fix 11 (live receivers; nil and zero receivers are driver/zero_test.go) ----

// TestFix11_LiveReceiversZeroArguments: every exported method of live
// objects, given zero arguments (nil pointers, nil functions, zero
// objects made with new, empty slices), returns without a panic, and no
// call reaches fakecuda with a bad handle or pointer. Closing methods are
// skipped (the objects stay live for the other calls).
func TestFix11_LiveReceiversZeroArguments(t *testing.T) {
	f := ltSetup(t)
	buf, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	defer buf.Close()
	ev, err := f.ctx.NewEvent(driver.EventDefault)
	require.NoError(t, err)
	defer ev.Close()
	hb, err := driver.AllocHost[int32](f.ctx, 16, 0)
	require.NoError(t, err)
	defer hb.Close()
	reg, err := driver.RegisterHost(f.ctx, make([]int32, 16))
	require.NoError(t, err)
	defer reg.Close()
	pool, err := f.ctx.NewMemPool()
	require.NoError(t, err)
	defer pool.Close()
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	defer lib.Close()
	args, err := f.fill.NewArgs(buf, int32(1), int32(16))
	require.NoError(t, err)
	defer args.Close()
	kp, err := seam.Marshal(f.fill, f.ctx, []any{buf, int32(1), int32(16)})
	require.NoError(t, err)
	defer kp.Free()
	skip := map[string]bool{"Close": true, "Free": true, "TakeRefs": true, "Release": true, "Retain": true}
	for _, recv := range []any{f.ctx, f.s, ev, buf, hb, reg, pool, f.mod, lib, f.fill, args, kp, f.ctx.Device(), f.ctx.LegacyStream()} {
		rv := reflect.ValueOf(recv)
		for i := 0; i < rv.NumMethod(); i++ {
			name := rv.Type().Method(i).Name
			if skip[name] {
				continue
			}
			m := rv.Method(i)
			mt := m.Type()
			in := make([]reflect.Value, mt.NumIn())
			for j := range in {
				in[j] = reflect.Zero(mt.In(j))
			}
			if mt.IsVariadic() {
				in = in[:len(in)-1]
			}
			what := rv.Type().String() + "." + name
			var out []reflect.Value
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s with zero arguments panicked: %v", what, p)
					}
				}()
				out = m.Call(in)
			}()
			ltDispose(t, name, out)
		}
	}
	require.NoError(t, f.ctx.Synchronize())
	ltNoBadUses(t)
}

// ltDispose releases what a call made: references, kernel parameters, and
// objects made by New*, Load*, Compile*, Alloc*, Slice, PrimaryContext and
// DefaultMemPool (not objects a getter returns, such as Buffer.Context).
func ltDispose(t *testing.T, method string, out []reflect.Value) {
	t.Helper()
	makes := method == "Slice" || method == "PrimaryContext" || method == "DefaultMemPool"
	for _, p := range []string{"New", "Load", "Compile", "Alloc"} {
		makes = makes || strings.HasPrefix(method, p)
	}
	for _, v := range out {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			continue
		}
		switch x := v.Interface().(type) {
		case lifetime.Ref:
			assert.NoError(t, x.Release())
		case seam.Params:
			x.Free()
		case interface{ Close() error }:
			if makes {
				assert.NoError(t, x.Close(), "closing what %s made", method)
			}
		}
	}
}

// ---- fix 12 ----

// TestFix12_RegisteredHasCleanup: a Registered dropped without Close is
// unregistered, and its slice unpinned, by a cleanup. Before the fix it had
// none: the pages stayed registered for the life of the process.
func TestFix12_RegisteredHasCleanup(t *testing.T) {
	f := ltSetup(t)
	regs := fcall(t, "fake_live_registrations")
	lifetime.Flush()
	pinned := lifetime.ReadStats().Pinned
	func() {
		for i := 0; i < 4; i++ {
			r, err := driver.RegisterHost(f.ctx, make([]int32, 1024))
			require.NoError(t, err)
			require.Len(t, r.Slice(), 1024)
		}
	}()
	assert.Equal(t, regs+4, fcall(t, "fake_live_registrations"))
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_registrations") == regs }), "the cleanups unregistered the memory")
	assert.True(t, ltSettle(func() bool { return lifetime.ReadStats().Pinned == pinned }), "and unpinned it")
	ltNoBadUses(t)
}

// ---- fix 13 is a GPU test: fakecuda's synchronous copies and memsets
// complete before they return, so it cannot show an early return
// (driver/lifetime_gpu_test.go, TestFix13_SyncCopiesCompleteBeforeReturn) ----

// ---- fix 14 ----

// TestFix14_PanicInBoundCallLeavesNoContext: a panic in a function that
// runs with a context bound (the Raw methods) pops the context on the way
// out, so the thread is left as it was, and the call's reference on the
// object is dropped. (Before the fix bound popped only on a normal return;
// b286203 ran no caller function inside bound, so this pins the behaviour
// the new Raw methods rely on.)
func TestFix14_PanicInBoundCallLeavesNoContext(t *testing.T) {
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

// ---- fix 15 ----

// TestFix15_NULBytesRefused: names and NVRTC input with an embedded NUL
// byte are refused instead of being cut short by C. Before the fix
// Function("fill\x00junk") found fill.
func TestFix15_NULBytesRefused(t *testing.T) {
	f := ltSetup(t)
	_, err := f.mod.Function("fill\x00junk")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "Module.Function")
	_, _, err = f.mod.Global("answer\x00")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "Module.Global")
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	defer lib.Close()
	_, err = lib.Function("fill\x00junk")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "Library.Function")
	_, err = lib.Function("fill")
	assert.NoError(t, err, "the control")
	_, err = driver.DeviceByPCIBusID("0000:00:00.0\x00junk")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "DeviceByPCIBusID")

	// NVRTC refuses before it is loaded (so this needs no libnvrtc).
	const src = `extern "C" __global__ void k() {}`
	for name, o := range map[string]nvrtc.Options{
		"option":            {Extra: []string{"-DX\x00Y"}},
		"define name":       {Defines: map[string]string{"A\x00B": ""}},
		"define value":      {Defines: map[string]string{"A": "1\x002"}},
		"include path":      {IncludePaths: []string{"/tmp\x00/x"}},
		"header name":       {Headers: map[string]string{"h.h\x00": "int x;"}},
		"header content":    {Headers: map[string]string{"h.h": "int x;\x00garbage"}},
		"name expression":   {NameExpressions: []string{"k\x00"}},
		"program name":      {Name: "p.cu\x00"},
		"standard":          {Std: "c++17\x00"},
		"architecture name": {Arch: "sm_90\x00"},
	} {
		_, err := nvrtc.Compile(src, o)
		assert.ErrorIs(t, err, nvrtc.ErrBadOptions, name)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		_, _, err = f.ctx.CompileModule(src, o)
		assert.ErrorIs(t, err, nvrtc.ErrBadOptions, "CompileModule: %s", name)
	}
	_, err = nvrtc.Compile(src+"\x00garbage", nvrtc.Options{})
	assert.ErrorIs(t, err, nvrtc.ErrBadOptions, "source")
	_, _, err = f.ctx.CompileModule(src+"\x00garbage", nvrtc.Options{})
	assert.ErrorIs(t, err, nvrtc.ErrBadOptions, "CompileModule: source")
}

// ---- fix 16 ----

// TestFix16_LoadLibraryRefusesExtraJITOptions: LoadLibrary refuses more
// than one JITOptions, as LoadModule does. Before the fix it used the
// first and ignored the rest.
func TestFix16_LoadLibraryRefusesExtraJITOptions(t *testing.T) {
	f := ltSetup(t)
	libs := fcall(t, "fake_live_libraries")
	_, err := driver.LoadLibrary([]byte("FAKE library"), driver.JITOptions{}, driver.JITOptions{MaxRegisters: 32})
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = f.ctx.LoadModule([]byte("FAKE module"), driver.JITOptions{}, driver.JITOptions{MaxRegisters: 32})
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "the same as LoadModule")
	lib, err := driver.LoadLibrary([]byte("FAKE library"), driver.JITOptions{MaxRegisters: 32})
	require.NoError(t, err, "one is fine")
	require.NoError(t, lib.Close())
	assert.Equal(t, libs, fcall(t, "fake_live_libraries"))
}

// ---- found while proving the fixes ----

// TestModuleAndLibraryCloseWaitForQueuedKernels: closing a module or a
// library whose kernel is still queued on a stream unloads it only after
// the kernel ran (I4: work that outlives the call holds what it names).
// cuModuleUnload and cuLibraryUnload do not wait for queued kernels; before
// this was fixed (after 2d5c906) a launch held the module only for the
// call, and fakecuda saw the slowed kernel run with its function unloaded.
func TestModuleAndLibraryCloseWaitForQueuedKernels(t *testing.T) {
	f := ltSetup(t)
	mods, libs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_libraries")
	b, err := driver.Alloc[int32](f.ctx, 64)
	require.NoError(t, err)
	defer b.Close()
	other, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer other.Close()
	os, err := other.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer os.Close()
	ob, err := driver.Alloc[int32](other, 64)
	require.NoError(t, err)
	defer ob.Close()

	fcall(t, "fake_set_kernel_delay_us", 10000)
	for _, viaArgs := range []bool{false, true} {
		mod, err := f.ctx.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		fill, err := mod.Function("fill")
		require.NoError(t, err)
		lib, err := driver.LoadLibrary([]byte("FAKE library"))
		require.NoError(t, err)
		lfill, err := lib.Function("fill")
		require.NoError(t, err)
		require.NoError(t, f.s.Launch(f.empty, g1, b1)) // slow work first: the rest queues
		if viaArgs {
			a, err := fill.NewArgs(b, int32(1), int32(64))
			require.NoError(t, err)
			require.NoError(t, f.s.LaunchArgs(a, g1, b1))
			require.NoError(t, a.Close())
			la, err := lfill.NewArgs(b, int32(2), int32(64))
			require.NoError(t, err)
			require.NoError(t, f.s.LaunchArgs(la, g1, b1))
			lo, err := lfill.NewArgs(ob, int32(3), int32(64))
			require.NoError(t, err)
			require.NoError(t, os.LaunchArgs(lo, g1, b1), "a library kernel in a second context")
			require.NoError(t, errors.Join(la.Close(), lo.Close()))
		} else {
			require.NoError(t, f.s.Launch(fill, g1, b1, b, int32(1), int32(64)))
			require.NoError(t, f.s.Launch(lfill, g1, b1, b, int32(2), int32(64)))
			require.NoError(t, os.Launch(lfill, g1, b1, ob, int32(3), int32(64)), "a library kernel in a second context")
		}
		require.NoError(t, mod.Close())
		require.NoError(t, lib.Close())
		assert.Equal(t, mods, fcall(t, "fake_live_modules"), "Close returns after the unload")
		assert.Equal(t, libs, fcall(t, "fake_live_libraries"))
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, os.Synchronize())
		ltNoBadUses(t)
	}
}
