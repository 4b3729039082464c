package hostfn_test

import (
	"errors"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// recordingSink is a PanicSink that keeps what it receives.
type recordingSink struct {
	mu     sync.Mutex
	vals   []any
	stacks [][]byte
}

func (s *recordingSink) CallbackPanicked(v any, stack []byte) {
	s.mu.Lock()
	s.vals = append(s.vals, v)
	s.stacks = append(s.stacks, stack)
	s.mu.Unlock()
}

func (s *recordingSink) got() ([]any, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]any(nil), s.vals...), append([][]byte(nil), s.stacks...)
}

// Invariant I6: invoking id 0, an id never handed out, or the id of a
// callback that was unregistered or already ran (Once) runs nothing and
// does not crash.
func TestInvokeUnknownID_I6(t *testing.T) {
	before := lifetime.ReadStats()
	var ran atomic.Int32
	id := hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true})
	hostfn.Invoke(id)
	require.EqualValues(t, 1, ran.Load())
	for _, bad := range []uintptr{0, id, id + 1, ^uintptr(0), 12345} {
		hostfn.Invoke(bad)
	}
	gone := hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }})
	require.True(t, hostfn.Unregister(gone))
	require.False(t, hostfn.Unregister(gone))
	hostfn.Invoke(gone)
	noFn := hostfn.Register(hostfn.Callback{Once: true}) // a nil Fn is harmless
	hostfn.Invoke(noFn)
	assert.False(t, hostfn.Pending(noFn))
	assert.EqualValues(t, 1, ran.Load())
	assert.Equal(t, before.Callbacks, lifetime.ReadStats().Callbacks)
	assert.Equal(t, before.CallbackPanics, lifetime.ReadStats().CallbackPanics)
}

// Invariant I6: a Once callback runs exactly once even when many
// goroutines invoke its id at the same time; it is gone afterwards.
func TestInvokeOnceRunsOnceConcurrently_I6(t *testing.T) {
	before := lifetime.ReadStats()
	for range 200 {
		var ran atomic.Int32
		id := hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true})
		require.True(t, hostfn.Pending(id))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 16 {
			wg.Add(1)
			go func() { defer wg.Done(); <-start; hostfn.Invoke(id) }()
		}
		close(start)
		wg.Wait()
		require.EqualValues(t, 1, ran.Load())
		require.False(t, hostfn.Pending(id))
		require.False(t, hostfn.Unregister(id), "a Once callback that ran is gone")
	}
	assert.Equal(t, before.Callbacks, lifetime.ReadStats().Callbacks)
}

// Invariant I6: a non-Once callback runs at every Invoke, concurrent ones
// included, until Unregister; Invoke returns only when it has finished.
func TestInvokeRepeatingCallback_I6(t *testing.T) {
	var ran atomic.Int32
	id := hostfn.Register(hostfn.Callback{Fn: func() { runtime.Gosched(); ran.Add(1) }})
	hostfn.Invoke(id)
	require.EqualValues(t, 1, ran.Load(), "Invoke waits for the callback")
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() { defer wg.Done(); hostfn.Invoke(id) }()
	}
	wg.Wait()
	assert.EqualValues(t, 33, ran.Load())
	assert.True(t, hostfn.Pending(id))
	require.True(t, hostfn.Unregister(id))
	hostfn.Invoke(id)
	assert.EqualValues(t, 33, ran.Load())
}

func panickyCallback() { panic("host function failed") }

// Invariant I6: a panic in a callback is recovered and handed to its Sink
// with the panic value and a stack that shows where it panicked; without a
// Sink it is counted. Either way it is counted in Stats.CallbackPanics.
func TestCallbackPanicGoesToSink_I6(t *testing.T) {
	before := lifetime.ReadStats().CallbackPanics
	sink := &recordingSink{}
	id := hostfn.Register(hostfn.Callback{Fn: panickyCallback, Once: true, Sink: sink})
	require.NotPanics(t, func() { hostfn.Invoke(id) })
	vals, stacks := sink.got()
	require.Len(t, vals, 1)
	assert.Equal(t, "host function failed", vals[0])
	assert.Contains(t, string(stacks[0]), "panickyCallback", "the stack shows the panicking function")
	assert.Equal(t, before+1, lifetime.ReadStats().CallbackPanics)

	// No sink: counted and dropped. An error value and panic(nil) too.
	for _, f := range []func(){
		panickyCallback,
		func() { panic(errors.New("an error")) },
		func() { panic(nil) },
	} {
		id := hostfn.Register(hostfn.Callback{Fn: f, Once: true})
		require.NotPanics(t, func() { hostfn.Invoke(id) })
	}
	assert.Equal(t, before+4, lifetime.ReadStats().CallbackPanics)

	// panic(nil) reaches the sink as *runtime.PanicNilError, not as "no panic".
	id = hostfn.Register(hostfn.Callback{Fn: func() { panic(nil) }, Once: true, Sink: sink})
	hostfn.Invoke(id)
	vals, _ = sink.got()
	require.Len(t, vals, 2)
	var pne *runtime.PanicNilError
	assert.ErrorAs(t, vals[1].(error), &pne)
}

func goexitingCallback(deferred *atomic.Bool) {
	defer deferred.Store(true) // like t.FailNow, Goexit runs deferred calls
	runtime.Goexit()
}

// Invariant I6: runtime.Goexit in a callback (what t.FailNow does) ends
// only a worker goroutine of ours: the callback's deferred calls run,
// Invoke returns, the Sink gets *Goexited with the stack of the call, and
// the worker pool keeps working afterwards — more Goexits than the pool
// has idle workers included.
func TestCallbackGoexitContained_I6(t *testing.T) {
	before := lifetime.ReadStats().CallbackPanics
	sink := &recordingSink{}
	const n = 200 // more than the idle pool holds
	var deferred atomic.Int32
	for range n {
		var d atomic.Bool
		id := hostfn.Register(hostfn.Callback{Fn: func() { goexitingCallback(&d) }, Once: true, Sink: sink})
		require.NotPanics(t, func() { hostfn.Invoke(id) })
		if d.Load() {
			deferred.Add(1)
		}
	}
	assert.EqualValues(t, n, deferred.Load(), "deferred calls ran")
	vals, stacks := sink.got()
	require.Len(t, vals, n)
	for i, v := range vals {
		var g *hostfn.Goexited
		require.ErrorAs(t, v.(error), &g)
		assert.Contains(t, g.Error(), "Goexit")
		assert.Contains(t, string(stacks[i]), "goexitingCallback", "the stack shows who called Goexit")
	}
	assert.Equal(t, before+n, lifetime.ReadStats().CallbackPanics)

	// Concurrent Goexits mixed with ordinary callbacks.
	var ok atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn := func() { ok.Add(1) }
			if i%2 == 0 {
				fn = func() { runtime.Goexit() }
			}
			hostfn.Invoke(hostfn.Register(hostfn.Callback{Fn: fn, Once: true}))
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 32, ok.Load())

	// The pool still works.
	var ran atomic.Int32
	for range 100 {
		hostfn.Invoke(hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true}))
	}
	assert.EqualValues(t, 100, ran.Load())
}

// failNower is a stand-in for testing.T in a host function: FailNow marks
// failure and calls runtime.Goexit, as (*testing.T).FailNow does.
type failNower struct{ failed atomic.Bool }

func (f *failNower) Errorf(format string, args ...any) { f.failed.Store(true) }
func (f *failNower) FailNow()                          { f.failed.Store(true); runtime.Goexit() }

// Invariant I6: a require assertion failing inside a host function (the
// t.FailNow case) is contained and reported as *Goexited.
func TestCallbackRequireFailureContained_I6(t *testing.T) {
	sink := &recordingSink{}
	fake := &failNower{}
	after := false
	id := hostfn.Register(hostfn.Callback{Fn: func() {
		require.Equal(fake, 1, 2)
		after = true
	}, Once: true, Sink: sink})
	hostfn.Invoke(id)
	assert.True(t, fake.failed.Load())
	assert.False(t, after, "FailNow stopped the callback")
	vals, _ := sink.got()
	require.Len(t, vals, 1)
	assert.IsType(t, &hostfn.Goexited{}, vals[0])
}

// panickySink panics in CallbackPanicked.
type panickySink struct{ calls atomic.Int32 }

func (s *panickySink) CallbackPanicked(any, []byte) { s.calls.Add(1); panic("sink failed") }

// Invariant I6: nothing escapes into C even when the Sink itself panics.
func TestSinkPanicContained_I6(t *testing.T) {
	sink := &panickySink{}
	id := hostfn.Register(hostfn.Callback{Fn: panickyCallback, Once: true, Sink: sink})
	require.NotPanics(t, func() { hostfn.Invoke(id) })
	assert.EqualValues(t, 1, sink.calls.Load())
}

// Invariant I6: Cancel removes a callback that will never be called and
// runs its OnCancel instead of Fn; for a Once callback exactly one of Fn
// and OnCancel runs even when Invoke and Cancel race. Panics and Goexit in
// OnCancel are contained like those of Fn.
func TestCancelRunsOnCancelInsteadOfFn_I6(t *testing.T) {
	before := lifetime.ReadStats()
	var fn, cancelled atomic.Int32
	id := hostfn.Register(hostfn.Callback{
		Fn: func() { fn.Add(1) }, Once: true, OnCancel: func() { cancelled.Add(1) },
	})
	require.True(t, hostfn.Pending(id))
	require.True(t, hostfn.Cancel(id))
	assert.False(t, hostfn.Pending(id))
	assert.False(t, hostfn.Cancel(id), "a second Cancel finds nothing")
	hostfn.Invoke(id)
	assert.Zero(t, fn.Load())
	assert.EqualValues(t, 1, cancelled.Load())
	assert.False(t, hostfn.Cancel(0))
	assert.False(t, hostfn.Pending(0))

	for range 500 {
		var fn, cancelled atomic.Int32
		id := hostfn.Register(hostfn.Callback{
			Fn: func() { fn.Add(1) }, Once: true, OnCancel: func() { cancelled.Add(1) },
		})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); hostfn.Invoke(id) }()
		go func() { defer wg.Done(); hostfn.Cancel(id) }()
		wg.Wait()
		require.EqualValues(t, 1, fn.Load()+cancelled.Load(), "exactly one of Fn and OnCancel runs")
	}

	sink := &recordingSink{}
	id = hostfn.Register(hostfn.Callback{Fn: func() {}, Once: true, Sink: sink, OnCancel: func() { runtime.Goexit() }})
	require.True(t, hostfn.Cancel(id))
	id = hostfn.Register(hostfn.Callback{Fn: func() {}, Once: true, Sink: sink, OnCancel: panickyCallback})
	require.True(t, hostfn.Cancel(id))
	vals, _ := sink.got()
	require.Len(t, vals, 2)
	assert.IsType(t, &hostfn.Goexited{}, vals[0])
	assert.Equal(t, "host function failed", vals[1])
	assert.Equal(t, before.Callbacks, lifetime.ReadStats().Callbacks)
}

// Invariant I6: callbacks may themselves invoke callbacks (nested Invoke
// takes another worker) without deadlocking.
func TestInvokeNested_I6(t *testing.T) {
	var depth atomic.Int32
	inner := hostfn.Register(hostfn.Callback{Fn: func() { depth.Add(1) }})
	outer := hostfn.Register(hostfn.Callback{Fn: func() { depth.Add(1); hostfn.Invoke(inner) }, Once: true})
	hostfn.Invoke(outer)
	assert.EqualValues(t, 2, depth.Load())
	hostfn.Unregister(inner)
}

// Invariant I6: in the steady state, invoking a registered non-Once
// callback allocates nothing (the panic path aside).
func TestInvokeAllocs_I6(t *testing.T) {
	lifetest.AllocsOK(t)
	var n int
	id := hostfn.Register(hostfn.Callback{Fn: func() { n++ }})
	defer hostfn.Unregister(id)
	hostfn.Invoke(id) // start a worker
	allocs := testing.AllocsPerRun(1000, func() { hostfn.Invoke(id) })
	assert.Zero(t, allocs)
	assert.Equal(t, 1002, n)
}

// Invariant I7: HostFn returns the same pointer every time, to goroutines
// that made the process's first calls concurrently (TestMain) and to later
// ones.
func TestHostFnMadeOnce_I7(t *testing.T) {
	fn0, err0 := firstHostFn.fns[0], firstHostFn.errs[0]
	for i := range firstHostFn.fns {
		assert.Equal(t, fn0, firstHostFn.fns[i], "concurrent first call %d", i)
		assert.Equal(t, err0, firstHostFn.errs[i])
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn, err := hostfn.HostFn()
			assert.Equal(t, fn0, fn)
			assert.Equal(t, err0, err)
		}()
	}
	wg.Wait()
	if err0 != nil {
		t.Logf("HostFn is not available on %s/%s: %v", runtime.GOOS, runtime.GOARCH, err0)
		assert.Zero(t, fn0)
		return
	}
	assert.NotZero(t, fn0)
}
