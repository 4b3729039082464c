//go:build linux

package fakedriver_test

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

// A launch that CUDA refuses, on Launch's and LaunchArgs' quick paths,
// returns CUDA's error and holds nothing afterwards: the buffer, the Args
// and the stream close and free as if the launch had not happened.
func TestLaunchFailedOnQuickPathReleases(t *testing.T) {
	f := ltSetup(t)
	before := lifetime.ReadStats()
	liveBefore := fcall(t, "fake_live_allocations")
	g := driver.Grid(1)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	learnLaunch(t, s, f.add4, out, uint32(1), uint32(2), uint32(3))
	args, err := f.add4.NewArgs(out, uint32(4), uint32(5), uint32(6))
	require.NoError(t, err)

	faketest.FailCalls(t, "cuLaunchKernel", 1, 0, 2) // CUDA_ERROR_INVALID_VALUE, twice
	err = s.Launch(f.add4, g, driver.Block(1), out, uint32(1), uint32(2), uint32(3))
	assert.ErrorIs(t, err, driver.ErrInvalidValue)
	err = s.LaunchArgs(args, g, driver.Block(1))
	assert.ErrorIs(t, err, driver.ErrInvalidValue)

	require.NoError(t, s.LaunchArgs(args, g, driver.Block(1)), "launches again")
	require.NoError(t, s.Synchronize())
	v := make([]uint32, 1)
	require.NoError(t, out.CopyToHost(s, v))
	assert.Equal(t, uint32(15), v[0])
	require.NoError(t, args.Close())
	require.NoError(t, out.Close())
	require.NoError(t, s.Close())
	lifetime.Flush()
	assert.Equal(t, before.Objects, lifetime.ReadStats().Objects, "nothing kept a reference")
	assert.Equal(t, liveBefore, fcall(t, "fake_live_allocations"), "the buffer was freed")
}

// Launches captured into a graph through the quick paths hand the graph
// their buffers and kernel: closed before the graph runs, they are still
// there when it does.
func TestLaunchCapturedOnQuickPathHoldsArguments(t *testing.T) {
	f := ltSetup(t)
	g := driver.Grid(1)
	mod, err := f.ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	add4, err := mod.Function("add4")
	require.NoError(t, err)
	a, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	b, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	learnLaunch(t, f.s, add4, a, uint32(0), uint32(0), uint32(0))
	args, err := add4.NewArgs(b, uint32(10), uint32(20), uint32(30))
	require.NoError(t, err)
	require.NoError(t, f.s.Synchronize())

	sc, err := graph.BeginCapture(f.s, graph.CaptureRelaxed)
	require.NoError(t, err)
	require.NoError(t, f.s.Launch(add4, g, driver.Block(1), a, uint32(1), uint32(2), uint32(3)))
	require.NoError(t, f.s.LaunchArgs(args, g, driver.Block(1)))
	gr, err := sc.End()
	require.NoError(t, err)
	defer gr.Close()
	ex, err := gr.Instantiate()
	require.NoError(t, err)
	defer ex.Close()

	// Everything the launches named is closed; the graph holds it.
	require.NoError(t, args.Close())
	require.NoError(t, mod.Close())
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, ex.Launch(f.s))
	require.NoError(t, f.s.Synchronize())
	assert.Zero(t, fcall(t, "fake_bad_ptr_uses"), "the graph's kernels wrote to live memory")
	assert.Zero(t, fcall(t, "fake_bad_handle_uses"), "the graph's kernels ran in a loaded module")
}

// A stream-ordered buffer of stream A launched on stream B while B is being
// closed: the launch holds B, but Close marks B closed, and usedOn must
// still record B (a Stream.Hold would refuse the closed stream and record
// nothing). The kernel is queued on B all the same, so the buffer's free on
// A must wait for it; otherwise the kernel, held back behind a slow one,
// writes freed memory (fakecuda counts it). The Close has to land between
// the launch's Acquire and usedOn, so the test tries many times; driver's
// TestUsedOnRecordsStreamClosedDuringCall plays the same race step by step.
func TestLaunchOnClosingStreamKeepsFreeOrder(t *testing.T) {
	f := ltSetup(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0))))
	g := driver.Grid(1)
	warm, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	defer warm.Close()
	learnLaunch(t, f.s, f.fill, warm, int32(0), int32(4)) // quick path from here on

	var launched, lost int
	for i := 0; i < 1500 && lost == 0; i++ {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		b, err := driver.AllocAsync[int32](f.s, 4)
		require.NoError(t, err)
		require.NoError(t, f.s.Synchronize())
		fcall(t, "fake_set_kernel_delay_us", 300)
		require.NoError(t, s.Launch(f.empty, g, driver.Block(1))) // keeps the next kernel queued for a while

		var start sync.WaitGroup
		var ready atomic.Int32
		start.Add(2)
		var launchErr error
		go func() {
			defer start.Done()
			ready.Add(1)
			for ready.Load() < 2 {
			}
			launchErr = s.Launch(f.fill, g, driver.Block(1), b, int32(7), int32(4))
		}()
		go func() {
			defer start.Done()
			ready.Add(1)
			for ready.Load() < 2 {
			}
			for range i % 64 { // move the Close across the launch
				runtime.Gosched()
			}
			assert.NoError(t, s.Close())
		}()
		start.Wait()
		require.NoError(t, b.Close()) // the free, on f.s, must wait for s
		require.NoError(t, f.ctx.Synchronize())
		fcall(t, "fake_set_kernel_delay_us", 0)
		if launchErr == nil {
			launched++
		} else {
			require.ErrorIs(t, launchErr, driver.ErrClosed)
		}
		if fcall(t, "fake_bad_ptr_uses") != 0 {
			lost++
			t.Errorf("try %d: the kernel launched on the closing stream wrote freed memory: %s", i, faketest.LastBadUse(t))
			fcall(t, "fake_reset_counters")
		}
	}
	t.Logf("%d launches went through", launched)
}

// Launch's quick path fills its parameter array (pointers into
// its own stack) before it notes, for stream-ordered buffers of another
// stream, that they are used on this one (usedOn: a lock, a reference, an
// append), which may grow and move the stack; the array is a stack object
// whose pointers the runtime adjusts, and it becomes an integer only just
// before the call. Launched from goroutines whose stacks sit at different
// depths, every kernel reads its own arguments and the buffers' frees wait
// for the launches. TestLaunchSmallBlockOnMovingStacks has no stream-ordered
// buffer, so no call inside that window.
func TestLaunchStreamOrderedBuffersOnMovingStacks(t *testing.T) {
	f := ltSetup(t)
	other, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer other.Close()
	warm, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer warm.Close()
	learnLaunch(t, f.s, f.add4, warm, uint32(0), uint32(0), uint32(0))
	const n = 64
	bufs := make([]*driver.Buffer[uint32], n)
	for i := range bufs {
		bufs[i], err = driver.AllocAsync[uint32](other, 1)
		require.NoError(t, err)
	}
	require.NoError(t, other.Synchronize())
	g := driver.Grid(1)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deep(i*3, func() {
				errs[i] = f.s.Launch(f.add4, g, driver.Block(1), bufs[i], uint32(i), uint32(1000*i), uint32(7))
				deep(i%7, func() {})
			})
		}()
	}
	wg.Wait()
	require.NoError(t, f.s.Synchronize())
	out := make([]uint32, 1)
	for i, b := range bufs {
		require.NoError(t, errs[i], "launch %d", i)
		require.NoError(t, b.CopyToHost(f.ctx.LegacyStream(), out))
		assert.Equal(t, uint32(i+1000*i+7), out[0], "kernel %d read its own arguments", i)
	}
	// The frees, queued on other, wait for f.s (usedOn recorded it).
	fcall(t, "fake_set_kernel_delay_us", 2000)
	for i, b := range bufs {
		require.NoError(t, f.s.Launch(f.add4, g, driver.Block(1), b, uint32(i), uint32(0), uint32(0)))
	}
	for _, b := range bufs {
		require.NoError(t, b.Close())
	}
	require.NoError(t, f.ctx.Synchronize())
}

// Launches on the quick paths racing Close of everything they
// name (stream, module and so kernel, buffer, Args), with kernels slowed
// down so that work is still queued when the last reference goes: every
// launch returns nil or ErrClosed, nothing reaches fakecuda freed or
// destroyed (ltSetup's check), and everything is released in the end.
// TestStressCloseRaces covers this among everything else, without slowed
// kernels; here every launch after the first two takes a quick path.
func TestLaunchQuickPathsRaceClose(t *testing.T) {
	f := ltSetup(t)
	before := lifetime.ReadStats().Objects
	mods, streams, allocs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_streams"), fcall(t, "fake_live_allocations")
	g := driver.Grid(1)
	for round := range 20 {
		mod, err := f.ctx.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		add4, err := mod.Function("add4")
		require.NoError(t, err)
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		buf, err := driver.Alloc[uint32](f.ctx, 1)
		require.NoError(t, err)
		learnLaunch(t, s, add4, buf, uint32(0), uint32(0), uint32(0))
		args, err := add4.NewArgs(buf, uint32(1), uint32(2), uint32(3))
		require.NoError(t, err)
		fcall(t, "fake_set_kernel_delay_us", 50)
		closers := []func() error{s.Close, mod.Close, buf.Close, args.Close}
		ltRaceN(4, 200, func(gr int) {
			var err error
			if gr%2 == 0 {
				err = s.Launch(add4, g, driver.Block(1), buf, uint32(gr), uint32(round), uint32(0))
			} else {
				err = s.LaunchArgs(args, g, driver.Block(1))
			}
			ltClosedOr(t, "launch", err)
		}, func() {
			for i := range closers {
				c := closers[(i+round)%len(closers)]
				assert.NoError(t, c())
			}
		})
		fcall(t, "fake_set_kernel_delay_us", 0)
		require.NoError(t, f.ctx.Synchronize())
	}
	assert.True(t, ltSettle(func() bool {
		return lifetime.ReadStats().Objects == before && fcall(t, "fake_live_modules") == mods &&
			fcall(t, "fake_live_streams") == streams && fcall(t, "fake_live_allocations") == allocs
	}), "every module, stream, buffer and Args released")
}

// Close while a launch on Launch's or LaunchArgs' quick path is still
// inside cuLaunchKernel must not destroy the stream under it (fakecuda
// checks the stream again after the delay): the stream goes once the
// launch is done, and later calls fail with ErrClosed.
func TestLaunchInFlightKeepsItsStream(t *testing.T) {
	f := ltSetup(t)
	streams := fcall(t, "fake_live_streams")
	buf, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer buf.Close()
	args, err := f.add4.NewArgs(buf, uint32(1), uint32(2), uint32(3))
	require.NoError(t, err)
	defer args.Close()
	g := driver.Grid(1)
	launches := map[string]func(s *driver.Stream) error{
		"Launch": func(s *driver.Stream) error {
			return s.Launch(f.add4, g, driver.Block(1), buf, uint32(1), uint32(2), uint32(3))
		},
		"LaunchArgs": func(s *driver.Stream) error { return s.LaunchArgs(args, g, driver.Block(1)) },
	}
	for name, launch := range launches {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		learnLaunch(t, s, f.add4, buf, uint32(0), uint32(0), uint32(0))
		release := hold(t, "fake_set_launch_call_delay_us") // inside cuLaunchKernel until released
		done := make(chan error, 1)
		go func() { done <- launch(s) }()
		waitGauge(t, "fake_launch_calls_in_delay", 1) // the launch is inside cuLaunchKernel
		require.NoError(t, s.Close(), name)
		assert.Equal(t, streams+1, fcall(t, "fake_live_streams"), "%s: the stream outlives Close while the launch is in the driver", name)
		release()
		require.NoError(t, <-done, name)
		assert.ErrorIs(t, launch(s), driver.ErrClosed, name)
		assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_streams") == streams }), "%s: the stream destroyed after the launch", name)
		ltNoBadUses(t)
	}
}

// A fast-path launch that holds the last reference on a stream-ordered
// buffer of its own stream frees it after the call, and the free enters
// the stream; a capture beginning on the stream meanwhile holds its gate
// and waits for the stream's uncaptured calls in flight. The launch must
// have stopped counting itself before it releases anything, or the two
// wait for each other for good.
func TestLaunchFreeingItsBufferWhileACaptureBegins(t *testing.T) {
	f := ltSetup(t)
	g := driver.Grid(1)
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	warm, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer warm.Close()
	learnLaunch(t, s, f.add4, warm, uint32(0), uint32(0), uint32(0))
	b, err := driver.AllocAsync[uint32](s, 1) // stream-ordered on s itself: the fast path
	require.NoError(t, err)
	require.NoError(t, s.Synchronize())

	release := hold(t, "fake_set_launch_call_delay_us") // inside cuLaunchKernel until released
	launched := make(chan error, 1)
	go func() { launched <- s.Launch(f.add4, g, driver.Block(1), b, uint32(1), uint32(2), uint32(3)) }()
	waitGauge(t, "fake_launch_calls_in_delay", 1) // the launch is inside cuLaunchKernel
	require.NoError(t, b.Close())                 // the launch holds the buffer's last reference now
	captured := make(chan error, 1)
	go func() {
		sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
		if err == nil {
			var gr *graph.Graph
			if gr, err = sc.End(); err == nil {
				err = gr.Close()
			}
		}
		captured <- err
	}()
	time.Sleep(20 * time.Millisecond) // the capture begins and waits for the launch (more time only makes a deadlock likelier to show)
	release()
	select {
	case err := <-launched:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("deadlock: the launch freeing its buffer waits for the capture's gate, the capture for the launch")
	}
	require.NoError(t, <-captured)
}
