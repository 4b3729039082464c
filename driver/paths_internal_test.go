package driver

import (
	"runtime"
	"testing"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/nvrtc"
)

// BenchmarkLaunchPaths compares, on one stream and one kernel, the raw
// table call with the driver's launch paths, with and without the calling
// thread locked and the context current on it.
func BenchmarkLaunchPaths(b *testing.B) {
	gputest.Require(b)
	dev, err := DeviceByOrdinal(0)
	if err != nil {
		b.Fatal(err)
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		b.Fatal(err)
	}
	defer ctx.Close()
	mod, _, err := ctx.CompileModule(`extern "C" __global__ void empty() {}`, nvrtc.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer mod.Close()
	f, err := mod.Function("empty")
	if err != nil {
		b.Fatal(err)
	}
	s, err := ctx.NewStream(StreamNonBlocking)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	args, err := f.NewArgs()
	if err != nil {
		b.Fatal(err)
	}
	defer args.Close()
	g, blk := Grid(1), Block(1)
	paths := []struct {
		name string
		call func() error
	}{
		{"raw", func() error { return cu.LaunchKernel(f.h, 1, 1, 1, 1, 1, 1, 0, s.h, nil, nil) }},
		{"LaunchArgs", func() error { return s.LaunchArgs(args, g, blk) }},
		{"Launch", func() error { return s.Launch(f, g, blk) }},
	}
	for _, locked := range []bool{false, true} {
		for _, p := range paths {
			name := p.name
			if locked {
				name += "/locked-current"
			}
			b.Run(name, func(b *testing.B) {
				if locked {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					if err := cu.CtxSetCurrent(ctx.h); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := p.call(); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Synchronize(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
