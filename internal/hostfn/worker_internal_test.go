package hostfn

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setWorkerIdle sets the idle workers' sweep period for a test (it is read
// under idle's lock), ending the idle workers of earlier tests first; the
// test's cleanup restores it and ends the test's idle workers, so that no
// sweep of another period is left scheduled.
func setWorkerIdle(t *testing.T, d time.Duration) {
	endIdleWorkers()
	idle.Lock()
	old := workerIdle
	workerIdle = d
	idle.Unlock()
	t.Cleanup(func() {
		idle.Lock()
		workerIdle = old
		idle.Unlock()
		endIdleWorkers()
	})
}

// endIdleWorkers ends every idle worker at once, with no sweep left
// scheduled.
func endIdleWorkers() {
	idle.Lock()
	for _, w := range idle.ws {
		w.fresh = false
	}
	if idle.timer != nil {
		idle.timer.Stop()
	}
	idle.sweeping = false
	idle.Unlock()
	sweep()
}

func idleWorkers() (n int, sweeping bool) {
	idle.Lock()
	defer idle.Unlock()
	return len(idle.ws), idle.sweeping
}

// invokeConcurrently runs n callbacks that are all running at once, so
// that each has a worker of its own.
func invokeConcurrently(t *testing.T, n int) {
	var started, done sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	ids := make([]uintptr, n)
	for i := range ids {
		ids[i] = Register(Callback{Fn: func() { started.Done(); <-release }, Once: true})
	}
	for _, id := range ids {
		done.Go(func() { Invoke(id) })
	}
	started.Wait()
	close(release)
	done.Wait()
}

// A burst of concurrent callbacks leaves no goroutines behind: the idle
// workers end once a sweep period passes without a callback taking them,
// and the sweeps stop with the last.
func TestIdleWorkersEnd(t *testing.T) {
	setWorkerIdle(t, 100*time.Millisecond)
	require.Eventually(t, func() bool { return liveWorkers.Load() == 0 }, 30*time.Second, 5*time.Millisecond, "workers of earlier tests")

	// A period no loaded machine outlasts while the pool is checked (with
	// 100 ms, a slow check found workers the sweeps had already ended)...
	idle.Lock()
	workerIdle = time.Hour
	idle.Unlock()
	invokeConcurrently(t, 8)
	n, sweeping := idleWorkers()
	assert.Equal(t, 8, n, "the burst's workers wait in the pool")
	assert.True(t, sweeping, "a sweep is scheduled while workers wait")

	// ...then a short one, for the scheduled sweeps to end them.
	idle.Lock()
	workerIdle = 100 * time.Millisecond
	idle.timer.Reset(workerIdle)
	idle.Unlock()
	require.Eventually(t, func() bool { return liveWorkers.Load() == 0 }, 30*time.Second, 5*time.Millisecond, "idle workers end")
	n, sweeping = idleWorkers()
	assert.Zero(t, n)
	assert.False(t, sweeping, "no sweep once the pool is empty")
}

// The pool keeps at most maxIdle workers: those beyond end at once.
func TestIdleWorkersCapped(t *testing.T) {
	setWorkerIdle(t, time.Hour)

	invokeConcurrently(t, maxIdle+6)
	n, _ := idleWorkers()
	assert.Equal(t, maxIdle, n)
	require.Eventually(t, func() bool { return liveWorkers.Load() <= maxIdle }, 30*time.Second, 5*time.Millisecond, "the workers beyond the cap end")
}

// A worker that callbacks keep taking is not ended by the sweeps: calls
// spaced closer than the sweep period reuse one goroutine throughout.
func TestBusyWorkerKept(t *testing.T) {
	// A period of 1 s, 50 times the spacing of the calls: only a pause of
	// a whole second between two calls (not a few milliseconds of load)
	// could let a sweep end the worker.
	setWorkerIdle(t, time.Second)
	require.Eventually(t, func() bool { return liveWorkers.Load() == 0 }, 30*time.Second, 5*time.Millisecond, "workers of earlier tests")

	var runs int
	id := Register(Callback{Fn: func() { runs++ }})
	defer Unregister(id)
	before := spawnedWorkers.Load()
	for range 110 { // over two sweep periods
		Invoke(id)
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, 110, runs)
	assert.Equal(t, int64(1), spawnedWorkers.Load()-before, "one worker served every call")
	require.Eventually(t, func() bool { return liveWorkers.Load() == 0 }, 30*time.Second, 5*time.Millisecond, "and ends once idle")
}

// A worker whose callback called runtime.Goexit has ended: it is not put
// back in the pool, and the next callback gets a new worker.
func TestGoexitedWorkerNotReused(t *testing.T) {
	setWorkerIdle(t, time.Hour)

	before := spawnedWorkers.Load()
	exit := Register(Callback{Fn: func() { runtime.Goexit() }, Once: true})
	Invoke(exit)
	n, _ := idleWorkers()
	assert.Zero(t, n, "the Goexited worker is not in the pool")

	done := make(chan struct{})
	ran := false
	next := Register(Callback{Fn: func() { ran = true }, Once: true})
	go func() { Invoke(next); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the next callback did not run")
	}
	assert.True(t, ran)
	assert.Equal(t, int64(2), spawnedWorkers.Load()-before, "a new worker for the next callback")
	n, _ = idleWorkers()
	assert.Equal(t, 1, n)
}
