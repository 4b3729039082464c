package graph

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

var modes = []CaptureMode{CaptureGlobal, CaptureThreadLocal, CaptureRelaxed}

// requireIdle asserts that s is out of capture and usable: a kernel runs.
func requireIdle(t *testing.T, e *testEnv, s *driver.Stream, msg string) {
	t.Helper()
	status, err := IsCapturing(s)
	require.NoError(t, err, msg)
	assert.Equal(t, NotCapturing, status, msg)
	assert.Nil(t, capture.Installed(s), msg)
	buf, err := driver.Alloc[int32](e.ctx, 4)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(4), buf, int32(40), int32(4)), msg)
	require.NoError(t, s.Synchronize(), msg)
	got, err := buf.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, []int32{40, 41, 42, 43}, got, msg)
}

// settled waits until what captures held is released: Live, Callbacks and
// Pinned back to st0 or below.
func settled(t *testing.T, st0 lifetime.Stats, msg string) {
	t.Helper()
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Callbacks <= st0.Callbacks && st.Pinned <= st0.Pinned
	}, msg)
}

// Must show: a panic between begin and end leaves the stream usable and not
// capturing, in every mode, through Capture and through BeginCapture with a
// deferred Abort; so does an error from f and a runtime.Goexit in f.
func TestCapturePanicLeavesStreamUsable(t *testing.T) {
	e, s := setup(t)
	st0 := lifetime.ReadStats()
	for _, mode := range modes {
		buf, err := driver.Alloc[int32](e.ctx, 256)
		require.NoError(t, err)
		p := func() (p any) {
			defer func() { p = recover() }()
			_, _ = Capture(s, mode, func(s *driver.Stream) error {
				require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(256), buf, int32(1), int32(256)))
				require.NoError(t, s.LaunchHostFunc(func() {}))
				panic("capture boom")
			})
			return nil
		}()
		assert.Equal(t, "capture boom", p, "the panic goes on, unchanged (%v)", mode)
		requireIdle(t, e, s, fmt.Sprintf("after a panic in Capture (%v)", mode))

		// An error from f is returned; the capture is gone.
		errF := fmt.Errorf("f failed")
		g, err := Capture(s, mode, func(s *driver.Stream) error {
			require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(256), buf, int32(1), int32(256)))
			return errF
		})
		assert.ErrorIs(t, err, errF)
		assert.Nil(t, g)
		requireIdle(t, e, s, fmt.Sprintf("after an error in Capture (%v)", mode))

		// runtime.Goexit in f (t.FailNow would do it), on a goroutine of
		// its own.
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = Capture(s, mode, func(s *driver.Stream) error {
				_ = s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(256), buf, int32(1), int32(256))
				runtime.Goexit()
				return nil
			})
		}()
		<-done
		requireIdle(t, e, s, fmt.Sprintf("after Goexit in Capture (%v)", mode))

		// BeginCapture, with the deferred Abort as the guard; the panic
		// happens on another goroutine than BeginCapture's.
		c, err := BeginCapture(s, mode)
		require.NoError(t, err)
		p = func() (p any) {
			defer func() { p = recover() }()
			defer c.Abort()
			require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(256), buf, int32(1), int32(256)))
			panic("explicit boom")
		}()
		assert.Equal(t, "explicit boom", p)
		requireIdle(t, e, s, fmt.Sprintf("after a panic with BeginCapture (%v)", mode))
		_, err = c.End()
		assert.ErrorIs(t, err, ErrNotCapturing, "End after Abort")
		require.NoError(t, buf.Close())
	}
	settled(t, st0, "aborted captures released what they held")
}

// A StreamCapture dropped while capturing is aborted by its cleanup.
func TestCaptureLeakedIsAborted(t *testing.T) {
	e, s := setup(t)
	func() {
		c, err := BeginCapture(s, CaptureGlobal)
		require.NoError(t, err)
		require.NoError(t, s.Launch(e.fn["empty"], driver.Grid(1), driver.Block(1)))
		_ = c
	}()
	eventually(t, func() bool {
		runtime.GC()
		st, err := IsCapturing(s)
		return err == nil && st == NotCapturing && capture.Installed(s) == nil
	}, "the cleanup ended the capture")
	requireIdle(t, e, s, "after the cleanup")
}

// Must show: captured host callbacks and buffer arguments survive GC and
// their caller's Close; the captured graph replays them; everything is
// released after teardown. Owners are recorded against the node that
// names them.
func TestCaptureKeepsWhatItNames(t *testing.T) {
	e, s := setup(t)
	collect()
	st0 := lifetime.ReadStats()
	const n = 1000
	var calls atomic.Int64
	out := make([]int32, n)
	var hostSaw atomic.Int32

	g, err := Capture(s, CaptureRelaxed, func(s *driver.Stream) error {
		a, err := driver.Alloc[int32](e.ctx, n)
		require.NoError(t, err)
		b, err := driver.Alloc[int32](e.ctx, n)
		require.NoError(t, err)
		c, err := driver.Alloc[int32](e.ctx, n)
		require.NoError(t, err)
		in := make([]int32, n)
		for i := range in {
			in[i] = int32(3 * i)
		}
		require.NoError(t, a.CopyFromHostAsync(s, in))     // pin of in, a
		require.NoError(t, b.Memset32Async(s, 7))          // b
		args, err := e.fn["addTo"].NewArgs(a, b, int32(n)) // Args: a, b, module
		require.NoError(t, err)
		require.NoError(t, s.LaunchArgs(args, driver.Grid((n+255)/256), driver.Block(256)))
		require.NoError(t, s.Launch(e.fn["fill"], driver.Grid((n+255)/256), driver.Block(256), c, int32(0), int32(n))) // module, c
		require.NoError(t, c.CopyFromAsync(s, b))                                                                      // c, b: c = b
		require.NoError(t, c.CopyToHostAsync(s, out))                                                                  // pin of out, c
		f := func() { calls.Add(1); hostSaw.Store(out[n-1]) }                                                          // reached only through the graph
		require.NoError(t, s.LaunchHostFunc(f))
		// The caller lets go of everything at once.
		require.NoError(t, args.Close())
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		require.NoError(t, c.Close())
		return nil
	})
	require.NoError(t, err)
	requireIdle(t, e, s, "after Capture")

	// Seven nodes in a chain; each holds what it names.
	nodes, err := g.Nodes()
	require.NoError(t, err)
	require.Len(t, nodes, 7)
	edges, err := g.Edges()
	require.NoError(t, err)
	assert.Len(t, edges, 6)
	kinds := map[Kind]int{}
	held := map[Kind]int{}
	tab := g.table
	require.NotNil(t, tab)
	for _, nd := range nodes {
		k, err := nd.Kind()
		require.NoError(t, err)
		kinds[k]++
		held[k] += tab.Owners(uintptr(nd.h))
	}
	assert.Equal(t, map[Kind]int{KindMemcpy: 3, KindMemset: 1, KindKernel: 2, KindHost: 1}, kinds)
	// Captured work's owners are the whole graph's: a node's destruction
	// does not release them early.
	assert.Equal(t, map[Kind]int{KindMemcpy: 0, KindMemset: 0, KindKernel: 0, KindHost: 0}, held, "no owner against a node")
	assert.Equal(t, 2+2+2+1+1+2+1, tab.Owners(0), "pin + a; c + b; pin + c; b; the Args; module + c; the callback")

	collect() // buffers, Args, slice and closure are reachable only from the graph
	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	collect()
	for round := 1; round <= 3; round++ {
		clear(out)
		require.NoError(t, exe.Launch(s))
		require.NoError(t, s.Synchronize())
		for i := range out {
			require.Equal(t, int32(7+3*i), out[i], "element %d, round %d", i, round)
		}
		assert.EqualValues(t, round, calls.Load(), "the host function runs at every launch")
		assert.EqualValues(t, 7+3*(n-1), hostSaw.Load(), "after the copy back")
	}
	require.NoError(t, exe.Err())
	require.NoError(t, exe.Close())
	settled(t, st0, "captured owners released after teardown")
	st := lifetime.ReadStats()
	assert.LessOrEqual(t, st.Objects, st0.Objects, "buffers, Args freed")
}

// A panic in a captured host function is reported by Exec.Err.
func TestCapturedHostFuncPanic(t *testing.T) {
	_, s := setup(t)
	g, err := Capture(s, CaptureGlobal, func(s *driver.Stream) error {
		return s.LaunchHostFunc(func() { panic("captured host boom") })
	})
	require.NoError(t, err)
	defer g.Close()
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	require.NoError(t, exe.Launch(s))
	require.NoError(t, s.Synchronize(), "the stream does not see the graph's panic")
	err = exe.Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "captured host boom")
}

// Must show: nested begin and end without begin are errors; other misuse
// is refused, and none of it leaves a stream capturing.
func TestCaptureBadInputsGPU(t *testing.T) {
	e, s := setup(t)
	s2, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()

	c, err := BeginCapture(s, CaptureRelaxed)
	require.NoError(t, err)
	defer c.Abort()
	_, err = BeginCapture(s, CaptureRelaxed)
	assert.ErrorIs(t, err, ErrCapturing, "nested begin")
	_, err = Capture(s, CaptureGlobal, func(*driver.Stream) error { return nil })
	assert.ErrorIs(t, err, ErrCapturing, "nested Capture")
	c2, err := BeginCapture(s2, CaptureRelaxed)
	require.NoError(t, err, "another stream may be captured meanwhile")
	assert.ErrorIs(t, c.Fork(s2), ErrCapturing, "fork into a stream of another capture")
	assert.ErrorIs(t, c.Join(s2), driver.ErrInvalidArgument, "join of a stream outside the capture")
	_, err = driver.AllocAsync[int32](s, 16)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "stream-ordered allocation while captured")
	require.NoError(t, s.Launch(e.fn["empty"], driver.Grid(1), driver.Block(1)))
	g, err := c.End()
	require.NoError(t, err, "the refused calls did not disturb the capture")
	require.NoError(t, g.Close())
	_, err = c.End()
	assert.ErrorIs(t, err, ErrNotCapturing, "end without begin")
	assert.NoError(t, c.Abort())
	assert.ErrorIs(t, c.Fork(s2), ErrNotCapturing)
	g2, err := c2.End()
	require.NoError(t, err, "an empty capture")
	require.NoError(t, g2.Close())

	_, err = BeginCapture(e.ctx.LegacyStream(), CaptureRelaxed)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "the legacy default stream")
	other, err := New(e.ctx)
	require.NoError(t, err)
	defer other.Close()
	foreign, err := other.Empty()
	require.NoError(t, err)
	target, err := New(e.ctx)
	require.NoError(t, err)
	defer target.Close()
	_, err = target.After(foreign).BeginCapture(s, CaptureRelaxed)
	assert.ErrorIs(t, err, ErrForeignNode)

	// Work CUDA refuses during capture invalidates it; End reports it and
	// still ends the capture. (Stream.Synchronize refuses before CUDA and
	// leaves the capture going: the sync goes through Raw here.)
	_, err = Capture(s, CaptureRelaxed, func(s *driver.Stream) error {
		require.NoError(t, s.Launch(e.fn["empty"], driver.Grid(1), driver.Block(1)))
		require.ErrorIs(t, s.Synchronize(), driver.ErrStreamCaptureUnsupported)
		st, err := IsCapturing(s)
		require.NoError(t, err)
		require.Equal(t, Capturing, st, "a refused Synchronize leaves the capture going")
		_ = s.Raw(func(h uintptr) error { return cu.StreamSynchronize(cu.CUstream(h)) }) // not allowed while capturing
		return nil
	})
	assert.Error(t, err)
	requireIdle(t, e, s, "after an invalidated capture")
	requireIdle(t, e, s2, "s2")

	// A closed stream cannot be captured; closing one mid-capture does not
	// strand it.
	s3, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	c3, err := BeginCapture(s3, CaptureThreadLocal)
	require.NoError(t, err)
	require.NoError(t, s3.Close())
	g3, err := c3.End()
	require.NoError(t, err)
	require.NoError(t, g3.Close())
	_, err = BeginCapture(s3, CaptureRelaxed)
	assert.ErrorIs(t, err, driver.ErrClosed)
}

// Concurrent captures on separate streams from separate goroutines, in
// global mode, with End on another goroutine than BeginCapture.
func TestCaptureConcurrent(t *testing.T) {
	e, _ := setup(t)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := e.ctx.NewStream(driver.StreamNonBlocking)
			if !assert.NoError(t, err) {
				return
			}
			defer s.Close()
			c, err := BeginCapture(s, CaptureGlobal)
			if !assert.NoError(t, err) {
				return
			}
			defer c.Abort()
			for j := 0; j < 10; j++ {
				assert.NoError(t, s.Launch(e.fn["empty"], driver.Grid(1), driver.Block(1)))
			}
			res := make(chan error)
			go func() {
				g, err := c.End()
				if err == nil {
					err = g.Close()
				}
				res <- err
			}()
			assert.NoError(t, <-res)
		}()
	}
	wg.Wait()
}

// Launching after a capture allocates nothing: the hook is gone.
func TestCaptureLeavesLaunchAllocFree(t *testing.T) {
	e, s := setup(t)
	out, err := driver.Alloc[int32](e.ctx, 4)
	require.NoError(t, err)
	defer out.Close()
	args, err := e.fn["fill"].NewArgs(out, int32(1), int32(4))
	require.NoError(t, err)
	defer args.Close()
	g, err := Capture(s, CaptureRelaxed, func(s *driver.Stream) error {
		return s.LaunchArgs(args, driver.Grid(1), driver.Block(4))
	})
	require.NoError(t, err)
	require.NoError(t, g.Close())
	allocs := testing.AllocsPerRun(200, func() { _ = s.LaunchArgs(args, driver.Grid(1), driver.Block(4)) })
	assert.Zero(t, allocs)
	require.NoError(t, s.Synchronize())
}

// BenchmarkCapture100 compares capturing 100 kernel launches (each with
// two buffer arguments) into a graph with adding the same 100 kernel nodes
// explicitly, graph creation and destruction included.
func BenchmarkCapture100(b *testing.B) {
	e, s := setup(b)
	x, _ := driver.Alloc[int32](e.ctx, 256)
	defer x.Close()
	y, _ := driver.Alloc[int32](e.ctx, 256)
	defer y.Close()
	fn := e.fn["addTo"]
	grid, block := driver.Grid(1), driver.Block(256)
	b.Run("capture", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g, err := Capture(s, CaptureRelaxed, func(s *driver.Stream) error {
				for i := 0; i < 100; i++ {
					if err := s.Launch(fn, grid, block, x, y, int32(256)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			g.Close()
		}
	})
	b.Run("explicit", func(b *testing.B) {
		b.ReportAllocs()
		cfg := driver.LaunchConfig{Grid: grid, Block: block}
		for b.Loop() {
			g, err := New(e.ctx)
			if err != nil {
				b.Fatal(err)
			}
			var prev Node
			for i := 0; i < 100; i++ {
				bl := g.After()
				if i > 0 {
					bl = g.After(prev)
				}
				if prev, err = bl.KernelWith(fn, cfg, x, y, int32(256)); err != nil {
					b.Fatal(err)
				}
			}
			g.Close()
		}
	})
	b.Run("explicit-batch", func(b *testing.B) {
		b.ReportAllocs()
		cfg := driver.LaunchConfig{Grid: grid, Block: block}
		for b.Loop() {
			g, err := New(e.ctx)
			if err != nil {
				b.Fatal(err)
			}
			err = g.Batch(func() error {
				var prev Node
				for i := 0; i < 100; i++ {
					bl := g.After()
					if i > 0 {
						bl = g.After(prev)
					}
					var err error
					if prev, err = bl.KernelWith(fn, cfg, x, y, int32(256)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			g.Close()
		}
	})
}

// A module or library closed while another stream of its context is being
// captured, in every mode: its unload synchronises the context, which the
// capture forbids, so it waits for the capture to end. The capture goes
// on, the graph it made runs, and the unload happens after (the lifetime
// counts return to where they were, and no release failed).
func TestCloseModuleDuringCapture(t *testing.T) {
	e, s := setup(t)
	buf, err := driver.Alloc[int32](e.ctx, 4)
	require.NoError(t, err)
	defer buf.Close()
	g1, b4 := driver.Grid(1), driver.Block(4)
	for _, mode := range modes {
		for _, lib := range []bool{false, true} {
			msg := fmt.Sprintf("%v, library %v", mode, lib)
			_ = lifetime.Errors()
			collect()
			st0 := lifetime.ReadStats()
			var closeFn func() error
			var fill *driver.Function
			if lib {
				l, err := driver.LoadLibrary(e.ptx)
				require.NoError(t, err, msg)
				fill, err = l.Function("fill")
				require.NoError(t, err, msg)
				closeFn = l.Close
			} else {
				m, err := e.ctx.LoadModule(e.ptx)
				require.NoError(t, err, msg)
				fill, err = m.Function("fill")
				require.NoError(t, err, msg)
				closeFn = m.Close
			}
			require.NoError(t, s.Launch(fill, g1, b4, buf, int32(1), int32(4)), msg) // used in e.ctx
			require.NoError(t, s.Synchronize(), msg)

			s2, err := e.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err, msg)
			c, err := BeginCapture(s2, mode)
			require.NoError(t, err, msg)
			require.NoError(t, closeFn(), msg+": Close during another stream's capture")
			require.NoError(t, s2.Launch(e.fn["fill"], g1, b4, buf, int32(40), int32(4)), msg+": the capture goes on")
			g, err := c.End()
			require.NoError(t, err, msg+": the capture ends")
			x, err := g.Instantiate()
			require.NoError(t, err, msg)
			require.NoError(t, x.Launch(s2), msg)
			require.NoError(t, s2.Synchronize(), msg)
			got, err := buf.ToHost(e.ctx.LegacyStream())
			require.NoError(t, err, msg)
			assert.Equal(t, []int32{40, 41, 42, 43}, got, msg)
			require.NoError(t, errors.Join(x.Close(), g.Close(), s2.Close()), msg)
			lifetime.Flush()
			settled(t, st0, msg+": the unload ran after the capture")
			eventually(t, func() bool { return lifetime.ReadStats().Objects <= st0.Objects }, msg+": every object destroyed")
			assert.Empty(t, lifetime.Errors(), msg+": no release failed")
			_, err = seam.Hold(fill)
			assert.ErrorIs(t, err, driver.ErrClosed, msg)
		}
	}
	requireIdle(t, e, s, "after")
}
