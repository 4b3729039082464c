//go:build linux && amd64

package hostfn_test

import (
	"bytes"
	"context"
	"fmt"
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

	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
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
		lifetest.Eventually(t, 30*time.Second, func() bool {
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
	lifetest.Eventually(t, 30*time.Second, func() bool {
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
	lifetest.Eventually(t, 30*time.Second, func() bool { // the server stops polling
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
	// The window passes: the server sleeps. A loaded machine may keep the
	// server off a CPU well past the 1 ms, so this waits until a call
	// takes the portable path rather than sleeping for a fixed time.
	probes := int32(0)
	lifetest.Eventually(t, 30*time.Second, func() bool {
		probes++
		before := lifetime.ReadStats()
		onForeignThread(t, hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true}))
		return lifetime.ReadStats().HostFnPortable > before.HostFnPortable
	}, "the server sleeps once the 1 ms window passed")
	// One more call runs once, by one path: which one is not fixed, since
	// the probe's call may have set the server polling again for a window.
	before = lifetime.ReadStats()
	onForeignThread(t, hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true}))
	after = lifetime.ReadStats()
	assert.EqualValues(t, 4+probes, ran.Load())
	assert.EqualValues(t, 1, (after.HostFnPortable-before.HostFnPortable)+(after.HostFnFast-before.HostFnFast))
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
	lifetest.Eventually(t, 30*time.Second, func() bool { return !hostfn.Pending(first) }, "the first callback started")
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
	lifetest.Eventually(t, 30*time.Second, func() bool {
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

// On the fast path a panicking PanicSink is contained as on the portable
// path, and a Goexit in a callback reports a stack that shows who called
// Goexit; the server keeps serving afterwards.
func TestFastPathSinkPanicAndGoexitStack(t *testing.T) {
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
	lifetest.Eventually(t, 30*time.Second, func() bool {
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
	lifetest.Eventually(t, 30*time.Second, func() bool {
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

	lifetest.Eventually(t, 30*time.Second, func() bool {
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
func TestFastPathSinkGoexitDoesNotHang(t *testing.T) {
	const env = "PURECUDA_HOSTFN_SINK_GOEXIT_CHILD"
	if os.Getenv(env) == "1" {
		os.Exit(sinkGoexitChild(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFastPathSinkGoexitDoesNotHang$", "-test.count=1")
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
