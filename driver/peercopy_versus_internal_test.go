//go:build linux

package driver

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ebitengine/purego"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/gputest"
)

// peerLoops are the C halves of BenchmarkPeerCopy: cuMemcpyPeerAsync
// called from C in this process, on the same contexts, stream and memory
// as the Go half.
const peerLoops = `
#include <cuda.h>
int loop_peer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t bytes, CUstream s, long n) {
	for (long i = 0; i < n; i++) {
		CUresult r = cuMemcpyPeerAsync(dst, dc, src, sc, bytes, s);
		if (r) return r;
	}
	return cuStreamSynchronize(s);
}
int loop_peer_sync(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t bytes, CUstream s, long n) {
	for (long i = 0; i < n; i++) {
		CUresult r = cuMemcpyPeerAsync(dst, dc, src, sc, bytes, s);
		if (r) return r;
		r = cuStreamSynchronize(s);
		if (r) return r;
	}
	return 0;
}
`

// BenchmarkPeerCopy compares copies from device 0 to device 1 made with
// Buffer.CopyFromAsync (and CopyFrom) against cuMemcpyPeerAsync called
// from C, in interleaved rounds on the same contexts, stream and memory
// (the stream is device 0's, the source's): 1 GiB copies queued back to
// back ("1GiB": "-GB/s" per variant, and "-xC", the median over rounds of
// Go's time over C's), and 4 KiB copies each waited for ("4KiBSync":
// "-ns/op" and "-xC"), with peer access on (where the devices have it)
// and off. It needs two GPUs, gcc and the CUDA headers; run it with
// -test.benchtime=1x.
func BenchmarkPeerCopy(b *testing.B) {
	gputest.Require(b)
	if n, err := DeviceCount(); err != nil || n < 2 {
		b.Skipf("copies between devices need two GPUs (%d, %v)", n, err)
	}
	c := gputest.BuildC(b, peerLoops, "loop_peer", "loop_peer_sync")
	var ctx [2]*Context
	for i := range ctx {
		dev, err := DeviceByOrdinal(i)
		if err != nil {
			b.Fatal(err)
		}
		if ctx[i], err = dev.PrimaryContext(); err != nil {
			b.Fatal(err)
		}
		defer ctx[i].Close()
	}
	s, err := ctx[0].NewStream(StreamNonBlocking)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const big, small = 1 << 28, 1 << 10 // uint32s: 1 GiB and 4 KiB
	buf := func(c *Context, n int) *Buffer[uint32] {
		x, err := Alloc[uint32](c, n)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = x.Close() })
		return x
	}
	src, dst := buf(ctx[0], big), buf(ctx[1], big)
	ssrc, sdst := buf(ctx[0], small), buf(ctx[1], small)
	cloop := func(name string, d, sv *Buffer[uint32]) func(int) error {
		return func(n int) error {
			runtime.LockOSThread() // a C program would have the stream's context current
			defer runtime.UnlockOSThread()
			if err := cu.CtxSetCurrent(ctx[0].h); err != nil {
				return err
			}
			r, _, _ := purego.SyscallN(c[name], uintptr(d.at(d.a)), uintptr(ctx[1].h), uintptr(sv.at(sv.a)), uintptr(ctx[0].h),
				sv.size, uintptr(s.h), uintptr(n))
			if r != 0 {
				return fmt.Errorf("%s: CUresult %d", name, r)
			}
			return nil
		}
	}
	goAsync := func(n int) error {
		for i := 0; i < n; i++ {
			if err := dst.CopyFromAsync(s, src); err != nil {
				return err
			}
		}
		return s.Synchronize()
	}
	goSync := func(n int) error {
		for i := 0; i < n; i++ {
			if err := sdst.CopyFrom(s, ssrc); err != nil {
				return err
			}
		}
		return nil
	}
	canPeer, err := ctx[0].Device().CanAccessPeer(ctx[1].Device())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for _, access := range []bool{true, false} {
			if access && !canPeer {
				continue
			}
			for _, pair := range [][2]*Context{{ctx[0], ctx[1]}, {ctx[1], ctx[0]}} {
				var err error
				if access {
					err = pair[0].EnablePeerAccess(pair[1])
				} else {
					err = pair[0].DisablePeerAccess(pair[1])
				}
				if err != nil && !errors.Is(err, ErrPeerAccessAlreadyEnabled) && !errors.Is(err, ErrPeerAccessNotEnabled) {
					b.Fatal(err)
				}
			}
			tag := "NoPeerAccess"
			rounds, n := 5, 2
			if access {
				tag, rounds, n = "PeerAccess", 11, 4
			}
			if err := goAsync(1); err != nil { // warm: the first copy maps what the rest use
				b.Fatal(err)
			}
			peerVersus(b, tag+"/1GiB", rounds, n, float64(src.size),
				gputest.V("C", cloop("loop_peer", dst, src)), gputest.V("Go", goAsync))
			peerVersus(b, tag+"/4KiBSync", 21, 200, 0,
				gputest.V("C", cloop("loop_peer_sync", sdst, ssrc)), gputest.V("Go", goSync))
		}
	}
}

// peerVersus times the two variants (C first) in interleaved rounds of n
// calls each, rotating their order, and reports per variant the median
// time per call ("-ns/op"), or, when bytes is not 0, the median bandwidth
// ("-GB/s"), and for Go the median over rounds of its time over C's
// ("-xC").
func peerVersus(b *testing.B, name string, rounds, n int, bytes float64, vs ...gputest.Variant) {
	times := make([][]float64, len(vs))
	for r := 0; r < rounds; r++ {
		for k := range vs {
			i := (k + r) % len(vs)
			start := time.Now()
			if err := vs[i].Run(n); err != nil {
				b.Fatalf("%s/%s: %v", name, vs[i].Name, err)
			}
			times[i] = append(times[i], float64(time.Since(start).Nanoseconds())/float64(n))
		}
	}
	for k, v := range vs {
		if bytes != 0 {
			b.ReportMetric(bytes/gputest.Median(times[k]), name+"/"+v.Name+"-GB/s")
		} else {
			b.ReportMetric(gputest.Median(times[k]), name+"/"+v.Name+"-ns/op")
		}
		if k > 0 {
			ratios := make([]float64, rounds)
			for r := range ratios {
				ratios[r] = times[k][r] / times[0][r]
			}
			b.ReportMetric(gputest.Median(ratios), name+"/"+v.Name+"-xC")
		}
	}
}
