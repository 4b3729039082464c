//go:build linux

package graph

// The tests of this package against fakecuda (named TestFake…) run each
// in a child process of the test binary whose driver is fakecuda
// (internal/faketest.InChild), so that the other tests keep using, or
// skipping without, the real driver. They live here rather than in
// tests/fakedriver because they reach package internals.

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

// fakeEnv is a fake-driver test's fixture: device 0's primary context, a
// stream, and the kernels of fakecuda's module.
type fakeEnv struct {
	ctx   *driver.Context
	s     *driver.Stream
	mod   *driver.Module
	fill  *driver.Function
	empty *driver.Function
}

// fakeSetup makes the fixture; call it in the child (after InChild).
func fakeSetup(t *testing.T) *fakeEnv {
	t.Helper()
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	e := &fakeEnv{ctx: ctx}
	e.s, err = ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	e.mod, err = ctx.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	e.fill, err = e.mod.Function("fill")
	require.NoError(t, err)
	e.empty, err = e.mod.Function("empty")
	require.NoError(t, err)
	return e
}

// within runs f on a goroutine and reports whether it returned in d.
func within(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// waitGoroutine waits up to 30 s until some goroutine's stack holds every
// one of frames (parts of function names, such as a call blocked on a
// stream's gate), and marks the test failed if none does (t.Errorf: it
// may run on a goroutine other than the test's): a test that needs another
// goroutine to have got that far waits for it rather than sleeping for a
// time a loaded machine can outlast. A goroutine's state is in its
// header: "[chan receive" matches one blocked on a channel.
func waitGoroutine(t *testing.T, frames ...string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			all := true
			for _, f := range frames {
				all = all && strings.Contains(g, f)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("no goroutine got to %q in 30 s:\n%s", frames, buf[:n])
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}
