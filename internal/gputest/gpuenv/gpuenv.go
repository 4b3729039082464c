// Package gpuenv is the one setup of the GPU tests of driver, graph and
// nvrtc: device 0's primary context, a module compiled with NVRTC from the
// package's own kernel source, made once per test binary, and a fresh
// stream per test. Each package keeps its kernel source (its fixture) and
// calls Shared and Setup.
//
// It is a package of its own, not part of gputest, because it imports
// driver, and driver's internal tests import gputest.
package gpuenv

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/nvrtc"
)

// Env is what the GPU tests of a package share.
type Env struct {
	Dev *driver.Device
	Ctx *driver.Context
	Mod *driver.Module              // src compiled and loaded; nil without src
	PTX []byte                      // the PTX Mod was loaded from
	Fn  map[string]*driver.Function // the kernels named to Shared, by name
}

// Shared returns a function that makes the Env once, on first call: device
// 0, its primary context and, when src is not empty, src compiled for
// compute_75, loaded as a module, and the kernels names looked up in it.
func Shared(src string, names ...string) func() (*Env, error) {
	return sync.OnceValues(func() (*Env, error) {
		dev, err := driver.DeviceByOrdinal(0)
		if err != nil {
			return nil, err
		}
		ctx, err := dev.PrimaryContext()
		if err != nil {
			return nil, err
		}
		e := &Env{Dev: dev, Ctx: ctx, Fn: map[string]*driver.Function{}}
		if src == "" {
			return e, nil
		}
		res, err := nvrtc.Compile(src, nvrtc.Options{Arch: "compute_75"})
		if err != nil {
			return nil, err
		}
		if e.Mod, err = ctx.LoadModule(res.PTX); err != nil {
			return nil, err
		}
		e.PTX = res.PTX
		for _, name := range names {
			if e.Fn[name], err = e.Mod.Function(name); err != nil {
				return nil, err
			}
		}
		return e, nil
	})
}

// Setup skips tb without a GPU (gputest.Require: it fails instead under
// PURECUDA_REQUIRE_GPU), and returns the shared Env with a new non-blocking
// stream that is closed when tb ends.
func Setup(tb testing.TB, env func() (*Env, error)) (*Env, *driver.Stream) {
	tb.Helper()
	gputest.Require(tb)
	e, err := env()
	require.NoError(tb, err)
	s, err := e.Ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	return e, s
}
