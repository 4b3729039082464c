//go:build linux

package nccl

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/ctxcall"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/internal/seam"
)

// ncclLoops is the C half of BenchmarkAllReduceVersusC: the loop a C
// program writes around ncclAllReduce, on the communicators, streams and
// memory the Go half uses, calling the libnccl this process loaded.
const ncclLoops = `
#include <cuda.h>
#include <dlfcn.h>
#include <stddef.h>
typedef int (*allreduce_t)(const void *, void *, size_t, int, int, void *, CUstream);
typedef int (*group_t)(void);
static allreduce_t ar;
static group_t gs, ge;

int nccl_open(const char *path) {
	void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (!h) return -1;
	ar = (allreduce_t)dlsym(h, "ncclAllReduce");
	gs = (group_t)dlsym(h, "ncclGroupStart");
	ge = (group_t)dlsym(h, "ncclGroupEnd");
	return ar && gs && ge ? 0 : -2;
}

/* n grouped float32 sum all-reduces in place of count elements, one per
   rank (without group, one rank's, not grouped); with wait, each is waited
   for on every stream; with clear, the thread is left with no current
   context after each group (as Group leaves it). */
int loop_allreduce(long n, int nd, CUcontext *ctx, void **comm, CUdeviceptr *buf, CUstream *st, size_t count, int wait, int clear, int group) {
	for (long i = 0; i < n; i++) {
		int r = group ? gs() : 0;
		if (r) return 1000 + r;
		for (int d = 0; d < nd; d++) {
			CUresult c = cuCtxSetCurrent(ctx[d]);
			if (c) return c;
			r = ar((void *)buf[d], (void *)buf[d], count, 7, 0, comm[d], st[d]);
			if (r) return 1000 + r;
		}
		r = group ? ge() : 0;
		if (r) return 1000 + r;
		if (clear) cuCtxSetCurrent(NULL);
		for (int d = 0; wait && d < nd; d++) {
			CUresult c = cuStreamSynchronize(st[d]);
			if (c) return c;
		}
	}
	cuCtxSetCurrent(NULL);
	return 0;
}
`

// BenchmarkAllReduceVersusC compares, in one process on the same
// communicators (InitAll over every GPU), streams and buffers, grouped
// float32 all-reduces queued by Group and AllReduce with the same calls
// made by a C loop, in interleaved rounds whose order rotates (so that
// drift on the machine cancels out):
//
//   - "enqueue": 100 all-reduces of 8 bytes queued without waiting, timed
//     per Group (the streams are idle at the start of each round): the
//     host's cost of queuing;
//   - "8B": 8-byte all-reduces each waited for on every stream (Go:
//     Stream.Synchronize): latency;
//   - "1GiB": 1 GiB all-reduces queued back to back, then waited for: bus
//     bandwidth ("-busGB/s", as nccl-tests computes it);
//   - "single": one rank's all-reduces, not grouped (see versusSingle).
//
// Per variant it reports the median ns per all-reduce and ("-xC") the
// median over rounds of its time over C's. To tell where a gap comes
// from: "GoLocked" is Go with the goroutine locked to one thread for the
// whole loop, as C's runs on one; "CClear" is the C loop leaving the thread
// with no current context after each group, as Group does; "GoRaw" is the
// C loop's calls made from Go (the generated calls, no checks, no holds),
// on one locked thread. It needs a GPU, libnccl, gcc
// and the CUDA headers; run it with -test.benchtime=1x
// (PURECUDA_VERSUS_ROUNDS sets the rounds, 101 by default).
func BenchmarkAllReduceVersusC(b *testing.B) {
	gputest.Require(b)
	path, err := ncclraw.Load()
	if err != nil {
		b.Skip(err)
	}
	c := gputest.BuildC(b, ncclLoops, "nccl_open", "loop_allreduce")
	cpath := append([]byte(path), 0)
	if r, _, _ := purego.SyscallN(c["nccl_open"], uintptr(unsafe.Pointer(&cpath[0]))); r != 0 {
		b.Fatalf("the C half cannot find %s in this process: %d", path, int32(r))
	}
	nd, err := driver.DeviceCount()
	if err != nil {
		b.Fatal(err)
	}
	ctxs := make([]*driver.Context, nd)
	streams := make([]*driver.Stream, nd)
	for i := range ctxs {
		dev, err := driver.DeviceByOrdinal(i)
		if err != nil {
			b.Fatal(err)
		}
		if ctxs[i], err = dev.PrimaryContext(); err != nil {
			b.Fatal(err)
		}
		defer ctxs[i].Close()
		if streams[i], err = ctxs[i].NewStream(driver.StreamNonBlocking); err != nil {
			b.Fatal(err)
		}
		defer streams[i].Close()
	}
	comms, err := InitAll(ctxs...)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, cm := range comms {
			_ = cm.Close()
		}
	}()
	rounds := 101
	if s := os.Getenv("PURECUDA_VERSUS_ROUNDS"); s != "" {
		if rounds, err = strconv.Atoi(s); err != nil || rounds < 1 {
			b.Fatalf("PURECUDA_VERSUS_ROUNDS=%q", s)
		}
	}
	// The C half's arrays, in Go memory that stays put for the calls.
	cctx := make([]uintptr, nd)
	ccomm := make([]uintptr, nd)
	cst := make([]uintptr, nd)
	cbuf := make([]uintptr, nd)
	for i := range ctxs {
		cctx[i] = uintptr(comms[i].st.cuctx)
		ccomm[i] = uintptr(comms[i].st.h)
		cst[i] = seam.Stream(streams[i])
	}
	syncAll := func() {
		for _, s := range streams {
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, size := range []struct {
		name        string
		bytes       int
		n           int // all-reduces a round
		wait, timed bool
	}{
		{"enqueue", 8, 100, false, false},
		{"8B", 8, 200, true, false},
		{"1GiB", 1 << 30, 5, false, true},
	} {
		count := size.bytes / 4
		bufs := make([]*driver.Buffer[float32], nd)
		for i := range bufs {
			if bufs[i], err = driver.AllocZeroed[float32](streams[i], count); err != nil {
				b.Fatal(err)
			}
			p, _, ref, err := seam.UseOn("bench", bufs[i], streams[i])
			if err != nil {
				b.Fatal(err)
			}
			cbuf[i] = p
			_ = ref.Release()
		}
		goRun := func(n int) {
			for range n {
				if err := Group(func() error {
					for i, cm := range comms {
						if err := AllReduce(cm, streams[i], bufs[i], bufs[i], Sum); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				if size.wait {
					syncAll()
				}
			}
		}
		cLoop := func(n int, clear uintptr) {
			wait := uintptr(0)
			if size.wait {
				wait = 1
			}
			r, _, _ := purego.SyscallN(c["loop_allreduce"], uintptr(n), uintptr(nd),
				uintptr(unsafe.Pointer(&cctx[0])), uintptr(unsafe.Pointer(&ccomm[0])),
				uintptr(unsafe.Pointer(&cbuf[0])), uintptr(unsafe.Pointer(&cst[0])), uintptr(count), wait, clear, 1)
			if r != 0 {
				b.Fatalf("C loop: %d", int32(r))
			}
		}
		cRun := func(n int) { cLoop(n, 0) }
		cClear := func(n int) { cLoop(n, 1) }
		goRaw := func(n int) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for range n {
				if err := ncclraw.GroupStart(); err != nil {
					b.Fatal(err)
				}
				for d := range nd {
					if err := cu.CtxSetCurrent(cu.CUcontext(cctx[d])); err != nil {
						b.Fatal(err)
					}
					if err := ncclraw.AllReduce(cbuf[d], cbuf[d], uintptr(count), ncclraw.Float32, ncclraw.Sum,
						ncclraw.Comm(ccomm[d]), ncclraw.Stream(cst[d])); err != nil {
						b.Fatal(err)
					}
				}
				if err := ncclraw.GroupEnd(); err != nil {
					b.Fatal(err)
				}
				for d := 0; size.wait && d < nd; d++ {
					if err := cu.StreamSynchronize(cu.CUstream(cst[d])); err != nil {
						b.Fatal(err)
					}
				}
			}
			_ = cu.CtxSetCurrent(0)
		}
		// GoLocked is Go with the goroutine locked to one OS thread for
		// the whole loop, as the C loop runs on one: whether moving between
		// threads from one Group to the next costs anything.
		goLocked := func(n int) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			goRun(n)
		}
		names := []string{"C", "Go", "GoLocked", "CClear", "GoRaw"}
		run := []func(int){cRun, goRun, goLocked, cClear, goRaw}
		goRun(5)
		cRun(5)
		syncAll()
		times := make([][]float64, len(run))
		for r := 0; r < rounds; r++ {
			for k := range run {
				i := (k + r) % len(run)
				syncAll()
				start := time.Now()
				run[i](size.n)
				if !size.wait && size.timed {
					syncAll()
				}
				times[i] = append(times[i], float64(time.Since(start).Nanoseconds())/float64(size.n))
			}
		}
		syncAll()
		for i, name := range names {
			med := gputest.Median(times[i])
			b.ReportMetric(med, fmt.Sprintf("%s-%s-ns/op", size.name, name))
			if size.timed {
				bus := 2 * float64(nd-1) / float64(nd) * float64(size.bytes) / med
				b.ReportMetric(bus, fmt.Sprintf("%s-%s-busGB/s", size.name, name))
			}
			if i > 0 {
				ratios := make([]float64, rounds)
				for r := range ratios {
					ratios[r] = times[i][r] / times[0][r]
				}
				b.ReportMetric(gputest.Median(ratios), size.name+"-"+name+"-xC")
			}
		}
		for i := range bufs {
			_ = bufs[i].Close()
		}
	}
	versusSingle(b, c, ctxs[0], streams[0], rounds)
}

// versusSingle is BenchmarkAllReduceVersusC's "single" case: 100 8-byte
// all-reduces of a one-rank communicator queued without a group and
// without waiting, per call: the host's cost of one operation's enqueue,
// C's loop (its thread keeps the context current) beside AllReduce and
// beside the raw call from Go ("GoRaw", the context current on one locked
// thread), and beside "GoFloor", the push, the call and the clearing in one
// crossing from Go with nothing else. "-minusC-ns" is the median over rounds of the difference per
// call.
func versusSingle(b *testing.B, c map[string]uintptr, ctx *driver.Context, s *driver.Stream, rounds int) {
	comms, err := InitAll(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer comms[0].Close()
	buf, err := driver.AllocZeroed[float32](s, 2)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	p, _, ref, err := seam.UseOn("bench", buf, s)
	if err != nil {
		b.Fatal(err)
	}
	_ = ref.Release()
	cctx, ccomm, cst, cbuf := []uintptr{uintptr(comms[0].st.cuctx)}, []uintptr{uintptr(comms[0].st.h)}, []uintptr{seam.Stream(s)}, []uintptr{p}
	const n = 100
	floor := new(ctxcall.Seq) // on the heap, as the devices' are
	run := []func(){
		func() {
			r, _, _ := purego.SyscallN(c["loop_allreduce"], n, 1, uintptr(unsafe.Pointer(&cctx[0])), uintptr(unsafe.Pointer(&ccomm[0])),
				uintptr(unsafe.Pointer(&cbuf[0])), uintptr(unsafe.Pointer(&cst[0])), 2, 0, 0, 0)
			if r != 0 {
				b.Fatalf("C loop: %d", int32(r))
			}
		},
		func() {
			for range n {
				if err := AllReduce(comms[0], s, buf, buf, Sum); err != nil {
					b.Fatal(err)
				}
			}
		},
		func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := cu.CtxSetCurrent(cu.CUcontext(cctx[0])); err != nil {
				b.Fatal(err)
			}
			for range n {
				if err := ncclraw.AllReduce(p, p, 2, ncclraw.Float32, ncclraw.Sum, ncclraw.Comm(ccomm[0]), ncclraw.Stream(cst[0])); err != nil {
					b.Fatal(err)
				}
			}
			_ = cu.CtxSetCurrent(0)
		},
		func() {
			// GoFloor: the push, the call and the clearing in one
			// crossing, from the unlocked loop, with no check and no
			// hold: the least a call that leaves the thread as
			// purecuda's do can cost.
			for range n {
				if err := fillStep(floor.Op(), opAllReduce, p, p, 2, ncclraw.Float32, ncclraw.Sum, 0, ncclraw.Comm(ccomm[0]), ncclraw.Stream(cst[0])); err != nil {
					b.Fatal(err)
				}
				if err := floor.Run(cu.CUcontext(cctx[0]), ncclraw.AllReduceStatus); err != nil {
					b.Fatal(err)
				}
			}
		},
	}
	names := []string{"C", "Go", "GoRaw", "GoFloor"}
	for _, f := range run {
		f()
	}
	sync := func() {
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
	sync()
	times := make([][]float64, len(run))
	for r := 0; r < rounds; r++ {
		for k := range run {
			i := (k + r) % len(run)
			sync()
			start := time.Now()
			run[i]()
			times[i] = append(times[i], float64(time.Since(start).Nanoseconds())/n)
		}
	}
	sync()
	for i, name := range names {
		b.ReportMetric(gputest.Median(times[i]), "single-"+name+"-ns/op")
		if i > 0 {
			ratios, diffs := make([]float64, rounds), make([]float64, rounds)
			for r := range ratios {
				ratios[r] = times[i][r] / times[0][r]
				diffs[r] = times[i][r] - times[0][r]
			}
			b.ReportMetric(gputest.Median(ratios), "single-"+name+"-xC")
			b.ReportMetric(gputest.Median(diffs), "single-"+name+"-minusC-ns")
		}
	}
}
