//go:build linux

package fakedriver_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

// A module or library hands out one Function per name, each holding it
// loaded until it is closed and nothing holds the Function: a lookup that
// fails leaves nothing behind, Close unloads at once when nothing holds a
// Function, and a Function held by Args or a graph keeps it loaded (I2,
// I3).
func TestFunctionOnePerNameHoldsItsModule(t *testing.T) {
	f := ltSetup(t)
	mods, libs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_libraries")

	mod, err := f.ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	a, err := mod.Function("add4")
	require.NoError(t, err)
	b, err := mod.Function("add4")
	require.NoError(t, err)
	assert.Same(t, a, b, "one Function per name")
	other, err := mod.Function("fill")
	require.NoError(t, err)
	assert.NotSame(t, a, other)
	_, err = mod.Function("nope")
	assert.ErrorIs(t, err, driver.ErrNotFound)
	_, err = mod.Function("add4\x00x")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	require.NoError(t, mod.Close())
	assert.Equal(t, mods, fcall(t, "fake_live_modules"), "nothing held a Function: Close unloads")
	_, err = mod.Function("add4")
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = a.Hold()
	assert.ErrorIs(t, err, driver.ErrClosed)
	assert.ErrorIs(t, f.s.Launch(a, g1, b1), driver.ErrClosed)
	assert.NoError(t, mod.Close(), "idempotent")

	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	la, err := lib.Function("fill")
	require.NoError(t, err)
	lb, err := lib.Function("fill")
	require.NoError(t, err)
	assert.Same(t, la, lb)
	_, err = lib.Function("nope")
	assert.ErrorIs(t, err, driver.ErrNotFound)
	buf, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	defer buf.Close()
	args, err := la.NewArgs(buf, int32(7), int32(4))
	require.NoError(t, err)
	ref, err := la.Hold()
	require.NoError(t, err)
	require.NoError(t, lib.Close())
	assert.Equal(t, libs+1, fcall(t, "fake_live_libraries"), "the Args and the Hold keep the library")
	_, err = lib.Function("fill")
	assert.ErrorIs(t, err, driver.ErrClosed)
	require.NoError(t, f.s.LaunchArgs(args, g1, b1), "the Args still launch")
	require.NoError(t, args.Close())
	assert.Equal(t, libs+1, fcall(t, "fake_live_libraries"), "the Hold keeps the library")
	require.NoError(t, ref.Release())
	assert.Equal(t, libs, fcall(t, "fake_live_libraries"))
	require.NoError(t, f.s.Synchronize())
	ltNoBadUses(t)
}

// Lookups, launches and holds racing Module.Close: every call succeeds or
// says closed, none reaches the fake with an unloaded module, and the
// module is unloaded exactly once, after the last of them, whatever the
// order (a lookup that registers a Function after Close took the list
// would keep the module loaded for good).
func TestFunctionLookupRacesModuleClose(t *testing.T) {
	f := ltSetup(t)
	mods := fcall(t, "fake_live_modules")
	buf, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer buf.Close()
	for round := 0; round < 200; round++ {
		mod, err := f.ctx.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		var wg sync.WaitGroup
		var ok atomic.Int64
		start := make(chan struct{})
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < 20; i++ {
					name := [...]string{"add4", "fill", "empty"}[(g+i)%3]
					fn, err := mod.Function(name)
					if err != nil {
						if !errors.Is(err, driver.ErrClosed) {
							t.Errorf("Function(%s): %v", name, err)
						}
						return
					}
					var lerr error
					switch name {
					case "add4":
						lerr = f.s.Launch(fn, g1, b1, buf, uint32(1), uint32(2), uint32(3))
					case "fill":
						if r, err := fn.Hold(); err == nil {
							lerr = r.Release()
						} else {
							lerr = err
						}
					default:
						lerr = f.s.Launch(fn, g1, b1)
					}
					if lerr != nil && !errors.Is(lerr, driver.ErrClosed) {
						t.Errorf("%s: %v", name, lerr)
						return
					}
					ok.Add(1)
				}
			}()
		}
		close(start)
		if round%2 == 1 {
			for ok.Load() < int64(round%7) {
				// let some calls in before the close
			}
		}
		require.NoError(t, mod.Close())
		wg.Wait()
		require.Equal(t, mods, fcall(t, "fake_live_modules"), "round %d: the module is unloaded after the last call", round)
	}
	require.NoError(t, f.s.Synchronize())
	ltNoBadUses(t)
}
