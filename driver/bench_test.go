package driver_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

// benchCalls times call with -benchmem. With syncEvery > 0 it synchronises s
// after every syncEvery calls, so the launch queue never fills and the
// benchmark times the calls, not the wait for queue slots. s, when not nil,
// is synchronised at the end.
func benchCalls(b *testing.B, s *driver.Stream, syncEvery int, call func() error) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
		if i++; syncEvery > 0 && i%syncEvery == 0 {
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if s != nil {
		require.NoError(b, s.Synchronize())
	}
}

// benchArgs marshals args for the kernel name once; they are closed when
// the benchmark ends.
func benchArgs(b *testing.B, e *testEnv, name string, args ...any) *driver.Args {
	a, err := e.fn[name].NewArgs(args...)
	require.NoError(b, err)
	b.Cleanup(func() { _ = a.Close() })
	return a
}

// benchOut is the one-element output buffer of the add4 kernel.
func benchOut(b *testing.B, e *testEnv) *driver.Buffer[uint32] {
	out, err := driver.Alloc[uint32](e.ctx, 1)
	require.NoError(b, err)
	b.Cleanup(func() { _ = out.Close() })
	return out
}

var g1, b1 = driver.Grid(1), driver.Block(1)

// launchEmpty, launchArgsEmpty, launch4 and launchArgs4 are the four launch
// paths the benchmarks time, each ready to call.
func launchEmpty(b *testing.B) (*driver.Stream, func() error) {
	e, s := setup(b)
	return s, func() error { return s.Launch(e.fn["empty"], g1, b1) }
}

func launchArgsEmpty(b *testing.B) (*driver.Stream, func() error) {
	e, s := setup(b)
	args := benchArgs(b, e, "empty")
	return s, func() error { return s.LaunchArgs(args, g1, b1) }
}

func launch4(b *testing.B) (*driver.Stream, func() error) {
	e, s := setup(b)
	out := benchOut(b, e)
	return s, func() error { return s.Launch(e.fn["add4"], g1, b1, out, uint32(1), uint32(2), uint32(3)) }
}

func launchArgs4(b *testing.B) (*driver.Stream, func() error) {
	e, s := setup(b)
	args := benchArgs(b, e, "add4", benchOut(b, e), uint32(1), uint32(2), uint32(3))
	return s, func() error { return s.LaunchArgs(args, g1, b1) }
}

func BenchmarkLaunchEmpty(b *testing.B) {
	s, f := launchEmpty(b)
	benchCalls(b, s, 0, f)
}

func BenchmarkLaunchArgsEmpty(b *testing.B) {
	s, f := launchArgsEmpty(b)
	benchCalls(b, s, 0, f)
}

func BenchmarkLaunch4Args(b *testing.B) {
	s, f := launch4(b)
	benchCalls(b, s, 0, f)
}

func BenchmarkLaunchArgs4(b *testing.B) {
	s, f := launchArgs4(b)
	benchCalls(b, s, 0, f)
}

func BenchmarkLaunchSync(b *testing.B) {
	s, launch := launchArgsEmpty(b)
	benchCalls(b, s, 1, launch)
}

func BenchmarkStreamSyncIdle(b *testing.B) {
	_, s := setup(b)
	benchCalls(b, nil, 0, s.Synchronize)
}

func BenchmarkEventRecord(b *testing.B) {
	e, s := setup(b)
	ev, err := e.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(b, err)
	defer ev.Close()
	benchCalls(b, s, 0, func() error { return ev.Record(s) })
}

func BenchmarkHostFuncRoundTrip(b *testing.B) {
	_, s := setup(b)
	n := 0
	f := func() { n++ }
	benchCalls(b, s, 1, func() error { return s.LaunchHostFunc(f) })
}

func BenchmarkCopyHtoD4Bytes(b *testing.B) {
	e, s := setup(b)
	buf := benchOut(b, e)
	src := []uint32{7}
	benchCalls(b, nil, 0, func() error { return buf.CopyFromHost(s, src) })
}

func BenchmarkCopyHtoDPinnedAsync4Bytes(b *testing.B) {
	e, s := setup(b)
	buf := benchOut(b, e)
	hb, err := driver.AllocHost[uint32](e.ctx, 1, driver.HostAllocDefault)
	require.NoError(b, err)
	defer hb.Close()
	benchCalls(b, s, 0, func() error { return buf.CopyFromPinnedAsync(s, hb) })
}

// BenchmarkContextBound is a call that needs the context current
// (cuCtxGetLimit): lock the thread, set the context, call, unlock.
func BenchmarkContextBound(b *testing.B) {
	e, _ := setup(b)
	benchCalls(b, nil, 0, func() error {
		_, err := e.ctx.Limit(driver.LimitStackSize)
		return err
	})
}

// Batched launches: a sync after every 256.

func BenchmarkLaunchEmptyBatched(b *testing.B) {
	s, f := launchEmpty(b)
	benchCalls(b, s, 256, f)
}

func BenchmarkLaunchArgsEmptyBatched(b *testing.B) {
	s, f := launchArgsEmpty(b)
	benchCalls(b, s, 256, f)
}

func BenchmarkLaunch4ArgsBatched(b *testing.B) {
	s, f := launch4(b)
	benchCalls(b, s, 256, f)
}

func BenchmarkLaunchArgs4Batched(b *testing.B) {
	s, f := launchArgs4(b)
	benchCalls(b, s, 256, f)
}
