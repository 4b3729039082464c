package driver_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

func BenchmarkLaunchEmpty(b *testing.B) {
	e, s := setup(b)
	f, g, blk := e.fn["empty"], driver.Grid(1), driver.Block(1)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Launch(f, g, blk); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, s.Synchronize())
}

func BenchmarkLaunchArgsEmpty(b *testing.B) {
	e, s := setup(b)
	args, err := e.fn["empty"].NewArgs()
	require.NoError(b, err)
	defer args.Close()
	g, blk := driver.Grid(1), driver.Block(1)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.LaunchArgs(args, g, blk); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, s.Synchronize())
}

func BenchmarkLaunch4Args(b *testing.B) {
	e, s := setup(b)
	out, err := driver.Alloc[uint32](e.ctx, 1)
	require.NoError(b, err)
	defer out.Close()
	f, g, blk := e.fn["add4"], driver.Grid(1), driver.Block(1)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Launch(f, g, blk, out, uint32(1), uint32(2), uint32(3)); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, s.Synchronize())
}

func BenchmarkLaunchArgs4(b *testing.B) {
	e, s := setup(b)
	out, err := driver.Alloc[uint32](e.ctx, 1)
	require.NoError(b, err)
	defer out.Close()
	args, err := e.fn["add4"].NewArgs(out, uint32(1), uint32(2), uint32(3))
	require.NoError(b, err)
	defer args.Close()
	g, blk := driver.Grid(1), driver.Block(1)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.LaunchArgs(args, g, blk); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, s.Synchronize())
}

func BenchmarkLaunchSync(b *testing.B) {
	e, s := setup(b)
	args, err := e.fn["empty"].NewArgs()
	require.NoError(b, err)
	defer args.Close()
	g, blk := driver.Grid(1), driver.Block(1)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.LaunchArgs(args, g, blk); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStreamSyncIdle(b *testing.B) {
	_, s := setup(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEventRecord(b *testing.B) {
	e, s := setup(b)
	ev, err := e.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(b, err)
	defer ev.Close()
	b.ReportAllocs()
	for b.Loop() {
		if err := ev.Record(s); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, s.Synchronize())
}

func BenchmarkHostFuncRoundTrip(b *testing.B) {
	_, s := setup(b)
	n := 0
	f := func() { n++ }
	b.ReportAllocs()
	for b.Loop() {
		if err := s.LaunchHostFunc(f); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCopyHtoD4Bytes(b *testing.B) {
	e, _ := setup(b)
	buf, err := driver.Alloc[uint32](e.ctx, 1)
	require.NoError(b, err)
	defer buf.Close()
	src := []uint32{7}
	b.ReportAllocs()
	for b.Loop() {
		if err := buf.CopyFromHost(src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCopyHtoDPinnedAsync4Bytes(b *testing.B) {
	e, s := setup(b)
	buf, err := driver.Alloc[uint32](e.ctx, 1)
	require.NoError(b, err)
	defer buf.Close()
	hb, err := driver.AllocHost[uint32](e.ctx, 1, driver.HostAllocDefault)
	require.NoError(b, err)
	defer hb.Close()
	b.ReportAllocs()
	for b.Loop() {
		if err := buf.CopyFromPinnedAsync(s, hb); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, s.Synchronize())
}

// BenchmarkContextBound is a call that needs the context current
// (cuCtxGetLimit): lock the thread, set the context, call, unlock.
func BenchmarkContextBound(b *testing.B) {
	e, _ := setup(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.ctx.Limit(driver.LimitStackSize); err != nil {
			b.Fatal(err)
		}
	}
}

// Batched launches: a sync after every 256, so the launch queue never fills
// and the benchmark times the calls, not the wait for queue slots.

func benchBatched(b *testing.B, s *driver.Stream, launch func() error) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := launch(); err != nil {
			b.Fatal(err)
		}
		if i++; i%256 == 0 {
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	}
	require.NoError(b, s.Synchronize())
}

func BenchmarkLaunchEmptyBatched(b *testing.B) {
	e, s := setup(b)
	f, g, blk := e.fn["empty"], driver.Grid(1), driver.Block(1)
	benchBatched(b, s, func() error { return s.Launch(f, g, blk) })
}

func BenchmarkLaunchArgsEmptyBatched(b *testing.B) {
	e, s := setup(b)
	args, err := e.fn["empty"].NewArgs()
	require.NoError(b, err)
	defer args.Close()
	g, blk := driver.Grid(1), driver.Block(1)
	benchBatched(b, s, func() error { return s.LaunchArgs(args, g, blk) })
}

func BenchmarkLaunch4ArgsBatched(b *testing.B) {
	e, s := setup(b)
	out, err := driver.Alloc[uint32](e.ctx, 1)
	require.NoError(b, err)
	defer out.Close()
	f, g, blk := e.fn["add4"], driver.Grid(1), driver.Block(1)
	benchBatched(b, s, func() error { return s.Launch(f, g, blk, out, uint32(1), uint32(2), uint32(3)) })
}

func BenchmarkLaunchArgs4Batched(b *testing.B) {
	e, s := setup(b)
	out, err := driver.Alloc[uint32](e.ctx, 1)
	require.NoError(b, err)
	defer out.Close()
	args, err := e.fn["add4"].NewArgs(out, uint32(1), uint32(2), uint32(3))
	require.NoError(b, err)
	defer args.Close()
	g, blk := driver.Grid(1), driver.Block(1)
	benchBatched(b, s, func() error { return s.LaunchArgs(args, g, blk) })
}
