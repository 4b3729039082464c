package hostfn_test

import (
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Invariant I5: ids are never 0, are distinct while live, and find their
// value; Take and Delete remove; Len counts live entries.
func TestMapBasics_I5(t *testing.T) {
	var m hostfn.Map[string]
	_, ok := m.Get(0)
	assert.False(t, ok, "0 is never an id")
	assert.False(t, m.Delete(0))
	_, ok = m.Take(0)
	assert.False(t, ok)

	ids := map[uintptr]string{}
	for i := range 1000 {
		v := string(rune('A' + i%26))
		id := m.Put(v)
		require.NotZero(t, id)
		_, dup := ids[id]
		require.False(t, dup, "ids are distinct while live")
		ids[id] = v
	}
	assert.Equal(t, 1000, m.Len())
	for id, v := range ids {
		got, ok := m.Get(id)
		require.True(t, ok)
		require.Equal(t, v, got)
	}
	n := 0
	for id, v := range ids {
		if n%2 == 0 {
			got, ok := m.Take(id)
			require.True(t, ok)
			require.Equal(t, v, got)
			_, ok = m.Take(id)
			require.False(t, ok, "Take removes")
		} else {
			require.True(t, m.Delete(id))
			require.False(t, m.Delete(id), "Delete removes")
		}
		_, ok := m.Get(id)
		require.False(t, ok)
		n++
	}
	assert.Zero(t, m.Len())
	// Ids that were never handed out miss too.
	for _, id := range []uintptr{1, 2, 1 << 20, ^uintptr(0), ^uintptr(0) - 5} {
		_, ok := m.Get(id)
		assert.False(t, ok)
		assert.False(t, m.Delete(id))
	}
}

// Invariant I5: a stale id misses after its slot is reused, over many
// generations of the same slot, and deleting through it does not delete
// the new entry.
func TestMapStaleIDMissesAfterReuse_I5(t *testing.T) {
	var m hostfn.Map[int]
	old := m.Put(1)
	require.True(t, m.Delete(old))
	seen := map[uintptr]bool{old: true}
	for i := range 10000 {
		id := m.Put(i)
		require.False(t, seen[id], "an id is not handed out twice")
		seen[id] = true
		_, ok := m.Get(old)
		require.False(t, ok, "the stale id misses")
		require.False(t, m.Delete(old), "the stale id deletes nothing")
		_, ok = m.Take(old)
		require.False(t, ok)
		v, ok := m.Get(id)
		require.True(t, ok)
		require.Equal(t, i, v)
		require.True(t, m.Delete(id))
	}
	assert.Zero(t, m.Len())
}

// Invariant I5: Put, Get, Take and Delete are safe for concurrent use:
// every value put is taken exactly once by whoever holds its id, and a
// stale or foreign id never reaches another goroutine's value.
func TestMapConcurrent_I5(t *testing.T) {
	var m hostfn.Map[[2]int]
	const workers, per = 16, 3000
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stale []uintptr
			for i := range per {
				v := [2]int{w, i}
				id := m.Put(v)
				if got, ok := m.Get(id); !ok || got != v {
					wrong.Add(1)
				}
				switch i % 3 {
				case 0:
					if got, ok := m.Take(id); !ok || got != v {
						wrong.Add(1)
					}
				case 1:
					if !m.Delete(id) {
						wrong.Add(1)
					}
				case 2:
					if got, ok := m.Take(id); !ok || got != v {
						wrong.Add(1)
					}
				}
				stale = append(stale, id)
				if len(stale) > 8 { // someone else's slot by now, maybe
					sid := stale[0]
					stale = stale[1:]
					if _, ok := m.Get(sid); ok {
						wrong.Add(1)
					}
					if m.Delete(sid) {
						wrong.Add(1)
					}
				}
				_ = m.Len()
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, wrong.Load())
	assert.Zero(t, m.Len())
}

// Invariant I5: once an entry is deleted (by Delete or Take) the Map keeps
// no reference to its value: the value becomes collectable.
func TestMapHoldsNoReferenceAfterDelete_I5(t *testing.T) {
	type payload struct{ _ [64]byte }
	var m hostfn.Map[*payload]
	for _, how := range []string{"Delete", "Take"} {
		t.Run(how, func(t *testing.T) {
			var collected atomic.Bool
			p := &payload{}
			wp := weak.Make(p)
			runtime.AddCleanup(p, func(*atomic.Bool) { collected.Store(true) }, &collected)
			id := m.Put(p)
			p = nil

			// While the entry is live the map keeps the value.
			runtime.GC()
			runtime.GC()
			require.NotNil(t, wp.Value(), "a live entry keeps its value")

			if how == "Delete" {
				require.True(t, m.Delete(id))
			} else {
				v, ok := m.Take(id)
				require.True(t, ok)
				require.NotNil(t, v)
			}
			deadline := time.Now().Add(10 * time.Second)
			for wp.Value() != nil || !collected.Load() {
				require.True(t, time.Now().Before(deadline), "the value was not collected: the map still refers to it")
				runtime.GC()
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// Invariant I5: in the steady state (the map has grown once) Put, Get,
// Take and Delete allocate nothing.
func TestMapSteadyStateAllocs_I5(t *testing.T) {
	lifetest.AllocsOK(t)
	var m hostfn.Map[hostfn.Callback]
	ids := make([]uintptr, 256)
	for i := range ids {
		ids[i] = m.Put(hostfn.Callback{})
	}
	for _, id := range ids {
		m.Delete(id)
	}
	fn := func() {}
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range ids {
			ids[i] = m.Put(hostfn.Callback{Fn: fn, Once: true})
		}
		for i, id := range ids {
			_, _ = m.Get(id)
			if i%2 == 0 {
				_, _ = m.Take(id)
			} else {
				m.Delete(id)
			}
		}
	})
	assert.Zero(t, allocs)
	assert.Zero(t, m.Len())
}
