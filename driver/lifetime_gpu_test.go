package driver_test

// Lifetime tests where fakecuda cannot stand in for the real driver:
// synchronous copies and memsets that must not return before the device has
// them, stream-ordered frees racing a kernel that still runs, Close racing
// calls, which crashed libcuda, and modules unloaded under queued kernels.
// The rest is proved on a CPU in tests/fakedriver (buffer_test.go,
// stream_ordered_free_test.go, close_races_test.go, context_test.go and
// their neighbours). They skip without a GPU (fail under
// PURECUDA_REQUIRE_GPU) and take about a second together.

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nvrtc"
)

// spinSrc's kernel spins for cycles clock cycles, then writes v to out[0:n].
const spinSrc = `extern "C" __global__ void spinfill(int* out, int v, int n, long long cycles) {
	long long t = clock64();
	while (clock64() - t < cycles) {}
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = v;
}`

// spinCycles is about 50 ms at the clocks of current GPUs.
const spinCycles = int64(100_000_000)

var spinPTX = sync.OnceValues(func() ([]byte, error) {
	res, err := nvrtc.Compile(spinSrc, nvrtc.Options{Arch: "compute_75"})
	if err != nil {
		return nil, err
	}
	return res.PTX, nil
})

// loadSpin loads spinSrc into a new module of e.ctx; the caller closes it.
func loadSpin(t *testing.T, e *testEnv) (*driver.Module, *driver.Function) {
	t.Helper()
	ptx, err := spinPTX()
	require.NoError(t, err)
	mod, err := e.ctx.LoadModule(ptx)
	require.NoError(t, err)
	f, err := mod.Function("spinfill")
	require.NoError(t, err)
	return mod, f
}

// wrong counts the elements of got that are not want, and the first.
func wrong[T comparable](got []T, want T) (n, first int) {
	first = -1
	for i, v := range got {
		if v != want {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	return n, first
}

// TestSyncCopiesCompleteBeforeReturn: a synchronous copy or memset has
// reached the device when it returns, so a kernel launched at once on a
// non-blocking stream (which does not wait for the legacy stream) reads the
// new data. The failure it guards against: a pageable host-to-device copy
// returning once the data is staged, and a device memset or
// device-to-device copy as soon as it is queued: here behind a slow kernel
// on the legacy stream, where CUDA queues them.
func TestSyncCopiesCompleteBeforeReturn(t *testing.T) {
	e, s := setup(t)
	mod, spin := loadSpin(t, e)
	defer mod.Close()
	scratch, err := driver.Alloc[int32](e.ctx, 1)
	require.NoError(t, err)
	defer scratch.Close()
	legacy := e.ctx.LegacyStream()
	busy := func() { // about 10 ms of work on the legacy stream
		require.NoError(t, legacy.Launch(spin, driver.Grid(1), driver.Block(1), scratch, int32(0), int32(1), spinCycles/5))
	}
	const n = 32 << 20 // 128 MiB of float32: long enough to see an early return
	a, err := driver.Alloc[float32](e.ctx, n)
	require.NoError(t, err)
	defer a.Close()
	other, err := driver.Alloc[float32](e.ctx, n)
	require.NoError(t, err)
	defer other.Close()
	zero, err := driver.AllocZeroed[float32](e.ctx.LegacyStream(), n)
	require.NoError(t, err)
	defer zero.Close()
	c, err := driver.Alloc[float32](e.ctx, n)
	require.NoError(t, err)
	defer c.Close()
	src, got := make([]float32, n), make([]float32, n)
	vadd := e.fn["vadd"]
	// readBack copies a into c with a kernel on s, launched right after the
	// synchronous call, and returns c's contents.
	readBack := func() []float32 {
		require.NoError(t, s.Launch(vadd, driver.Grid(n/256), driver.Block(256), a, zero, c, int32(n)))
		require.NoError(t, s.Synchronize())
		require.NoError(t, c.CopyToHost(e.ctx.LegacyStream(), got))
		return got
	}
	for round := 0; round < 3; round++ {
		v := float32(round + 2)
		for i := range src {
			src[i] = v
		}
		require.NoError(t, a.MemsetFloat32(e.ctx.LegacyStream(), -1))
		busy()
		require.NoError(t, a.CopyFromHost(e.ctx.LegacyStream(), src))
		bad, first := wrong(readBack(), v)
		assert.Zero(t, bad, "round %d: CopyFromHost returned before the copy reached the device (first at %d)", round, first)

		busy()
		require.NoError(t, a.MemsetFloat32(e.ctx.LegacyStream(), v+100))
		bad, first = wrong(readBack(), v+100)
		assert.Zero(t, bad, "round %d: MemsetFloat32 returned before the memset ran (first at %d)", round, first)

		busy()
		require.NoError(t, a.Memset8(e.ctx.LegacyStream(), 0))
		bad, first = wrong(readBack(), 0)
		assert.Zero(t, bad, "round %d: Memset8 returned before the memset ran (first at %d)", round, first)

		require.NoError(t, other.MemsetFloat32(e.ctx.LegacyStream(), v+200))
		busy()
		require.NoError(t, a.CopyFrom(e.ctx.LegacyStream(), other))
		bad, first = wrong(readBack(), v+200)
		assert.Zero(t, bad, "round %d: CopyFrom returned before the copy ran (first at %d)", round, first)
	}
}

// TestStreamOrderedFreeAfterRunningKernel: a stream-ordered buffer closed
// while a kernel writing it still runs is freed after the kernel, even when
// its stream was closed first or the kernel runs on another stream, so
// memory allocated next never receives the kernel's writes. An immediate
// free (cuMemFree for a closed stream, or cuMemFreeAsync on an idle
// allocating stream) would let the pool hand the same memory out again and
// the running kernel overwrite the new buffer (seen on an H200).
func TestStreamOrderedFreeAfterRunningKernel(t *testing.T) {
	e, s := setup(t)
	mod, spin := loadSpin(t, e)
	defer mod.Close()
	const n = 1 << 20
	grid, block := driver.Grid(n/256), driver.Block(256)
	got := make([]int32, n)
	for _, closedStream := range []bool{true, false} {
		s1, err := e.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		b, err := driver.AllocAsync[int32](s1, n)
		require.NoError(t, err)
		if closedStream {
			// The kernel runs on b's own stream, which is closed at once.
			require.NoError(t, s1.Launch(spin, grid, block, b, int32(7), int32(n), spinCycles))
			require.NoError(t, s1.Close())
		} else {
			// The kernel runs on s, another stream than b's.
			require.NoError(t, s1.Synchronize())
			require.NoError(t, s.Launch(spin, grid, block, b, int32(7), int32(n), spinCycles))
		}
		require.NoError(t, b.Close())
		next := s1
		if closedStream {
			next = s
		}
		c, err := driver.AllocAsync[int32](next, n)
		require.NoError(t, err)
		require.NoError(t, c.Memset32Async(next, 1))
		require.NoError(t, e.ctx.Synchronize()) // the spinning kernel is done
		require.NoError(t, c.CopyToHost(e.ctx.LegacyStream(), got))
		bad, first := wrong(got, 1)
		assert.Zero(t, bad, "closed stream %v: the kernel wrote into memory freed under it and handed out again (first at %d)", closedStream, first)
		require.NoError(t, c.Close())
		if !closedStream {
			require.NoError(t, s1.Close())
		}
	}
	require.NoError(t, e.ctx.Synchronize())
}

// TestGPUCloseRacesCalls: Stream, Event and Buffer Close racing calls on
// them from other goroutines: every call succeeds or says closed, and the
// process survives; destroyed handles reaching libcuda end in SIGSEGV
// inside it (seen on an H200).
func TestGPUCloseRacesCalls(t *testing.T) {
	e, _ := setup(t)
	fill := e.fn["fill"]
	deadline := time.Now().Add(time.Second)
	rounds := 0
	for ; rounds < 10 || time.Now().Before(deadline); rounds++ {
		s, err := e.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		ev, err := e.ctx.NewEvent(driver.EventDisableTiming)
		require.NoError(t, err)
		b, err := driver.Alloc[int32](e.ctx, 1024)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var unexpected sync.Map
		stop := make(chan struct{})
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				host := make([]int32, 1024)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					var err error
					switch (g + i) % 8 {
					case 0:
						err = s.Launch(fill, driver.Grid(4), driver.Block(256), b, int32(i), int32(1024))
					case 1:
						err = ev.Record(s)
					case 2:
						err = s.WaitEvent(ev)
					case 3:
						err = b.CopyToHostAsync(s, host)
					case 4:
						_, err = ev.Query()
					case 5:
						err = b.CopyFromHost(s, host)
					case 6:
						err = b.Memset32Async(s, 5)
					case 7:
						err = errors.Join(s.Synchronize(), ev.Synchronize())
					}
					if err != nil && !errors.Is(err, driver.ErrClosed) {
						unexpected.LoadOrStore(err.Error(), g)
					}
				}
			}()
		}
		time.Sleep(2 * time.Millisecond)
		for _, c := range []func() error{s.Close, ev.Close, b.Close} {
			require.NoError(t, c())
			time.Sleep(time.Millisecond)
		}
		close(stop)
		wg.Wait()
		unexpected.Range(func(k, _ any) bool { t.Errorf("round %d: unexpected error: %v", rounds, k); return true })
	}
	require.NoError(t, e.ctx.Synchronize())
	t.Logf("%d rounds", rounds)
}

// TestModuleAndLibraryCloseWaitForRunningKernels_GPU: a module or library
// closed while its kernel still runs is unloaded after the kernel: the
// kernel completes, its result is right and the context stays healthy.
// cuModuleUnload and cuLibraryUnload do not wait for queued work.
func TestModuleAndLibraryCloseWaitForRunningKernels_GPU(t *testing.T) {
	e, s := setup(t)
	ptx, err := spinPTX()
	require.NoError(t, err)
	const n = 1 << 16
	b, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	defer b.Close()
	got := make([]int32, n)
	for i, library := range []bool{false, true} {
		var spin *driver.Function
		var closeCode func() error
		if library {
			lib, err := driver.LoadLibrary(ptx)
			require.NoError(t, err)
			spin, err = lib.Function("spinfill")
			require.NoError(t, err)
			closeCode = lib.Close
		} else {
			mod, err := e.ctx.LoadModule(ptx)
			require.NoError(t, err)
			spin, err = mod.Function("spinfill")
			require.NoError(t, err)
			closeCode = mod.Close
		}
		v := int32(40 + i)
		require.NoError(t, s.Launch(spin, driver.Grid(n/256), driver.Block(256), b, v, int32(n), spinCycles))
		require.NoError(t, closeCode())
		require.NoError(t, s.Synchronize(), "library %v", library)
		require.NoError(t, b.CopyToHost(e.ctx.LegacyStream(), got))
		bad, first := wrong(got, v)
		assert.Zero(t, bad, "library %v: the kernel did not complete (first at %d)", library, first)
		require.NoError(t, e.ctx.Synchronize())
	}
}

// TestGPUPrimaryContextHandles: buffers of one PrimaryContext handle
// launch on streams of another handle of the same device.
func TestGPUPrimaryContextHandles(t *testing.T) {
	e, s := setup(t)
	other, err := e.dev.PrimaryContext()
	require.NoError(t, err)
	defer other.Close()
	b, err := driver.Alloc[int32](other, 256)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(256), b, int32(9), int32(256)))
	got, err := b.ToHost(s)
	require.NoError(t, err)
	assert.Equal(t, int32(9+255), got[255])
}

// TestGPUDroppedHandlesAreReleased: contexts (made and primary) with their
// streams, events, pools, pool buffers, modules and libraries, all dropped
// without Close after a kernel of each ran, are destroyed by their
// cleanups: lifetime's count of live objects and the device's free memory
// come back, no destroy fails, and the shared primary context still works.
func TestGPUDroppedHandlesAreReleased(t *testing.T) {
	e, s := setup(t)
	// Handles earlier tests dropped are released at some collection: let
	// that happen before the baseline, not during the test.
	for range 3 {
		runtime.GC()
		lifetime.Flush()
	}
	st0 := lifetime.ReadStats()
	free0, _, err := e.ctx.MemGetInfo()
	require.NoError(t, err)
	const n = 1 << 20
	for i := range 8 {
		func() {
			c, err := e.dev.NewContext(driver.ContextSchedAuto)
			require.NoError(t, err)
			p, err := e.dev.PrimaryContext()
			require.NoError(t, err)
			for _, ctx := range []*driver.Context{c, p} {
				cs, err := ctx.NewStream(driver.StreamNonBlocking)
				require.NoError(t, err)
				ev, err := ctx.NewEvent(driver.EventDisableTiming)
				require.NoError(t, err)
				pool, err := ctx.NewMemPool()
				require.NoError(t, err)
				buf, err := driver.AllocFromPool[int32](cs, pool, n)
				require.NoError(t, err)
				mod, err := ctx.LoadModule(e.ptx)
				require.NoError(t, err)
				fill, err := mod.Function("fill")
				require.NoError(t, err)
				require.NoError(t, cs.Launch(fill, driver.Grid(n/256), driver.Block(256), buf, int32(i), int32(n)))
				lib, err := driver.LoadLibrary(e.ptx)
				require.NoError(t, err)
				lfill, err := lib.Function("fill")
				require.NoError(t, err)
				require.NoError(t, cs.Launch(lfill, driver.Grid(n/256), driver.Block(256), buf, int32(i+1), int32(n)))
				require.NoError(t, ev.Record(cs))
				require.NoError(t, ev.Synchronize())
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for lifetime.ReadStats().Objects > st0.Objects && time.Now().Before(deadline) {
		runtime.GC()
		lifetime.Flush()
		time.Sleep(10 * time.Millisecond)
	}
	st := lifetime.ReadStats()
	assert.LessOrEqual(t, st.Objects, st0.Objects, "every dropped handle's object destroyed")
	assert.Equal(t, st0.ReleaseErrors, st.ReleaseErrors, "no destroy failed: %v", lifetime.Errors())
	// A pool destroyed while its buffer's stream-ordered free is still
	// queued lets its memory go once the free has run: wait for that.
	var free int
	for {
		free, _, err = e.ctx.MemGetInfo()
		require.NoError(t, err)
		if free+64<<20 >= free0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("free memory %d MiB, before %d MiB", free>>20, free0>>20)
	assert.GreaterOrEqual(t, free+64<<20, free0, "the contexts' and pools' memory came back")
	b, err := driver.Alloc[int32](e.ctx, 256)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(256), b, int32(3), int32(256)))
	require.NoError(t, s.Synchronize())
	got, err := b.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, int32(3+255), got[255], "the primary context still works")
}
