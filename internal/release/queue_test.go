package release_test

import (
	"errors"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"github.com/purecuda/cuda/internal/release"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// Invariant I8: Defer never blocks. While one owner's release is stuck
// (a release goroutine is blocked in it), 100,000 releases are deferred
// from many goroutines and from runtime cleanups (the runtime's cleanup
// goroutine must never block) and every Defer returns; they run meanwhile
// on another release goroutine, and once the stuck release goes on, Flush
// returns.
func TestDeferNeverBlocks_I8(t *testing.T) {
	lifetest.DrainErrors()
	before := lifetest.Settle()
	const total = 100_000
	const fromCleanups = 10_000
	const producers = 16
	const perProducer = (total - fromCleanups) / producers

	unblock := make(chan struct{})
	var unblockOnce sync.Once
	free := func() { unblockOnce.Do(func() { close(unblock) }) }
	defer free() // a failed require must not leave the queue stuck for the next tests
	blocked := make(chan struct{})
	var released atomic.Int64
	release.Defer(lifetime.OwnerFunc(func() error {
		close(blocked)
		<-unblock // a slow release: a CUDA call that takes its time
		return nil
	}))
	<-blocked

	count := lifetime.OwnerFunc(func() error { released.Add(1); return nil })
	var deferred atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perProducer {
					release.Defer(count)
					deferred.Add(1)
				}
			}()
		}
		// Objects whose cleanups defer a release, like a Buffer dropped
		// without Close.
		var cleanedUp atomic.Int64
		for range fromCleanups {
			obj := new([16]byte)
			runtime.AddCleanup(obj, func(o lifetime.Owner) {
				release.Defer(o)
				deferred.Add(1)
				cleanedUp.Add(1)
			}, lifetime.Owner(count))
		}
		for cleanedUp.Load() < fromCleanups {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		close(unblock)
		require.FailNow(t, "Defer blocked", "%d of %d deferred", deferred.Load(), total)
	}
	assert.EqualValues(t, total, deferred.Load())
	// The stuck release holds up no other: another release goroutine took
	// over (I8).
	require.Eventually(t, func() bool { return released.Load() == total }, 30*time.Second, time.Millisecond,
		"the releases after a stuck one run: %d of %d", released.Load(), total)
	// Only the stuck release is left (a cleanup of an earlier test's
	// object may come and go meanwhile).
	assert.Eventually(t, func() bool { return lifetime.ReadStats().Queued == 1 }, 30*time.Second, time.Millisecond,
		"only the stuck release is left: %d queued", lifetime.ReadStats().Queued)

	free()
	lifetime.Flush()
	assert.EqualValues(t, total, released.Load())
	lifetest.RequireLiveCountsBack(t, before)
	assert.Equal(t, before.ReleaseErrors, lifetime.ReadStats().ReleaseErrors)
}

// Invariant I8: Flush returns only when every release queued before it has
// run, even slow ones, and from many goroutines at once.
func TestFlushWaitsForAll_I8(t *testing.T) {
	var released atomic.Int64
	const n = 200
	for i := range n {
		release.Defer(lifetime.OwnerFunc(func() error {
			if i%20 == 0 {
				time.Sleep(time.Millisecond)
			}
			released.Add(1)
			return nil
		}))
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lifetime.Flush()
			assert.EqualValues(t, n, released.Load())
		}()
	}
	wg.Wait()
	lifetime.Flush() // nothing queued: returns at once
	assert.Zero(t, lifetime.ReadStats().Queued)
}

// Invariant I8: Flush is not starved by producers that keep the queue
// busy: it waits for what was queued before it, not for an empty queue.
// The producers keep between 1 and ~1000 releases (of 20 µs each) queued
// at all times, so the queue never runs empty.
func TestFlushNotStarvedByProducers_I8(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	nop := lifetime.OwnerFunc(func() error {
		for start := time.Now(); time.Since(start) < 20*time.Microsecond; {
		}
		return nil
	})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if lifetime.ReadStats().Queued < 1000 {
					release.Defer(nop)
				} else {
					runtime.Gosched()
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait(); lifetime.Flush() }()
	lifetest.Eventually(t, 10*time.Second, func() bool { return lifetime.ReadStats().Queued > 100 }, "producers running")
	var marker atomic.Bool
	release.Defer(lifetime.OwnerFunc(func() error { marker.Store(true); return nil }))
	flushed := make(chan struct{})
	go func() { lifetime.Flush(); close(flushed) }()
	select {
	case <-flushed:
		assert.True(t, marker.Load())
	case <-time.After(30 * time.Second):
		t.Error("Flush did not return while producers kept deferring")
	}
}

// Invariant I8: owners deferred by one goroutine are started in the order
// it deferred them (with one drainer, they also end in that order).
func TestDeferOrderOneProducer_I8(t *testing.T) {
	// A second drainer starts only when one is stuck in a release (a
	// descheduled one counts); here every item must go to one drainer.
	defer release.SetStuckAfter(release.SetStuckAfter(time.Hour))
	const n = 20_000
	var mu sync.Mutex
	got := make([]int, 0, n)
	for i := range n {
		release.Defer(lifetime.OwnerFunc(func() error {
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
			return nil
		}))
		if i%5000 == 0 {
			time.Sleep(time.Millisecond) // let the release goroutine stop and restart
		}
	}
	lifetime.Flush()
	require.Len(t, got, n)
	for i, v := range got {
		require.Equal(t, i, v)
	}
}

// Invariants I8, I11: failed releases on the queue are counted in
// Stats.ReleaseErrors and kept for Errors; a nil owner is ignored.
func TestDeferErrorsCounted_I8_I11(t *testing.T) {
	lifetest.DrainErrors()
	before := lifetest.Settle()
	boom := errors.New("cuModuleUnload failed")
	release.Defer(nil)
	for range 5 {
		release.Defer(lifetime.OwnerFunc(func() error { return boom }))
	}
	// An Object's failing destroy, reached through a deferred Ref.
	var o lifetime.Object
	o.Init(func() error { return boom })
	r, ok := o.Hold()
	require.True(t, ok)
	require.NoError(t, o.Close())
	release.Defer(r)
	after := lifetest.Settle()
	assert.Equal(t, before.ReleaseErrors+6, after.ReleaseErrors)
	errs := lifetime.Errors()
	require.Len(t, errs, 6)
	for _, err := range errs {
		assert.ErrorIs(t, err, boom)
	}
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariant I8: a queued release that panics or calls runtime.Goexit does
// not stop the queue: it is counted and reported, later releases (in
// order) still run, and Flush still returns.
func TestDeferPanicAndGoexitContained_I8(t *testing.T) {
	lifetest.DrainErrors()
	before := lifetest.Settle()
	var mu sync.Mutex
	var order []int
	rec := func(i int) lifetime.Owner {
		return lifetime.OwnerFunc(func() error { mu.Lock(); order = append(order, i); mu.Unlock(); return nil })
	}
	gate := make(chan struct{})
	release.Defer(lifetime.OwnerFunc(func() error { <-gate; return nil })) // batch what follows
	release.Defer(rec(0))
	release.Defer(lifetime.OwnerFunc(func() error { panic("release failed") }))
	release.Defer(rec(1))
	release.Defer(lifetime.OwnerFunc(func() error { runtime.Goexit(); return nil }))
	release.Defer(rec(2))
	release.Defer(rec(3))
	close(gate)
	lifetime.Flush()
	release.Defer(rec(4))
	lifetime.Flush()
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
	after := lifetime.ReadStats()
	assert.Equal(t, before.ReleaseErrors+2, after.ReleaseErrors)
	errs := lifetime.Errors()
	require.Len(t, errs, 2)
	assert.Contains(t, errs[0].Error(), "panicked: release failed")
	var g *hostfn.Goexited
	assert.ErrorAs(t, errs[1], &g)
	lifetest.RequireLiveCountsBack(t, before)
}
