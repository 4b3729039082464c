//go:build linux

package fakedriver_test

import (
	"runtime"
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

// A HostBuffer and a managed Buffer whose host slice was taken have no
// cleanup (the slice may outlive them): dropped with their Context, they
// keep the context alive, and with it the memory under the slice. Both are
// leaks by design; the test leaves them behind.
func TestSliceHoldersKeepDroppedContext(t *testing.T) {
	f := ltSetup(t)
	for _, kind := range []string{"HostBuffer", "managed Buffer"} {
		ctxs := fcall(t, "fake_live_contexts")
		var sl []int32
		func() {
			c, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
			require.NoError(t, err)
			if kind == "HostBuffer" {
				hb, err := driver.AllocHost[int32](c, 1024, driver.HostAllocDefault)
				require.NoError(t, err)
				sl = hb.Slice()
			} else {
				b, err := driver.AllocManaged[int32](c, 1024)
				require.NoError(t, err)
				sl, err = b.HostSlice()
				require.NoError(t, err)
			}
		}()
		gcAll()
		gcAll()
		assert.Equal(t, ctxs+1, fcall(t, "fake_live_contexts"), "%s: its context was destroyed under the slice", kind)
		sl[len(sl)-1] = 7
		runtime.KeepAlive(sl)
	}
}

// Closed, the slice holders let their Context go: the rooting that keeps
// it reachable ends with the free.
func TestSliceHoldersClosedReleaseContext(t *testing.T) {
	f := ltSetup(t)
	ctxs, objects := fcall(t, "fake_live_contexts"), lifetime.ReadStats().Objects
	func() {
		c, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
		require.NoError(t, err)
		hb, err := driver.AllocHost[int32](c, 1024, driver.HostAllocDefault)
		require.NoError(t, err)
		b, err := driver.AllocManaged[int32](c, 1024)
		require.NoError(t, err)
		_, err = b.HostSlice()
		require.NoError(t, err)
		require.NoError(t, hb.Close())
		require.NoError(t, b.Close())
	}()
	assert.True(t, ltSettle(func() bool {
		return fcall(t, "fake_live_contexts") == ctxs && lifetime.ReadStats().Objects == objects
	}), "the dropped context released once its slice holders were closed")
}
