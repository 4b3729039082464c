//go:build linux

package fakedriver_test

// Helpers the tests of this package share: the fixture, fakecuda's
// controls (through internal/faketest, the one way to run a test against
// fakecuda) and waits for the release queue.

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// TestMain builds fakecuda and points the loader at it before anything
// opens the driver (internal/faketest).
func TestMain(m *testing.M) { faketest.Main(m) }

// need skips t where fakecuda could not be built, with the reason.
func need(t testing.TB) {
	t.Helper()
	faketest.Need(t)
}

// fcall calls one of fakecuda's fake_* controls or counters with integer
// arguments.
func fcall(t testing.TB, name string, args ...uintptr) int64 {
	t.Helper()
	return faketest.Call(t, name, args...)
}

// fixture is what most tests start from: device 0's primary context, a
// stream, and the kernels of fakecuda's module.
type fixture struct {
	ctx   *driver.Context
	s     *driver.Stream
	mod   *driver.Module
	fill  *driver.Function
	add4  *driver.Function
	empty *driver.Function
}

// setup makes the fixture, after letting what earlier tests left behind
// drain; it is closed when t ends.
func setup(t testing.TB) *fixture {
	t.Helper()
	need(t)
	// Objects earlier tests forgot are freed by cleanups at some GC: let
	// that happen now, and their queued work run, so that it does not move
	// the fake's live counters under this test (go test -shuffle puts any
	// test after any other).
	gcAll()
	if fcall(t, "fake_quiesce", 30000) != 1 {
		t.Fatal("fakecuda's queues did not drain")
	}
	// Bad uses counted so far are earlier tests' (a model test makes some
	// on purpose), not this one's.
	fcall(t, "fake_reset_counters")
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	f := &fixture{ctx: ctx}
	f.s, err = ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	f.mod, err = ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	for name, dst := range map[string]**driver.Function{"fill": &f.fill, "add4": &f.add4, "empty": &f.empty} {
		*dst, err = f.mod.Function(name)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		f.mod.Close()
		f.s.Close()
		ctx.Close()
	})
	return f
}

// g1 and b1 are a launch of one thread.
var g1, b1 = driver.Grid(1), driver.Block(1)

// The graph layer against fakecuda's graph model: the lifetime promises of
// package graph checked on a CPU, where the fake counts every use of a
// freed pointer or destroyed handle and every node add without a context.

var graphCfg = driver.LaunchConfig{Grid: driver.Grid(1), Block: driver.Block(1)}

// gcAll runs the garbage collector and the cleanups it queues, and drains
// the release queue.
func gcAll() {
	for i := 0; i < 4; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	lifetime.Flush()
}

// settle waits up to 30 s for cond, flushing the release queue: the fake
// runs user-object destructors on a thread of its own, as CUDA does.
func settle(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s (%+v)", msg, lifetime.ReadStats())
		}
		time.Sleep(time.Millisecond)
		lifetime.Flush()
	}
}

// noBadUses checks that nothing reached the fake with a freed pointer, a
// destroyed handle, or without a context where one is needed
// (faketest.NoBadUses), and resets the counters.
func noBadUses(t *testing.T) {
	t.Helper()
	defer fcall(t, "fake_reset_counters")
	faketest.NoBadUses(t)
}

// assertClosedOr fails unless err is nil or matches ErrClosed.
func assertClosedOr(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, driver.ErrClosed) {
		t.Errorf("unexpected error: %v", err)
	}
}

// setupGraph is setup with fakecuda's bad-use counters reset.
func setupGraph(t *testing.T) *fixture {
	t.Helper()
	f := setup(t)
	fcall(t, "fake_reset_counters")
	return f
}

// ltSetup is setup with fakecuda's bad-use counters reset; when the test
// ends it undoes every slow-down, failure and sticky error, waits for the
// fake's queues, and checks that nothing reached the fake with a freed
// pointer or a destroyed handle.
func ltSetup(t *testing.T) *fixture {
	t.Helper()
	f := setup(t)
	// What earlier tests left queued runs first, so that it does not count
	// against this one.
	fcall(t, "fake_quiesce", 30000)
	lifetime.Flush()
	fcall(t, "fake_reset_counters")
	before := lifetime.ReadStats()
	t.Cleanup(func() {
		fcall(t, "fake_set_copy_delay_us", 0)
		fcall(t, "fake_set_kernel_delay_us", 0)
		fcall(t, "fake_set_launch_call_delay_us", 0)
		fcall(t, "fake_set_record_call_delay_us", 0)
		fcall(t, "fake_fail_clear")
		assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000), "fakecuda's queues drained")
		fcall(t, "fake_clear_sticky_error")
		ltNoBadUses(t)
		// Nothing the test made is left pinned or registered (I10, I11).
		assert.True(t, ltSettle(func() bool {
			now := lifetime.ReadStats()
			return now.Pinned <= before.Pinned && now.Callbacks <= before.Callbacks
		}), "pins and callbacks back to %d and %d: %+v", before.Pinned, before.Callbacks, lifetime.ReadStats())
		assert.Equal(t, before.ReleaseErrors, lifetime.ReadStats().ReleaseErrors, "no release failed: %v", lifetime.Errors())
	})
	return f
}

// ltNoBadUses checks fakecuda's bad-use counters, and resets them.
func ltNoBadUses(t *testing.T) {
	t.Helper()
	ptr, handle := fcall(t, "fake_bad_ptr_uses"), fcall(t, "fake_bad_handle_uses")
	if ptr != 0 || handle != 0 {
		t.Errorf("fakecuda saw %d uses of freed or unknown memory and %d of destroyed handles; the latest: %s", ptr, handle, faketest.LastBadUse(t))
	}
	fcall(t, "fake_reset_counters")
}

// ltClosedOr fails unless err is nil or matches ErrClosed.
func ltClosedOr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, driver.ErrClosed) {
		t.Errorf("%s: %v", what, err)
	}
}

// settleWithin flushes the release queue and collects garbage until cond
// holds or d passes; unlike settle it does not end the test.
func settleWithin(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		runtime.GC()
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	return true
}

// ltSettle is settleWithin 30 s.
func ltSettle(cond func() bool) bool { return settleWithin(30*time.Second, cond) }

// ltRace runs n goroutines calling op until stop is closed, and close
// after a short while; it returns once all have returned.
func ltRace(n int, op func(g int), close func()) { ltRaceN(n, 1<<30, op, close) }

// ltRaceN is ltRace with at most max calls per goroutine.
func ltRaceN(n, max int, op func(g int), close func()) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < max; i++ {
				select {
				case <-stop:
					return
				default:
				}
				op(g)
				if i > 10000 {
					runtime.Gosched()
				}
			}
		}()
	}
	time.Sleep(200 * time.Microsecond)
	close()
	time.Sleep(200 * time.Microsecond) // calls after the Close must fail cleanly too
	closeStop(stop)
	wg.Wait()
}

func closeStop(c chan struct{}) { close(c) }

// noConcurrentGraphCalls checks that fakecuda saw no two calls on one graph
// (or on an executable and its graph) at once.
func noConcurrentGraphCalls(t *testing.T) {
	t.Helper()
	assert.Zero(t, fcall(t, "fake_concurrent_graph_calls"), "concurrent calls on one graph: %s", faketest.LastBadUse(t))
}

// graphCallDelay widens every graph call by us microseconds for the test.
func graphCallDelay(t *testing.T, us uintptr) {
	t.Helper()
	fcall(t, "fake_set_graph_call_delay_us", us)
	t.Cleanup(func() { fcall(t, "fake_set_graph_call_delay_us", 0) })
}

// learnLaunch launches fn twice and waits: the first launch reads the
// kernel's parameters, the second remembers the buffer type, and later
// launches with the same types take Launch's quick path.
func learnLaunch(t *testing.T, s *driver.Stream, fn *driver.Function, args ...any) {
	t.Helper()
	for range 2 {
		require.NoError(t, s.Launch(fn, driver.Grid(1), driver.Block(1), args...))
	}
	require.NoError(t, s.Synchronize())
}

// deep recurses n frames, each with a large local array, before calling f:
// the goroutine's stack grows (and moves) on the way, at a different point
// for each n.
//
//go:noinline
func deep(n int, f func()) int {
	var pad [512]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		f()
		return int(pad[0])
	}
	return deep(n-1, f) + int(pad[n%len(pad)])
}

// hold makes the fake's work under control ("fake_set_copy_delay_us",
// "fake_set_kernel_delay_us", "fake_set_launch_call_delay_us", …) wait
// until the returned release is called (or the test ends): work held so
// stays "not yet run" however slow or loaded the machine is, which a delay
// in time cannot promise.
func hold(t *testing.T, control string) (release func()) {
	t.Helper()
	fcall(t, control, ^uintptr(0)) // -1: a hold
	release = func() { fcall(t, control, 0) }
	t.Cleanup(release)
	return release
}

// waitGauge waits up to 30 s until the fake's gauge reaches at least n
// (a held call has got as far as its hold, say), and fails the test if it
// does not.
func waitGauge(t *testing.T, gauge string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for fcall(t, gauge) < n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s to reach %d", gauge, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
