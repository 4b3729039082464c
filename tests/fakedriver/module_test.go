//go:build linux

package fakedriver_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

// TestLibraryKernelArgsCheckContexts: Args of a library kernel (which
// belongs to no context) check their buffers' contexts against the stream
// at every LaunchArgs, as Launch does, so that no buffer of context B is
// launched on a stream of context A (fakecuda counts that as a bad pointer
// use).
func TestLibraryKernelArgsCheckContexts(t *testing.T) {
	f := ltSetup(t)
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	defer lib.Close()
	fill, err := lib.Function("fill")
	require.NoError(t, err)
	other, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer other.Close()
	foreign, err := driver.Alloc[int32](other, 16)
	require.NoError(t, err)
	defer foreign.Close()
	mine, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	defer mine.Close()

	args, err := fill.NewArgs(foreign, int32(1), int32(16))
	if err == nil {
		defer args.Close()
		assert.ErrorIs(t, f.s.LaunchArgs(args, g1, b1), driver.ErrInvalidArgument, "LaunchArgs")
	} else {
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, "NewArgs may refuse at once")
	}
	assert.ErrorIs(t, f.s.Launch(fill, g1, b1, foreign, int32(1), int32(16)), driver.ErrInvalidArgument, "Launch")
	mixed, err := fill.NewArgs(mine, int32(1), int32(16))
	require.NoError(t, err)
	defer mixed.Close()
	os, err := other.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer os.Close()
	assert.ErrorIs(t, os.LaunchArgs(mixed, g1, b1), driver.ErrInvalidArgument, "Args of context A on a stream of B")

	// The control: the same kernel with a buffer of the stream's context.
	require.NoError(t, f.s.LaunchArgs(mixed, g1, b1))
	require.NoError(t, f.s.Synchronize())
	got := make([]int32, 16)
	require.NoError(t, mine.CopyToHost(f.ctx.LegacyStream(), got))
	assert.Equal(t, int32(16), got[15])
	ltNoBadUses(t)
}

// TestLoadLibraryRefusesExtraJITOptions: LoadLibrary refuses more than one
// JITOptions, as LoadModule does, rather than using the first and ignoring
// the rest.
func TestLoadLibraryRefusesExtraJITOptions(t *testing.T) {
	f := ltSetup(t)
	libs := fcall(t, "fake_live_libraries")
	_, err := driver.LoadLibrary([]byte("FAKE library"), driver.JITOptions{}, driver.JITOptions{MaxRegisters: 32})
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = f.ctx.LoadModule([]byte("FAKE module"), driver.JITOptions{}, driver.JITOptions{MaxRegisters: 32})
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "the same as LoadModule")
	lib, err := driver.LoadLibrary([]byte("FAKE library"), driver.JITOptions{MaxRegisters: 32})
	require.NoError(t, err, "one is fine")
	require.NoError(t, lib.Close())
	assert.Equal(t, libs, fcall(t, "fake_live_libraries"))
}

// TestModuleAndLibraryCloseWaitForQueuedKernels: closing a module or a
// library whose kernel is still queued on a stream unloads it only after
// the kernel ran (I4: work that outlives the call holds what it names).
// cuModuleUnload and cuLibraryUnload do not wait for queued kernels: were a
// launch to hold the module only for the call, fakecuda would see the
// slowed kernel run with its function unloaded.
func TestModuleAndLibraryCloseWaitForQueuedKernels(t *testing.T) {
	f := ltSetup(t)
	mods, libs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_libraries")
	b, err := driver.Alloc[int32](f.ctx, 64)
	require.NoError(t, err)
	defer b.Close()
	other, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer other.Close()
	os, err := other.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer os.Close()
	ob, err := driver.Alloc[int32](other, 64)
	require.NoError(t, err)
	defer ob.Close()

	fcall(t, "fake_set_kernel_delay_us", 10000)
	for _, viaArgs := range []bool{false, true} {
		mod, err := f.ctx.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		fill, err := mod.Function("fill")
		require.NoError(t, err)
		lib, err := driver.LoadLibrary([]byte("FAKE library"))
		require.NoError(t, err)
		lfill, err := lib.Function("fill")
		require.NoError(t, err)
		require.NoError(t, f.s.Launch(f.empty, g1, b1)) // slow work first: the rest queues
		if viaArgs {
			a, err := fill.NewArgs(b, int32(1), int32(64))
			require.NoError(t, err)
			require.NoError(t, f.s.LaunchArgs(a, g1, b1))
			require.NoError(t, a.Close())
			la, err := lfill.NewArgs(b, int32(2), int32(64))
			require.NoError(t, err)
			require.NoError(t, f.s.LaunchArgs(la, g1, b1))
			lo, err := lfill.NewArgs(ob, int32(3), int32(64))
			require.NoError(t, err)
			require.NoError(t, os.LaunchArgs(lo, g1, b1), "a library kernel in a second context")
			require.NoError(t, errors.Join(la.Close(), lo.Close()))
		} else {
			require.NoError(t, f.s.Launch(fill, g1, b1, b, int32(1), int32(64)))
			require.NoError(t, f.s.Launch(lfill, g1, b1, b, int32(2), int32(64)))
			require.NoError(t, os.Launch(lfill, g1, b1, ob, int32(3), int32(64)), "a library kernel in a second context")
		}
		require.NoError(t, mod.Close())
		require.NoError(t, lib.Close())
		assert.Equal(t, mods, fcall(t, "fake_live_modules"), "Close returns after the unload")
		assert.Equal(t, libs, fcall(t, "fake_live_libraries"))
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, os.Synchronize())
		ltNoBadUses(t)
	}
}
