//go:build linux && amd64

package hostfn_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// within runs f on a new goroutine and fails the test if it has not
// returned after d, instead of hanging the test binary.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		require.FailNow(t, "hung", what)
	}
}

// onServer reports whether a stack was taken on the host-function server
// goroutine (the fast path) rather than on a worker (the portable path).
func onServer(stack []byte) bool { return bytes.Contains(stack, []byte("hostfn.serve(")) }

// sinkFunc is a PanicSink made of a function.
type sinkFunc func(v any, stack []byte)

func (f sinkFunc) CallbackPanicked(v any, stack []byte) { f(v, stack) }

// A repeating callback (a graph host node: not Once, so a second run of
// the same post would not be hidden by the handle map) runs exactly once
// per trampoline call, whichever path each call takes, while the server
// keeps falling asleep and waking, from C threads and from Go threads in C
// calls at once.
func TestReviewFastPathRepeatingCallbackRunsOncePerCall(t *testing.T) {
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
func TestReviewFastPathGCWhilePolling(t *testing.T) {
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
func TestReviewFastPathNestedCallFromServer(t *testing.T) {
	skipOneP(t)
	withWindow(t, 2*time.Second)
	fn, err := hostfn.HostFn()
	require.NoError(t, err)
	var inner atomic.Int32
	var nestedOnServer atomic.Bool
	lifetest.Eventually(t, 5*time.Second, func() bool {
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
func TestReviewFastPathGOMAXPROCS1(t *testing.T) {
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
func TestReviewFastPathGOMAXPROCS1NotWoken(t *testing.T) {
	withWindow(t, 0) // let a server polling from an earlier test go to sleep
	lifetest.Eventually(t, 5*time.Second, func() bool {
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
func TestReviewSetPollWindowZeroWhilePolling(t *testing.T) {
	skipOneP(t)
	withWindow(t, 10*time.Second)
	lifetest.Eventually(t, 5*time.Second, func() bool {
		before := lifetime.ReadStats()
		hostfn.Expect()
		onForeignThreadGoWait(t, hostfn.Register(hostfn.Callback{Fn: func() {}, Once: true}))
		return lifetime.ReadStats().HostFnFast > before.HostFnFast
	}, "polling")
	hostfn.SetPollWindow(0)
	start := time.Now()
	lifetest.Eventually(t, 2*time.Second, func() bool {
		before := lifetime.ReadStats()
		onForeignThreadGoWait(t, hostfn.Register(hostfn.Callback{Fn: func() {}, Once: true}))
		return lifetime.ReadStats().HostFnPortable > before.HostFnPortable
	}, "polling stops after SetPollWindow(0), though the window was 10s")
	assert.Less(t, time.Since(start), 2*time.Second)
}

// On the fast path a panicking PanicSink is contained as on the portable
// path, and a Goexit in a callback reports a stack that shows who called
// Goexit; the server keeps serving afterwards.
func TestReviewFastPathSinkPanicAndGoexitStack(t *testing.T) {
	skipOneP(t)
	withWindow(t, 2*time.Second)
	var sinkCalls atomic.Int32
	var fastPanic atomic.Bool
	bad := sinkFunc(func(v any, stack []byte) {
		sinkCalls.Add(1)
		if onServer(stack) {
			fastPanic.Store(true)
		}
		panic("sink failed")
	})
	lifetest.Eventually(t, 5*time.Second, func() bool {
		hostfn.Expect()
		within(t, 5*time.Second, "panicking sink", func() {
			onForeignThreadGoWait(t, hostfn.Register(hostfn.Callback{Fn: panickyCallback, Once: true, Sink: bad}))
		})
		return fastPanic.Load()
	}, "a panic reported on the server")

	var stacks [][]byte
	var mu sync.Mutex
	rec := sinkFunc(func(v any, stack []byte) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := v.(*hostfn.Goexited); ok && onServer(stack) {
			stacks = append(stacks, stack)
		}
	})
	lifetest.Eventually(t, 5*time.Second, func() bool {
		var deferred atomic.Bool
		hostfn.Expect()
		within(t, 5*time.Second, "goexiting callback", func() {
			onForeignThreadGoWait(t, hostfn.Register(hostfn.Callback{Fn: func() { goexitingCallback(&deferred) }, Once: true, Sink: rec}))
		})
		require.True(t, deferred.Load())
		mu.Lock()
		defer mu.Unlock()
		return len(stacks) > 0
	}, "a Goexit reported on the server")
	mu.Lock()
	assert.Contains(t, string(stacks[0]), "goexitingCallback", "the stack shows who called Goexit")
	mu.Unlock()

	lifetest.Eventually(t, 5*time.Second, func() bool {
		before := lifetime.ReadStats()
		hostfn.Expect()
		onForeignThreadGoWait(t, hostfn.Register(hostfn.Callback{Fn: func() {}, Once: true}))
		return lifetime.ReadStats().HostFnFast > before.HostFnFast
	}, "served fast afterwards")
}

// A PanicSink that calls runtime.Goexit — a test's sink that calls
// t.Fatal — must not hang the CUDA thread forever and lose the server.
// Callback.Sink says a sink must not call Goexit; on the portable path
// breaking that rule crashes the process loudly, but on the fast path the
// nested Goexit aborts serve's deferred handler before finishSlot and the
// restart: the trampoline sleeps on its slot for ever, the slot is never
// freed, and fastServer stays busy, so no server polls again. Run in a
// child process, since the failure is a hang.
func TestReviewFastPathSinkGoexitDoesNotHang(t *testing.T) {
	const env = "LIFETIME_REVIEW_SINK_GOEXIT_CHILD"
	if os.Getenv(env) == "1" {
		os.Exit(sinkGoexitChild(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestReviewFastPathSinkGoexitDoesNotHang$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("NOFAST")) {
		t.Skip("the child never got the fast path")
	}
	require.NoError(t, err, "child:\n%s", out)
	require.Contains(t, string(out), "CHILD OK", "child:\n%s", out)
}

func sinkGoexitChild(t *testing.T) int {
	hostfn.SetPollWindow(2 * time.Second)
	var goexited atomic.Bool
	sink := sinkFunc(func(v any, stack []byte) {
		if onServer(stack) { // on the portable path a Goexit here is fatal
			goexited.Store(true)
			runtime.Goexit()
		}
	})
	call := func(id uintptr) bool {
		done := make(chan struct{})
		go func() { defer close(done); onForeignThreadGoWait(t, id) }()
		select {
		case <-done:
			return true
		case <-time.After(3 * time.Second):
			return false
		}
	}
	for range 200 {
		hostfn.Expect()
		if !call(hostfn.Register(hostfn.Callback{Fn: panickyCallback, Once: true, Sink: sink})) {
			fmt.Println("HANG: the trampoline never returned after its sink called Goexit")
			return 3
		}
		if !goexited.Load() {
			continue
		}
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			before := lifetime.ReadStats()
			hostfn.Expect()
			if !call(hostfn.Register(hostfn.Callback{Fn: func() {}, Once: true})) {
				fmt.Println("HANG: a later call never returned")
				return 4
			}
			if lifetime.ReadStats().HostFnFast > before.HostFnFast {
				fmt.Println("CHILD OK")
				return 0
			}
			time.Sleep(time.Millisecond)
		}
		fmt.Println("LOST SERVER: no call is served fast after a sink's Goexit")
		return 5
	}
	fmt.Println("NOFAST")
	return 0
}

func debugStack() []byte {
	buf := make([]byte, 64<<10)
	return buf[:runtime.Stack(buf, false)]
}

// onForeignThreadGoWait is onForeignThread, except that the calling
// goroutine waits for the thread in Go (pthread_tryjoin_np and a sleep),
// not in a blocking C call that keeps its P.
func onForeignThreadGoWait(t *testing.T, id uintptr) {
	t.Helper()
	fn, err := hostfn.HostFn()
	require.NoError(t, err)
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	create, err := purego.Dlsym(libc, "pthread_create")
	require.NoError(t, err)
	tryjoin, err := purego.Dlsym(libc, "pthread_tryjoin_np")
	require.NoError(t, err)
	tid := new(uint64)
	var pin runtime.Pinner
	pin.Pin(tid)
	defer pin.Unpin()
	r, _, _ := purego.SyscallN(create, uintptr(unsafe.Pointer(tid)), 0, fn, id)
	require.Zero(t, r, "pthread_create")
	for {
		r, _, _ = purego.SyscallN(tryjoin, uintptr(*tid), 0)
		if r == 0 {
			return
		}
		require.EqualValues(t, 16, r, "pthread_tryjoin_np") // EBUSY
		time.Sleep(10 * time.Microsecond)
	}
}
