package release_test

import (
	"github.com/purecuda/cuda/internal/lifetest"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/tables"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// Invariant I10: PinSlice pins the slice's backing array until Release,
// and Release unpins exactly once (a second Release, even a concurrent
// one, does nothing). Pinned counts it, and goes back to where it started.
// Once unpinned the array is collectable again, and the runtime's check
// for leaked pins stays quiet (it would crash the test otherwise).
func TestPinSlice_I10(t *testing.T) {
	start := lifetime.ReadStats().Pinned
	buf := make([]byte, 1<<16)
	wp := weak.Make(&buf[0])
	p := release.PinSlice(buf)
	assert.Equal(t, start+1, lifetime.ReadStats().Pinned)
	buf = nil

	// The pinned array stays alive: the pin holds it.
	for range 3 {
		runtime.GC()
	}
	require.NotNil(t, wp.Value(), "a pinned array stays alive")

	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, p.Release()) }()
	}
	wg.Wait()
	assert.Equal(t, start, lifetime.ReadStats().Pinned, "unpinned exactly once")
	assert.NoError(t, p.Release())
	assert.Equal(t, start, lifetime.ReadStats().Pinned)

	p = nil
	deadline := time.Now().Add(30 * time.Second)
	for wp.Value() != nil {
		require.True(t, time.Now().Before(deadline), "the unpinned array was not collected")
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// Invariant I10: pinning a nil or empty slice, a slice with capacity but no
// length, a slice of zero-size elements, a nil pointer and a pointer that
// is not Go heap memory all work and release cleanly.
func TestPinEdgeCases_I10(t *testing.T) {
	start := lifetime.ReadStats().Pinned
	var global [8]byte
	var ps []*release.Pinned
	ps = append(ps,
		release.PinSlice([]byte(nil)),
		release.PinSlice([]int32{}),
		release.PinSlice(make([]int64, 0, 8)),
		release.PinSlice(make([]struct{}, 5)),
		release.Pin(nil),
		release.Pin(unsafe.Pointer(&global)),
		release.Pin(unsafe.Pointer(new(int))),
	)
	assert.Equal(t, start+int64(len(ps)), lifetime.ReadStats().Pinned)
	for _, p := range ps {
		require.NoError(t, p.Release())
		require.NoError(t, p.Release())
	}
	assert.Equal(t, start, lifetime.ReadStats().Pinned)
	runtime.GC() // no leaked-pin report
}

// Invariants I9, I10: a Pinned is an Owner: a table releases it with the
// node, and so does the release queue.
func TestPinnedAsOwner_I9_I10(t *testing.T) {
	before := lifetest.Settle()
	tab := tables.New()
	require.NoError(t, tab.Add(1, release.PinSlice(make([]float32, 100))))
	require.NoError(t, tab.Add(2, release.PinSlice(make([]float32, 100))))
	assert.Equal(t, before.Pinned+2, lifetime.ReadStats().Pinned)
	require.NoError(t, tab.Drop(1))
	assert.Equal(t, before.Pinned+1, lifetime.ReadStats().Pinned)
	tab.ReleaseLater()
	release.Defer(release.PinSlice(make([]byte, 10)))
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariant I10: a Pinned dropped without Release does not end the process
// (a leaked runtime.Pinner panics in its finalizer): the memory stays
// pinned and alive, stays counted in Pinned, and the leak is reported in
// Errors and ReleaseErrors.
func TestPinnedDroppedWithoutRelease_I10(t *testing.T) {
	lifetest.DrainErrors()
	before := lifetime.ReadStats()
	buf := make([]byte, 4096)
	wp := weak.Make(&buf[0])
	func() { _ = release.PinSlice(buf) }() // dropped: a bug in its holder
	buf = nil
	var errs []error
	deadline := time.Now().Add(30 * time.Second)
	for len(errs) == 0 {
		require.True(t, time.Now().Before(deadline), "the leak was not reported")
		runtime.GC()
		time.Sleep(time.Millisecond)
		errs = lifetime.Errors()
	}
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "without Release")
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.NotNil(t, wp.Value(), "the leaked pin keeps its memory alive")
	after := lifetime.ReadStats()
	assert.Equal(t, before.Pinned+1, after.Pinned, "the leak stays visible")
	assert.Equal(t, before.ReleaseErrors+1, after.ReleaseErrors)

	// A released Pinned that becomes unreachable reports nothing.
	p := release.PinSlice(make([]byte, 16))
	require.NoError(t, p.Release())
	p = nil
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.Empty(t, lifetime.Errors())
	var nilPin *release.Pinned
	assert.NoError(t, nilPin.Release())
}
