//go:build linux

package cublas

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
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/ctxcall"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/seam"
)

// cublasLoops is the C half of BenchmarkGemmVersusC: the loops a C
// program writes around cublasSgemm_v2 and cublasGemmEx, on the handle,
// stream and memory the Go half uses, calling the libcublas this process
// loaded. The cuBLAS types are spelled as ints and pointers (the values of
// cublas_api.h and library_types.h) so that only cuda.h is needed.
const cublasLoops = `
#include <cuda.h>
#include <dlfcn.h>
#include <stddef.h>
typedef int (*sgemm_t)(void *, int, int, int, int, int, const float *, const float *, int,
	const float *, int, const float *, float *, int);
typedef int (*gemmex_t)(void *, int, int, int, int, int, const void *, const void *, int, int,
	const void *, int, int, const void *, void *, int, int, int, int);
static sgemm_t sgemm;
static gemmex_t gemmex;
static const float one = 1, zero = 0;

int cublas_open(const char *path) {
	void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (!h) return -1;
	sgemm = (sgemm_t)dlsym(h, "cublasSgemm_v2");
	gemmex = (gemmex_t)dlsym(h, "cublasGemmEx");
	return sgemm && gemmex ? 0 : -2;
}

/* iters column-major C = A·B (m×k by k×n, no transposes, packed) on
   handle h, then a wait for the stream; mode 1: cublasGemmEx with BF16 A,
   B and C and float32 compute (CUDA_R_16BF 14, CUBLAS_COMPUTE_32F 68,
   CUBLAS_GEMM_DEFAULT -1), else cublasSgemm_v2; mode 2: cublasSgemm_v2
   with the context pushed before each call and the thread cleared after
   it, as purecuda leaves threads. */
int loop_gemm(long iters, CUcontext ctx, void *h, CUstream st, int m, int n, int k,
		CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, int mode) {
	CUresult r = mode == 2 ? CUDA_SUCCESS : cuCtxSetCurrent(ctx);
	if (r) return r;
	for (long i = 0; i < iters; i++) {
		if (mode == 2 && (r = cuCtxPushCurrent(ctx))) return r;
		int s = mode == 1 ? gemmex(h, 0, 0, m, n, k, &one, (const void *)a, 14, m, (const void *)b, 14, k, &zero, (void *)c, 14, m, 68, -1)
			: sgemm(h, 0, 0, m, n, k, &one, (const float *)a, m, (const float *)b, k, &zero, (float *)c, m);
		if (mode == 2) cuCtxSetCurrent(NULL);
		if (s) { cuCtxSetCurrent(NULL); return 1000 + s; }
	}
	r = cuStreamSynchronize(st);
	cuCtxSetCurrent(NULL);
	return r;
}

/* graph_make captures count SGEMMs C = A_i·B_i on st into a graph and
   instantiates it into *out. */
int graph_make(CUcontext ctx, void *h, CUstream st, int count, int m, int n, int k,
		CUdeviceptr *a, CUdeviceptr *b, CUdeviceptr c, CUgraphExec *out) {
	CUgraph g = NULL;
	CUresult r = cuCtxSetCurrent(ctx);
	if (r) return r;
	r = cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_RELAXED);
	if (r) { cuCtxSetCurrent(NULL); return r; }
	int s = 0;
	for (int i = 0; i < count && !s; i++)
		s = sgemm(h, 0, 0, m, n, k, &one, (const float *)a[i], m, (const float *)b[i], k, &zero, (float *)c, m);
	r = cuStreamEndCapture(st, &g);
	if (!s && !r) r = cuGraphInstantiate(out, g, 0);
	if (g) cuGraphDestroy(g);
	cuCtxSetCurrent(NULL);
	return s ? 1000 + s : r;
}

/* iters launches of e on st, then a wait. */
int loop_graph(long iters, CUgraphExec e, CUstream st) {
	for (long i = 0; i < iters; i++) {
		CUresult r = cuGraphLaunch(e, st);
		if (r) return r;
	}
	return cuStreamSynchronize(st);
}

int graph_free(CUgraphExec e) { return cuGraphExecDestroy(e); }
`

// Host scalars at fixed addresses for the GoRaw variant's calls.
var benchOne, benchZero = float32(1), float32(0)

// BenchmarkGemmVersusC compares, in one process on the same handle,
// stream and buffers, purecuda's Gemm and GemmEx with the same cuBLAS
// calls made by a C loop, in interleaved rounds whose order rotates (so
// that drift on the machine cancels out):
//
//   - "sgemm64": 64×64×64 SGEMMs queued back to back, then waited for,
//     per call (the host's cost dominates);
//   - "graph100": 100 such SGEMMs captured into a graph (Go: graph.Capture
//     of Gemm; C: cuStreamBeginCapture around cublasSgemm_v2) and the
//     executable replayed (Go: Exec.Launch; C: cuGraphLaunch), per GEMM;
//   - "sgemm8192": SGEMM 8192³, in TFLOPS;
//   - "bf16gemm8192": GemmEx 8192³ with BFloat16 A, B and C and
//     Compute32F, in TFLOPS.
//
// Per variant it reports the median ns per call ("-ns/op", per GEMM for
// graph100), the TFLOPS of the large ones, and ("-xC") the median over
// rounds of its time over C's: at most 1.03 for sgemm64, 1.02 for
// graph100, 1.01 (0.99× C's TFLOPS) for the large ones is the target.
// "GoRaw" is the C loop's calls made from Go through the generated table
// (no checks, no holds), on one locked thread with the context current
// throughout, and "GoRawBound" the same with the context pushed before
// each call and the thread cleared after it, as purecuda's calls leave
// threads, "CBound" the C loop pushing and clearing the context around
// each call, "GoLocked" Go's loop with the goroutine locked to one
// thread, and "GoFloor" the push, the call and the clearing in one
// crossing from Go, with nothing else: the least a call that leaves the
// thread as purecuda's do can cost. These tell where a gap comes from.
// It needs a GPU, cuBLAS, gcc and the CUDA headers; run it with
// -test.benchtime=1x (PURECUDA_VERSUS_ROUNDS sets the rounds of the small
// cases, 101 by default; the large ones run a fifth as many, at least 5;
// PURECUDA_VERSUS_BIG replaces 8192, in the names too, for a quick run).
func BenchmarkGemmVersusC(b *testing.B) {
	gputest.Require(b)
	path, err := cublasraw.Load()
	if err != nil {
		if gputest.Required() {
			b.Fatalf("PURECUDA_REQUIRE_GPU is set and cuBLAS is not usable: %v", err)
		}
		b.Skip(err)
	}
	c := gputest.BuildC(b, cublasLoops, "cublas_open", "loop_gemm", "graph_make", "loop_graph", "graph_free")
	cpath := append([]byte(path), 0)
	if r, _, _ := purego.SyscallN(c["cublas_open"], uintptr(unsafe.Pointer(&cpath[0]))); r != 0 {
		b.Fatalf("the C half cannot find %s in this process: %d", path, int32(r))
	}
	rounds := 101
	if v := os.Getenv("PURECUDA_VERSUS_ROUNDS"); v != "" {
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			b.Fatalf("PURECUDA_VERSUS_ROUNDS=%q", v)
		}
	}
	dev, err := driver.DeviceByOrdinal(0)
	if err != nil {
		b.Fatal(err)
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		b.Fatal(err)
	}
	defer ctx.Close()
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h, err := NewHandle(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	cctx, chandle, cstream := uintptr(h.st.cuctx), uintptr(h.st.h), seam.Stream(s)
	wait := func() {
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
	cCall := func(fn string, args ...uintptr) {
		if r, _, _ := purego.SyscallN(c[fn], args...); r != 0 {
			b.Fatalf("C %s: %d", fn, int32(r))
		}
	}

	// sgemm64: per call.
	const small = 64
	a, bb, cc := benchBuf[float32](b, s, small*small), benchBuf[float32](b, s, small*small), benchBuf[float32](b, s, small*small)
	A, B, C := ColMajorMatrix(a, small, small), ColMajorMatrix(bb, small, small), ColMajorMatrix(cc, small, small)
	ptr := func(x interface{ Ptr() driver.DevicePtr }) uintptr { return uintptr(x.Ptr()) }
	const perRound = 200
	sgemm, err := gemmProc32[kindOf[float32]()]()
	if err != nil {
		b.Fatal(err)
	}
	floor := new(ctxcall.Seq) // on the heap, as a handle's
	times := versusRounds(rounds, perRound, wait, []func(n int){
		func(n int) {
			cCall("loop_gemm", uintptr(n), cctx, chandle, cstream, small, small, small, ptr(a), ptr(bb), ptr(cc), 0)
		},
		func(n int) {
			for range n {
				if err := Gemm(h, 1, A, B, 0, C); err != nil {
					b.Fatal(err)
				}
			}
			wait()
		},
		func(n int) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := cu.CtxSetCurrent(cu.CUcontext(cctx)); err != nil {
				b.Fatal(err)
			}
			for range n {
				if err := cublasraw.Sgemm(cublasraw.Handle(chandle), cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_OP_N, small, small, small,
					uintptr(unsafe.Pointer(&benchOne)), ptr(a), small, ptr(bb), small, uintptr(unsafe.Pointer(&benchZero)), ptr(cc), small); err != nil {
					b.Fatal(err)
				}
			}
			_ = cu.CtxSetCurrent(0)
			wait()
		},
		func(n int) {
			// GoRawBound: GoRaw with the context pushed before each call
			// and the thread cleared after it, as every purecuda call
			// leaves it.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for range n {
				if err := cu.CtxPushCurrent(cu.CUcontext(cctx)); err != nil {
					b.Fatal(err)
				}
				if err := cublasraw.Sgemm(cublasraw.Handle(chandle), cublasraw.CUBLAS_OP_N, cublasraw.CUBLAS_OP_N, small, small, small,
					uintptr(unsafe.Pointer(&benchOne)), ptr(a), small, ptr(bb), small, uintptr(unsafe.Pointer(&benchZero)), ptr(cc), small); err != nil {
					b.Fatal(err)
				}
				if err := cu.CtxSetCurrent(0); err != nil {
					b.Fatal(err)
				}
			}
			wait()
		},
		func(n int) {
			// CBound: the C loop with the context pushed and cleared
			// around each call: what the clearing itself costs.
			cCall("loop_gemm", uintptr(n), cctx, chandle, cstream, small, small, small, ptr(a), ptr(bb), ptr(cc), 2)
		},
		func(n int) {
			// GoLocked: Go with the goroutine locked to one thread for
			// the loop, as C's runs on one: what moving between threads
			// (and cores) from one call to the next costs.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for range n {
				if err := Gemm(h, 1, A, B, 0, C); err != nil {
					b.Fatal(err)
				}
			}
			wait()
		},
		func(n int) {
			// GoFloor: the least any call that keeps purecuda's rule
			// (the context pushed for the call, the thread cleared after
			// it, any goroutine, any thread) can do: the push, the call
			// and the clearing in one crossing into C, from the
			// unlocked loop, with no check and no hold.
			for range n {
				op := floor.Op()
				op.Fn, op.N = sgemm, 14
				op.Args[0], op.Args[1], op.Args[2], op.Args[3], op.Args[4], op.Args[5] = chandle, 0, 0, small, small, small
				op.Args[6], op.Args[7], op.Args[8], op.Args[9] = uintptr(unsafe.Pointer(&benchOne)), ptr(a), small, ptr(bb)
				op.Args[10], op.Args[11], op.Args[12], op.Args[13] = small, uintptr(unsafe.Pointer(&benchZero)), ptr(cc), small
				if err := floor.Run(cu.CUcontext(cctx), gemmStatus32[kindOf[float32]()]); err != nil {
					b.Fatal(err)
				}
			}
			wait()
		},
	})
	report(b, "sgemm64", []string{"C", "Go", "GoRaw", "GoRawBound", "CBound", "GoLocked", "GoFloor"}, times, 0)

	// graph100: per GEMM of a replayed graph.
	const count = 100
	as, bs := make([]*driver.Buffer[float32], count), make([]*driver.Buffer[float32], count)
	cas, cbs := make([]uintptr, count), make([]uintptr, count)
	for i := range as {
		as[i], bs[i] = benchBuf[float32](b, s, small*small), benchBuf[float32](b, s, small*small)
		cas[i], cbs[i] = ptr(as[i]), ptr(bs[i])
	}
	gr, err := graph.Capture(s, graph.CaptureRelaxed, func(*driver.Stream) error {
		for i := range as {
			if err := Gemm(h, 1, ColMajorMatrix(as[i], small, small), ColMajorMatrix(bs[i], small, small), 0, C); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	exe, err := gr.Instantiate()
	if err != nil {
		b.Fatal(err)
	}
	defer exe.Close()
	var cexe uintptr
	cCall("graph_make", cctx, chandle, cstream, count, small, small, small,
		uintptr(unsafe.Pointer(&cas[0])), uintptr(unsafe.Pointer(&cbs[0])), ptr(cc), uintptr(unsafe.Pointer(&cexe)))
	runtime.KeepAlive(cas)
	runtime.KeepAlive(cbs)
	defer cCall("graph_free", cexe)
	const replays = 20
	times = versusRounds(rounds, replays, wait, []func(n int){
		func(n int) { cCall("loop_graph", uintptr(n), cexe, cstream) },
		func(n int) {
			for range n {
				if err := exe.Launch(s); err != nil {
					b.Fatal(err)
				}
			}
			wait()
		},
	})
	for i := range times {
		for r := range times[i] {
			times[i][r] /= count
		}
	}
	report(b, "graph100", []string{"C", "Go"}, times, 0)
	_ = gr.Close()

	// The large products, in TFLOPS.
	big := 8192
	if v := os.Getenv("PURECUDA_VERSUS_BIG"); v != "" {
		if big, err = strconv.Atoi(v); err != nil || big < 1 {
			b.Fatalf("PURECUDA_VERSUS_BIG=%q", v)
		}
	}
	flops := 2 * float64(big) * float64(big) * float64(big)
	bigRounds := max(rounds/5, 5)
	{
		a, bb, cc := benchBuf[float32](b, s, big*big), benchBuf[float32](b, s, big*big), benchBuf[float32](b, s, big*big)
		A, B, C := ColMajorMatrix(a, big, big), ColMajorMatrix(bb, big, big), ColMajorMatrix(cc, big, big)
		times = versusRounds(bigRounds, 3, wait, []func(n int){
			func(n int) {
				cCall("loop_gemm", uintptr(n), cctx, chandle, cstream, uintptr(big), uintptr(big), uintptr(big), ptr(a), ptr(bb), ptr(cc), 0)
			},
			func(n int) {
				for range n {
					if err := Gemm(h, 1, A, B, 0, C); err != nil {
						b.Fatal(err)
					}
				}
				wait()
			},
		})
		report(b, fmt.Sprintf("sgemm%d", big), []string{"C", "Go"}, times, flops)
		_, _, _ = a.Close(), bb.Close(), cc.Close()
	}
	{
		a, bb, cc := benchBuf[BFloat16](b, s, big*big), benchBuf[BFloat16](b, s, big*big), benchBuf[BFloat16](b, s, big*big)
		A, B, C := ColMajorMatrix(a, big, big), ColMajorMatrix(bb, big, big), ColMajorMatrix(cc, big, big)
		times = versusRounds(bigRounds, 20, wait, []func(n int){
			func(n int) {
				cCall("loop_gemm", uintptr(n), cctx, chandle, cstream, uintptr(big), uintptr(big), uintptr(big), ptr(a), ptr(bb), ptr(cc), 1)
			},
			func(n int) {
				for range n {
					if err := GemmEx(h, 1, A, B, 0, C, Compute32F); err != nil {
						b.Fatal(err)
					}
				}
				wait()
			},
		})
		report(b, fmt.Sprintf("bf16gemm%d", big), []string{"C", "Go"}, times, flops)
		_, _, _ = a.Close(), bb.Close(), cc.Close()
	}
}

// benchBuf is n elements of T on s's device holding small values (1/8 to
// 1 in steps of 1/8, as float32, BFloat16 or their bits), closed when b
// ends.
func benchBuf[T float32 | BFloat16](b *testing.B, s *driver.Stream, n int) *driver.Buffer[T] {
	host := make([]T, n)
	for i := range host {
		v := float32(i%8+1) / 8
		switch p := any(&host[i]).(type) {
		case *float32:
			*p = v
		case *BFloat16:
			*p = BFloat16Of(v)
		}
	}
	buf, err := driver.AllocCopy(s, host)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = buf.Close() })
	return buf
}

// versusRounds warms each variant up, then times them in rounds whose
// order rotates, n calls a round, and returns the ns per call of each
// variant in each round.
func versusRounds(rounds, n int, wait func(), run []func(n int)) [][]float64 {
	for _, f := range run {
		f(2)
	}
	wait()
	times := make([][]float64, len(run))
	for r := range rounds {
		for k := range run {
			i := (k + r) % len(run)
			wait()
			start := time.Now()
			run[i](n)
			times[i] = append(times[i], float64(time.Since(start).Nanoseconds())/float64(n))
		}
	}
	return times
}

// report reports each variant's median ns per call, its TFLOPS when
// flops (per call) is given, and, for all but the first (C), the median
// over rounds of its time over C's.
func report(b *testing.B, name string, names []string, times [][]float64, flops float64) {
	for i, v := range names {
		med := gputest.Median(times[i])
		b.ReportMetric(med, fmt.Sprintf("%s-%s-ns/op", name, v))
		if flops > 0 {
			b.ReportMetric(flops/med/1e3, fmt.Sprintf("%s-%s-TFLOPS", name, v))
		}
		if i > 0 {
			ratios := make([]float64, len(times[i]))
			for r := range ratios {
				ratios[r] = times[i][r] / times[0][r]
			}
			b.ReportMetric(gputest.Median(ratios), fmt.Sprintf("%s-%s-xC", name, v))
		}
	}
}
