//go:build linux

package driver

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nvrtc"
)

// cLoops are the C halves of BenchmarkVersusC: each runs one driver call n
// times in a C loop, in this process, on the same context, stream and
// kernel as the Go half, so the two can be compared without the noise of
// separate processes and machines.
const cLoops = `
#include <cuda.h>
#include <time.h>
static long long inside_ns;
static long long now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
long long take_inside(void) { long long v = inside_ns; inside_ns = 0; return v; }
int loop_launch_timed(CUfunction f, CUstream s, long n) {
	for (long i = 0; i < n; i++) {
		long long t = now_ns();
		CUresult r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, 0, 0);
		inside_ns += now_ns() - t;
		if (r) return r;
	}
	return cuStreamSynchronize(s);
}
int once_launch_timed(CUfunction f, CUstream s) {
	long long t = now_ns();
	CUresult r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, 0, 0);
	inside_ns += now_ns() - t;
	return r;
}
int loop_launch(CUfunction f, CUstream s, void **params, long n) {
	for (long i = 0; i < n; i++) { CUresult r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, 0); if (r) return r; }
	return cuStreamSynchronize(s);
}
int loop_launch_sync(CUfunction f, CUstream s, long n) {
	for (long i = 0; i < n; i++) {
		CUresult r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, 0, 0); if (r) return r;
		r = cuStreamSynchronize(s); if (r) return r;
	}
	return 0;
}
int loop_event_record(CUevent e, CUstream s, long n) {
	for (long i = 0; i < n; i++) { CUresult r = cuEventRecord(e, s); if (r) return r; }
	return cuStreamSynchronize(s);
}
int loop_sync(CUstream s, long n) {
	for (long i = 0; i < n; i++) { CUresult r = cuStreamSynchronize(s); if (r) return r; }
	return 0;
}
static volatile long host_hits;
static void CUDA_CB host_fn(void *d) { host_hits++; }
int loop_host_fn(CUstream s, long n) {
	for (long i = 0; i < n; i++) {
		CUresult r = cuLaunchHostFunc(s, host_fn, 0); if (r) return r;
		r = cuStreamSynchronize(s); if (r) return r;
	}
	return 0;
}
int loop_h2d(CUdeviceptr d, const void *src, CUstream s, long n) {
	for (long i = 0; i < n; i++) {
		CUresult r = cuMemcpyHtoDAsync(d, src, 4, s); if (r) return r;
		r = cuStreamSynchronize(s); if (r) return r;
	}
	return 0;
}
`

// buildCLoops compiles cLoops against the toolkit's cuda.h and the driver.
func buildCLoops(b *testing.B) map[string]uintptr {
	return gputest.BuildC(b, cLoops, "loop_launch", "loop_launch_sync", "loop_event_record", "loop_sync", "loop_h2d", "loop_host_fn",
		"loop_launch_timed", "once_launch_timed", "take_inside")
}

// BenchmarkVersusC times each hot call three ways in one process, on the
// same context, stream and kernel: a C loop ("C"), the raw table ("raw") and
// the driver API ("LaunchArgs", "Launch", "driver"). Run with
// -test.benchtime=1x: it makes 105 interleaved rounds of 4000 calls per
// variant (PURECUDA_VERSUS_ROUNDS=ROUNDSxCALLS changes that), rotating the
// order each round. Per variant it reports the median
// ns per call and ("-xC") the median over rounds of the ratio to the C loop
// of the same round, so that drift on the machine cancels out.
//
// The LaunchInside group times the inside of cuLaunchKernel (a C wrapper
// reads the clock around it) once from a C loop and once called per launch
// from Go: "-inside-ns" is the time spent in libcuda per launch, the rest
// of "-ns/op" is the caller's.
func BenchmarkVersusC(b *testing.B) {
	gputest.Require(b)
	c := buildCLoops(b)
	dev, err := DeviceByOrdinal(0)
	if err != nil {
		b.Fatal(err)
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		b.Fatal(err)
	}
	defer ctx.Close()
	mod, _, err := ctx.CompileModule(`extern "C" __global__ void empty() {}
extern "C" __global__ void add4(unsigned* o, unsigned a, unsigned b, unsigned c) { *o = a + b + c; }`, nvrtc.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer mod.Close()
	empty, _ := mod.Function("empty")
	add4, _ := mod.Function("add4")
	s, err := ctx.NewStream(StreamNonBlocking)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	out, err := Alloc[uint32](ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	ev, err := ctx.NewEvent(EventDisableTiming)
	if err != nil {
		b.Fatal(err)
	}
	defer ev.Close()
	x, y, z := uint32(1), uint32(2), uint32(3)
	dptr := out.at(out.a)
	var dptrArg any = DevicePtr(dptr)
	raw4 := []unsafe.Pointer{unsafe.Pointer(&dptr), unsafe.Pointer(&x), unsafe.Pointer(&y), unsafe.Pointer(&z)}
	emptyArgs, _ := empty.NewArgs()
	defer emptyArgs.Close()
	add4Args, _ := add4.NewArgs(out, uint32(1), uint32(2), uint32(3))
	defer add4Args.Close()
	src := []uint32{7}
	g, blk := Grid(1), Block(1)
	var counter atomic.Int64
	timedOnce := func() error {
		cf := ccall.Get(c["once_launch_timed"])
		cf.Args[0], cf.Args[1] = uintptr(empty.h), uintptr(s.h)
		r := cf.Call(2)
		ccall.Put(cf)
		if r != 0 {
			return fmt.Errorf("once_launch_timed: CUresult %d", r)
		}
		return nil
	}

	type variant struct {
		name string
		run  func(n int) error
	}
	cloop := func(name string, args ...uintptr) func(int) error {
		return func(n int) error {
			// A C program would have the context current (the synchronous
			// copy needs it).
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := cu.CtxSetCurrent(ctx.h); err != nil {
				return err
			}
			all := append(append([]uintptr(nil), args...), uintptr(n))
			if r, _, _ := purego.SyscallN(c[name], all...); r != 0 {
				return fmt.Errorf("%s: CUresult %d", name, r)
			}
			return nil
		}
	}
	goloop := func(f func() error, syncAfter bool) func(int) error {
		return func(n int) error {
			for i := 0; i < n; i++ {
				if err := f(); err != nil {
					return err
				}
			}
			if syncAfter { // the C loops end with a stream sync too
				return s.Synchronize()
			}
			return nil
		}
	}
	groups := [][]variant{
		{
			{"LaunchEmpty/C", cloop("loop_launch", uintptr(empty.h), uintptr(s.h), 0)},
			{"LaunchEmpty/raw", goloop(func() error { return cu.LaunchKernel(empty.h, 1, 1, 1, 1, 1, 1, 0, s.h, nil, nil) }, true)},
			{"LaunchEmpty/raw+atomics", goloop(func() error {
				// Two atomic read-modify-writes around the call, to see what
				// atomics cost here (LaunchArgs makes four: its use count and frame flag).
				counter.Add(1)
				err := cu.LaunchKernel(empty.h, 1, 1, 1, 1, 1, 1, 0, s.h, nil, nil)
				counter.Add(-1)
				return err
			}, true)},
			{"LaunchEmpty/LaunchArgs", goloop(func() error { return s.LaunchArgs(emptyArgs, g, blk) }, true)},
			{"LaunchEmpty/Launch", goloop(func() error { return s.Launch(empty, g, blk) }, true)},
		},
		{
			{"Launch4Args/C", cloop("loop_launch", uintptr(add4.h), uintptr(s.h), uintptr(unsafe.Pointer(&raw4[0])))},
			{"Launch4Args/raw", goloop(func() error { return cu.LaunchKernel(add4.h, 1, 1, 1, 1, 1, 1, 0, s.h, &raw4[0], nil) }, true)},
			{"Launch4Args/short-heap", goloop(func() error { return launchKernel(s.launchFn, add4.h, g, blk, 0, s.h, &raw4[0]) }, true)},
			{"Launch4Args/short-stack", goloop(func() error { return launchStackParams(s, add4.h, dptr) }, true)},
			{"Launch4Args/LaunchArgs", goloop(func() error { return s.LaunchArgs(add4Args, g, blk) }, true)},
			{"Launch4Args/Launch", goloop(func() error { return s.Launch(add4, g, blk, out, uint32(1), uint32(2), uint32(3)) }, true)},
			// The same with the buffer passed as a DevicePtr (made once: a
			// conversion per call would allocate): Launch's cost for the
			// buffer argument is the difference.
			{"Launch4Args/Launch-ptr", goloop(func() error { return s.Launch(add4, g, blk, dptrArg, uint32(1), uint32(2), uint32(3)) }, true)},
		},
		{
			{"LaunchSync/C", cloop("loop_launch_sync", uintptr(empty.h), uintptr(s.h))},
			{"LaunchSync/driver", goloop(func() error {
				if err := s.LaunchArgs(emptyArgs, g, blk); err != nil {
					return err
				}
				return s.Synchronize()
			}, false)},
		},
		{
			{"LaunchInside/C", cloop("loop_launch_timed", uintptr(empty.h), uintptr(s.h))},
			{"LaunchInside/Go", goloop(timedOnce, true)},
		},
		{
			{"EventRecord/C", cloop("loop_event_record", uintptr(ev.h), uintptr(s.h))},
			{"EventRecord/driver", goloop(func() error { return ev.Record(s) }, true)},
		},
		{
			{"SyncIdle/C", cloop("loop_sync", uintptr(s.h))},
			{"SyncIdle/driver", goloop(s.Synchronize, false)},
		},
		{
			{"HostFuncRoundTrip/C", cloop("loop_host_fn", uintptr(s.h))},
			{"HostFuncRoundTrip/driver", goloop(func() error {
				if err := s.LaunchHostFunc(hostNop); err != nil {
					return err
				}
				return s.Synchronize()
			}, false)},
			{"HostFuncRoundTrip/portable", func(n int) error {
				// The same with polling off: every call enters Go through
				// purego and hands over to a worker goroutine.
				old := lifetime.SetPollWindow(0)
				defer lifetime.SetPollWindow(old)
				for i := 0; i < n; i++ {
					if err := s.LaunchHostFunc(hostNop); err != nil {
						return err
					}
					if err := s.Synchronize(); err != nil {
						return err
					}
				}
				return nil
			}},
		},
		{
			{"H2D4Bytes/C", cloop("loop_h2d", uintptr(dptr), uintptr(unsafe.Pointer(&src[0])), uintptr(s.h))},
			{"H2D4Bytes/driver", goloop(func() error { return out.CopyFromHost(s, src) }, false)},
		},
	}
	rounds, n := 105, 4000
	if v := os.Getenv("PURECUDA_VERSUS_ROUNDS"); v != "" { // ROUNDSxCALLS, e.g. 105x4000
		if _, err := fmt.Sscanf(v, "%dx%d", &rounds, &n); err != nil || rounds < 1 || n < 1 {
			b.Fatalf("PURECUDA_VERSUS_ROUNDS=%q: want ROUNDSxCALLS", v)
		}
	}
	only := os.Getenv("PURECUDA_VERSUS") // a group's name prefix: time only that group
	for b.Loop() {
		for _, group := range groups {
			if only != "" && !strings.HasPrefix(group[0].name, only) {
				continue
			}
			times := make([][]float64, len(group))
			inside := make([][]float64, len(group))
			for r := 0; r < rounds; r++ {
				for k := range group {
					i := (k + r) % len(group)
					v := group[i]
					takeInside(c)
					start := time.Now()
					if err := v.run(n); err != nil {
						b.Fatalf("%s: %v", v.name, err)
					}
					times[i] = append(times[i], float64(time.Since(start).Nanoseconds())/float64(n))
					inside[i] = append(inside[i], float64(takeInside(c))/float64(n))
				}
			}
			for k, v := range group {
				b.ReportMetric(median(times[k]), v.name+"-ns/op")
				if in := median(inside[k]); in > 0 {
					b.ReportMetric(in, v.name+"-inside-ns")
				}
				if k > 0 {
					ratios := make([]float64, rounds)
					for r := range ratios {
						ratios[r] = times[k][r] / times[0][r]
					}
					b.ReportMetric(median(ratios), v.name+"-xC")
				}
			}
		}
	}
}

// launchStackParams launches add4(dptr, 1, 2, 3) with its parameters on
// the goroutine's stack, as Launch's small block has them, through the same
// call as the short-heap variant, whose parameters are on the heap.
func launchStackParams(s *Stream, fh cu.CUfunction, dptr cu.CUdeviceptr) error {
	var vals [4]uint64
	var ptrs [4]unsafe.Pointer
	vals[0], vals[1], vals[2], vals[3] = uint64(dptr), 1, 2, 3
	for i := range ptrs {
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	return launchKernel(s.launchFn, fh, Grid(1), Block(1), 0, s.h, &ptrs[0])
}

var hostHits atomic.Int64

// hostNop is the host function of the HostFuncRoundTrip group: made once,
// so the round trip measures purecuda, not a closure allocation.
func hostNop() { hostHits.Add(1) }

// takeInside returns and resets the C wrappers' time inside cuLaunchKernel.
func takeInside(c map[string]uintptr) int64 {
	cf := ccall.Get(c["take_inside"])
	r := cf.Call(0)
	ccall.Put(cf)
	return int64(r)
}

func median(xs []float64) float64 { return gputest.Median(xs) }
