//go:build linux && amd64

package hostfn_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"github.com/purecuda/cuda/lifetime"
)

// A repeating callback (a graph host node: not Once, so a second run of
// the same post would not be hidden by the handle map) runs exactly once
// per trampoline call, whichever path each call takes, while the server
// keeps falling asleep and waking, from C threads and from Go threads in C
// calls at once.
func TestFastPathRepeatingCallbackRunsOncePerCall(t *testing.T) {
	fn, err := hostfn.HostFn()
	require.NoError(t, err)
	for _, w := range []time.Duration{time.Microsecond, 30 * time.Microsecond, time.Second} {
		t.Run(w.String(), func(t *testing.T) {
			withWindow(t, w)
			var n atomic.Int64
			id := hostfn.Register(hostfn.Callback{Fn: func() { n.Add(1) }})
			defer hostfn.Unregister(id)
			before := lifetime.ReadStats()
			const goroutines, calls = 6, 60
			within(t, 20*time.Second, "trampoline calls", func() {
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range calls {
							if (g+i)%3 != 0 {
								hostfn.Expect()
							}
							if i%2 == 0 {
								onForeignThread(t, id)
							} else {
								purego.SyscallN(fn, id)
							}
						}
					}()
				}
				wg.Wait()
			})
			after := lifetime.ReadStats()
			assert.EqualValues(t, goroutines*calls, n.Load(), "one run per call")
			assert.EqualValues(t, goroutines*calls,
				(after.HostFnFast-before.HostFnFast)+(after.HostFnPortable-before.HostFnPortable))
		})
	}
}

// Garbage collections (stop-the-world phases included) while the server
// polls and trampolines wait on it lose no callback and hang no caller.
func TestFastPathGCWhilePolling(t *testing.T) {
	withWindow(t, time.Second)
	fn, err := hostfn.HostFn()
	require.NoError(t, err)
	stop := make(chan struct{})
	var gcs sync.WaitGroup
	gcs.Add(1)
	go func() {
		defer gcs.Done()
		var keep [][]byte
		for {
			select {
			case <-stop:
				return
			default:
			}
			keep = append(keep, make([]byte, 1<<16))
			if len(keep) > 64 {
				keep = nil
			}
			runtime.GC()
		}
	}()
	var sum atomic.Int64
	const goroutines, calls = 4, 100
	within(t, 20*time.Second, "calls during GC", func() {
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range calls {
					v := int64(g*calls + i + 1)
					id := hostfn.Register(hostfn.Callback{Fn: func() { sum.Add(v) }, Once: true})
					hostfn.Expect()
					if i%2 == 0 {
						onForeignThread(t, id)
					} else {
						purego.SyscallN(fn, id)
					}
				}
			}()
		}
		wg.Wait()
	})
	close(stop)
	gcs.Wait()
	n := int64(goroutines * calls)
	assert.Equal(t, n*(n+1)/2, sum.Load(), "each callback ran exactly once")
}

// A callback the server runs that itself calls the trampoline (a Go thread
// in a C call, the server's own) must not wait for the server: the inner
// call takes its slot back and goes the portable way.
func TestFastPathNestedCallFromServer(t *testing.T) {
	skipOneP(t)
	withWindow(t, 2*time.Second)
	fn, err := hostfn.HostFn()
	require.NoError(t, err)
	var inner atomic.Int32
	var nestedOnServer atomic.Bool
	lifetest.Eventually(t, 30*time.Second, func() bool {
		innerID := hostfn.Register(hostfn.Callback{Fn: func() { inner.Add(1) }, Once: true})
		outer := hostfn.Register(hostfn.Callback{Fn: func() {
			if onServer(debugStack()) {
				nestedOnServer.Store(true)
			}
			purego.SyscallN(fn, innerID)
		}, Once: true})
		hostfn.Expect()
		within(t, 5*time.Second, "nested trampoline call", func() { onForeignThreadGoWait(t, outer) })
		assert.False(t, hostfn.Pending(innerID), "the inner callback ran")
		return nestedOnServer.Load()
	}, "the outer callback ran on the server")
	assert.Positive(t, inner.Load())
}

// With one P every call still runs its callback exactly once and returns,
// from a thread C created and from a Go thread in a C call, including a
// callback the server runs that blocks on a goroutine needing the P and one
// that calls the trampoline itself. (With one P the fast path is rarely
// taken: the goroutine that waits in C holds the P the server needs, so
// this asks for correctness only.)
func TestFastPathGOMAXPROCS1(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	withWindow(t, 2*time.Second)
	fn, err := hostfn.HostFn()
	require.NoError(t, err)
	var ran atomic.Int32
	const calls = 60
	within(t, 20*time.Second, "calls with GOMAXPROCS=1", func() {
		for i := range calls {
			hostfn.Expect()
			ch := make(chan struct{})
			go func() { close(ch) }()
			inner := hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true})
			id := hostfn.Register(hostfn.Callback{Fn: func() {
				<-ch
				purego.SyscallN(fn, inner)
				ran.Add(1)
			}, Once: true})
			if i%2 == 0 {
				onForeignThread(t, id)
			} else {
				purego.SyscallN(fn, id)
			}
		}
	})
	assert.EqualValues(t, 2*calls, ran.Load())
}

// With one P, Expect does not wake the server: the goroutine that waits
// for a host function waits in C (cuStreamSynchronize) and holds the only
// P, so the server could not run before the trampoline gave up, and would
// only take the P from everything else while it polls. Every call takes
// the portable path and still runs its callback.
func TestFastPathGOMAXPROCS1NotWoken(t *testing.T) {
	withWindow(t, 0) // let a server polling from an earlier test go to sleep
	lifetest.Eventually(t, 30*time.Second, func() bool {
		before := lifetime.ReadStats()
		onForeignThreadGoWait(t, hostfn.Register(hostfn.Callback{Fn: func() {}, Once: true}))
		return lifetime.ReadStats().HostFnPortable > before.HostFnPortable
	}, "the server sleeps")
	old := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	hostfn.SetPollWindow(2 * time.Second)
	before := lifetime.ReadStats()
	var ran atomic.Int32
	for range 20 {
		hostfn.Expect()
		onForeignThreadGoWait(t, hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true}))
	}
	after := lifetime.ReadStats()
	assert.EqualValues(t, 20, ran.Load())
	assert.EqualValues(t, 20, after.HostFnPortable-before.HostFnPortable)
	assert.Equal(t, before.HostFnFast, after.HostFnFast)
}

// Turning the window down to 0 applies to the polling in progress: the
// server stops within a moment even though the window it started with was
// long, and calls then take the portable path.
func TestSetPollWindowZeroWhilePolling(t *testing.T) {
	skipOneP(t)
	// A window far longer than the bound below, so that the bound is
	// generous for a loaded machine and still tells a server that stopped
	// at once from one that polls out its window.
	withWindow(t, 10*time.Minute)
	lifetest.Eventually(t, 30*time.Second, func() bool {
		before := lifetime.ReadStats()
		hostfn.Expect()
		onForeignThreadGoWait(t, hostfn.Register(hostfn.Callback{Fn: func() {}, Once: true}))
		return lifetime.ReadStats().HostFnFast > before.HostFnFast
	}, "polling")
	hostfn.SetPollWindow(0)
	start := time.Now()
	lifetest.Eventually(t, 30*time.Second, func() bool {
		before := lifetime.ReadStats()
		onForeignThreadGoWait(t, hostfn.Register(hostfn.Callback{Fn: func() {}, Once: true}))
		return lifetime.ReadStats().HostFnPortable > before.HostFnPortable
	}, "polling stops after SetPollWindow(0), though the window was 10 minutes")
	assert.Less(t, time.Since(start), 30*time.Second)
}
