//go:build linux && amd64

package hostfn_test

import (
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// withWindow sets the poll window for one test.
func withWindow(t *testing.T, d time.Duration) {
	t.Helper()
	old := hostfn.SetPollWindow(d)
	t.Cleanup(func() { hostfn.SetPollWindow(old) })
}

// skipOneP skips a test of the fast path with GOMAXPROCS at 1, where
// Expect does not wake the server (the goroutine waiting in C holds the
// only P, so the server could not run in time).
func skipOneP(t *testing.T) {
	t.Helper()
	if runtime.GOMAXPROCS(0) == 1 {
		t.Skip("with one P the host-function server is not woken")
	}
}

// callC calls the trampoline as CUDA would, through the C convention, from
// a Go thread in a system call.
func callC(t *testing.T, id uintptr) {
	t.Helper()
	fn, err := hostfn.HostFn()
	require.NoError(t, err)
	purego.SyscallN(fn, id)
}

// Invariants I6, I7: while the server polls (after Expect), the assembly
// trampoline hands a callback to it without entering Go on the calling
// thread — from a thread C created and from a Go thread in a C call — and
// the callback runs exactly once. (Where threads outnumber CPUs the server
// may not get a CPU in time and a call takes the portable path instead, so
// the test asks for fast calls, not for every call to be fast.)
func TestFastPathServes_I6_I7(t *testing.T) {
	skipOneP(t)
	withWindow(t, 2*time.Second)
	var ran, tries atomic.Int32
	for _, call := range []func(t *testing.T, id uintptr){onForeignThread, callC} {
		lifetest.Eventually(t, 5*time.Second, func() bool {
			tries.Add(1)
			before := lifetime.ReadStats()
			hostfn.Expect()
			id := hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true})
			call(t, id)
			call(t, id) // ran already: nothing
			after := lifetime.ReadStats()
			require.EqualValues(t, 2, (after.HostFnFast-before.HostFnFast)+(after.HostFnPortable-before.HostFnPortable))
			return after.HostFnFast-before.HostFnFast == 2
		}, "calls served by the polling goroutine")
	}
	assert.Equal(t, tries.Load(), ran.Load(), "each callback ran exactly once")
}

// Invariant I6 on the fast path: a panic and a runtime.Goexit in a
// callback the server runs are contained and reported; after a Goexit a new
// server takes over and the next callback is served fast again.
func TestFastPathContainsPanicAndGoexit_I6(t *testing.T) {
	skipOneP(t)
	withWindow(t, 2*time.Second)
	sink := &recordingSink{}
	before := lifetime.ReadStats()
	hostfn.Expect()
	onForeignThread(t, hostfn.Register(hostfn.Callback{Fn: panickyCallback, Once: true, Sink: sink}))
	var deferred atomic.Bool
	hostfn.Expect()
	onForeignThread(t, hostfn.Register(hostfn.Callback{Fn: func() { goexitingCallback(&deferred) }, Once: true, Sink: sink}))
	assert.True(t, deferred.Load())
	var ran atomic.Int32
	lifetest.Eventually(t, 5*time.Second, func() bool {
		hostfn.Expect()
		callC(t, hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true}))
		return lifetime.ReadStats().HostFnFast-before.HostFnFast >= 3
	}, "a new server serves after a Goexit")
	vals, _ := sink.got()
	require.Len(t, vals, 2)
	assert.Equal(t, "host function failed", vals[0])
	assert.IsType(t, &hostfn.Goexited{}, vals[1])
	assert.EqualValues(t, 2, lifetime.ReadStats().CallbackPanics-before.CallbackPanics)
	assert.Positive(t, ran.Load())
}

// With the poll window at 0, and once the server has gone to sleep, every
// call takes the portable trampoline and still runs its callback.
func TestFastPathOffAndAsleep_I6(t *testing.T) {
	withWindow(t, 0)
	var ran atomic.Int32
	lifetest.Eventually(t, 5*time.Second, func() bool { // the server stops polling
		before := lifetime.ReadStats()
		callC(t, hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true}))
		return lifetime.ReadStats().HostFnPortable > before.HostFnPortable
	}, "polling stops with the window at 0")
	ran.Store(0)
	before := lifetime.ReadStats()
	hostfn.Expect() // does nothing with the window at 0
	for range 3 {
		callC(t, hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true}))
	}
	after := lifetime.ReadStats()
	assert.EqualValues(t, 3, ran.Load())
	assert.EqualValues(t, 3, after.HostFnPortable-before.HostFnPortable)
	assert.Equal(t, before.HostFnFast, after.HostFnFast)

	hostfn.SetPollWindow(time.Millisecond)
	hostfn.Expect()
	time.Sleep(50 * time.Millisecond) // the window passes: the server sleeps
	before = lifetime.ReadStats()
	onForeignThread(t, hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true}))
	after = lifetime.ReadStats()
	assert.EqualValues(t, 4, ran.Load())
	assert.EqualValues(t, 1, after.HostFnPortable-before.HostFnPortable)
}

// A callback that runs long makes its trampoline sleep (futex) until it is
// done, and meanwhile the server is busy, so another callback takes the
// portable path: a callback that waits for another one, queued later on
// another stream, does not deadlock.
func TestFastPathLongCallback_I6(t *testing.T) {
	withWindow(t, 2*time.Second)
	release := make(chan struct{})
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	hostfn.Expect()
	first := hostfn.Register(hostfn.Callback{Fn: func() {
		<-release // waits for the second callback
		time.Sleep(20 * time.Millisecond)
		note("first")
	}, Once: true})
	second := hostfn.Register(hostfn.Callback{Fn: func() { note("second"); close(release) }, Once: true})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); onForeignThread(t, first) }()
	lifetest.Eventually(t, 5*time.Second, func() bool { return !hostfn.Pending(first) }, "the first callback started")
	onForeignThread(t, second)
	wg.Wait()
	assert.Equal(t, []string{"second", "first"}, order)
}

// Many threads call the trampoline at once while the server keeps falling
// asleep and waking (a 1 µs window, Expect before each call): every
// callback runs exactly once, whichever path it took, and no call hangs.
// More callers than slots run at once, so some find every slot taken.
func TestFastPathRacesSleep_I6(t *testing.T) {
	for _, w := range []time.Duration{time.Microsecond, time.Second} {
		t.Run(w.String(), func(t *testing.T) {
			withWindow(t, w)
			before := lifetime.ReadStats()
			fn, err := hostfn.HostFn()
			require.NoError(t, err)
			const goroutines, calls = 24, 200
			var sum atomic.Int64
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range calls {
						v := int64(g*calls + i + 1)
						id := hostfn.Register(hostfn.Callback{Fn: func() { sum.Add(v) }, Once: true})
						hostfn.Expect()
						if i%2 == 0 { // as CUDA calls it
							onForeignThread(t, id)
						} else { // as a C call on a Go thread would
							purego.SyscallN(fn, id)
						}
						if i%50 == 0 {
							runtime.Gosched()
						}
					}
				}()
			}
			wg.Wait()
			n := int64(goroutines * calls)
			assert.Equal(t, n*(n+1)/2, sum.Load(), "each callback ran exactly once")
			after := lifetime.ReadStats()
			served := (after.HostFnFast - before.HostFnFast) + (after.HostFnPortable - before.HostFnPortable)
			assert.EqualValues(t, n, served)
			t.Logf("fast %d, portable %d", after.HostFnFast-before.HostFnFast, after.HostFnPortable-before.HostFnPortable)
		})
	}
}

// SetPollWindow returns the previous window and treats a negative one as 0.
func TestSetPollWindow(t *testing.T) {
	old := hostfn.SetPollWindow(-time.Second)
	defer hostfn.SetPollWindow(old)
	assert.Equal(t, hostfn.DefaultPollWindow, old)
	assert.Equal(t, time.Duration(0), hostfn.SetPollWindow(time.Millisecond))
	assert.Equal(t, time.Millisecond, hostfn.SetPollWindow(time.Duration(1<<63-1)))
	assert.Equal(t, hostfn.MaxPollWindow, hostfn.SetPollWindow(old), "no overflow of the deadline")
}

// Invariant I8 on the fast path: a callback the server runs is in a
// callback (InCallback), so a last release there is queued.
func TestFastPathInCallback_I8(t *testing.T) {
	skipOneP(t)
	withWindow(t, 2*time.Second)
	lifetest.Eventually(t, 5*time.Second, func() bool {
		before := lifetime.ReadStats()
		hostfn.Expect()
		var in atomic.Bool
		id := hostfn.Register(hostfn.Callback{Fn: func() { in.Store(hostfn.InCallback()) }, Once: true})
		callC(t, id)
		require.True(t, in.Load(), "InCallback in a callback, on either path")
		return lifetime.ReadStats().HostFnFast > before.HostFnFast
	}, "a callback served by the polling goroutine")
	assert.False(t, hostfn.InCallback())
}
