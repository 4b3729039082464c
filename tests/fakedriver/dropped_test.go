//go:build linux

package fakedriver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// live is fakecuda's count of each kind of object a handle owns.
func live(t *testing.T) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	for _, k := range []string{"contexts", "streams", "events", "pools", "modules", "libraries", "allocations"} {
		m[k] = fcall(t, "fake_live_"+k)
	}
	return m
}

// Every handle that owns a CUDA object and becomes unreachable without
// Close is released by its cleanup, on the release queue, in whatever
// order the collector finds them: a context with its streams, events,
// pools (made and default), a module and a library whose kernels were
// launched, and buffers. Nothing is destroyed twice (fakecuda counts a
// destroyed handle's reuse) and lifetime's Stats come back to where they
// were.
func TestDroppedHandlesAreReleased(t *testing.T) {
	f := ltSetup(t)
	before, objects := live(t), lifetime.ReadStats().Objects
	func() {
		dev := f.ctx.Device()
		c, err := dev.NewContext(driver.ContextSchedAuto)
		require.NoError(t, err)
		p, err := dev.PrimaryContext()
		require.NoError(t, err)
		for _, ctx := range []*driver.Context{c, p} {
			s, err := ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err)
			e, err := ctx.NewEvent(driver.EventDisableTiming)
			require.NoError(t, err)
			pool, err := ctx.NewMemPool()
			require.NoError(t, err)
			_, err = ctx.DefaultMemPool()
			require.NoError(t, err)
			buf, err := driver.AllocFromPool[int32](s, pool, 16)
			require.NoError(t, err)
			mod, err := ctx.LoadModule([]byte("FAKE module"))
			require.NoError(t, err)
			fill, err := mod.Function("fill")
			require.NoError(t, err)
			_, err = mod.Function("add4")
			require.NoError(t, err)
			require.NoError(t, s.Launch(fill, g1, b1, buf, int32(1), int32(16)))
			lib, err := driver.LoadLibrary([]byte("FAKE library"))
			require.NoError(t, err)
			lfill, err := lib.Function("fill")
			require.NoError(t, err)
			require.NoError(t, s.Launch(lfill, g1, b1, buf, int32(2), int32(16)))
			require.NoError(t, e.Record(s))
			require.NoError(t, e.Synchronize())
		}
	}()
	assert.Greater(t, fcall(t, "fake_live_libraries"), before["libraries"])
	assert.True(t, ltSettle(func() bool {
		now := live(t)
		for k, v := range before {
			if now[k] != v {
				return false
			}
		}
		return lifetime.ReadStats().Objects == objects
	}), "live %v, before %v; objects %d, before %d", live(t), before, lifetime.ReadStats().Objects, objects)
}

// A handle closed and then dropped is destroyed once: by Close, never
// again by its cleanup.
func TestClosedHandlesAreNotReleasedTwice(t *testing.T) {
	f := ltSetup(t)
	before, objects := live(t), lifetime.ReadStats().Objects
	func() {
		c, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
		require.NoError(t, err)
		s, err := c.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		e, err := c.NewEvent(driver.EventDisableTiming)
		require.NoError(t, err)
		pool, err := c.NewMemPool()
		require.NoError(t, err)
		dp, err := c.DefaultMemPool()
		require.NoError(t, err)
		mod, err := c.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		_, err = mod.Function("fill")
		require.NoError(t, err)
		lib, err := driver.LoadLibrary([]byte("FAKE library"))
		require.NoError(t, err)
		_, err = lib.Function("fill")
		require.NoError(t, err)
		for _, cl := range []func() error{s.Close, e.Close, pool.Close, dp.Close, mod.Close, lib.Close, c.Close} {
			require.NoError(t, cl())
		}
	}()
	assert.Equal(t, before, live(t), "Close destroyed everything at once")
	assert.Equal(t, objects, lifetime.ReadStats().Objects)
	gcAll()
	gcAll()
	assert.Equal(t, before, live(t))
	assert.Equal(t, objects, lifetime.ReadStats().Objects, "no cleanup counted an Object again")
}
