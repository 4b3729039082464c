// multi_ctx_launch.c: does cuGraphLaunch of an executable whose nodes run in
// two contexts need a current context, and does destroying such an
// executable while its launch is in flight, then the second context once
// the work is done, leave libcuda in a state a later launch crashes on?
// The graph stress crashed once inside cuGraphLaunch of such an executable
// (SIGSEGV at address 0x68, H200, driver 580) on a thread with no current
// context, right after other rounds had destroyed executables in flight
// and then their second contexts.
//
// Part 1 (probe, MODE -1): graph of context A with a memset node in context B; with
// a context current on the thread that another thread destroyed, it prints
// what cuGraphLaunch returns for that executable and for a single-context
// one: 709 for the first and 0 for the second means the multi-context
// launch reads the current context (so with none it reads NULL).
//
// Part 2 (churn, MODE 0, 1 or 2): THREADS threads, each for SECONDS: a new context B (on
// device DEV_B), a buffer in B and one in A, a graph of A with a memset in
// B, a copy B→A run in B and a copy A→B run in A, instantiated, launched on
// a stream of A, the executable destroyed (in flight unless mode 2), the
// graph destroyed, A's stream synchronized, B's buffer freed, B destroyed.
// mode 0: launches with no current context (purecuda before the fix);
// mode 1: with A current (the fix); mode 2: like 0, but the stream is
// synchronized before the executable is destroyed.
//
// Part 3 (MODE 3): the graph suite crashed here only after
// TestGPUManyGraphsLeaveNothing (tens of thousands of graphs with a kernel
// and a host node, instantiated, launched and destroyed): first CHURN (env,
// 20000) such graphs on THREADS threads (all kept until the end unless
// HOLD=0), then for SECONDS, THREADS threads
// share one growing graph of A: each round adds a memset node in B, or a
// copy B→A, or instantiates it and launches it with A current, then
// destroys the executable (as the stress's Graph.On operation does).
//
// Part 4 (MODE 4): the crash's dump showed another thread in cuGraphLaunch
// of a single-context executable on the same stream at the same time.
// For SECONDS, THREADS threads share one stream of A: odd threads
// instantiate a fixed graph of A with a memset node in B (as above),
// launch it with A current and destroy it; even threads launch, over and
// over, an executable of A alone (KIND=graph), or queue a memset
// (KIND=memset), or use a stream of their own (KIND=own, the control),
// or capture a memset on a stream of their own (KIND=capture; CAPMODE the
// CUstreamCaptureMode, relaxed by default; TOGRAPH set: into a graph of
// their own, cuStreamBeginCaptureToGraph), or (KIND=captured, mode 5
// only) capture a kernel, a copy to pinned host memory and a host
// function on a stream of their own and launch the graph once on the
// shared stream, as the stress's Capture operation does (SEPARATE set:
// on the capture's stream instead; NOHOST set: without the host
// function; SHAPE=hostonly: only the host function captured;
// SHAPE=explicit: a graph of a kernel node and a host node, added;
// SHAPE=stream: the kernel, copy and host function queued on the shared
// stream, no graph). KEEPMULTI set: the multi-context executable is made
// once per thread and launched over and over.
// CHURN (env, 0) graphs are churned first, as in mode 3.
//
// Part 5 (MODE 5): the Go suite crashes after graphs with a *kernel* node
// (and a host node) were kept alive 10000 at a time and then destroyed
// (only the C loops of TestGPUManyGraphsLeaveNothing, or only its Go loop
// that drops everything, suffice; the Go loop that closes each graph at
// once does not). So: THREADS threads keep CHURN/THREADS such graphs each
// (a fill kernel from PTX, then a host node), destroy them, and then run
// mode 4's race (KIND as there) for SECONDS, plus threads launching an
// executable of A with a kernel node of the same function (CHURNNOHOST
// set: the kept graphs have no host node).
//
// Found (H200, driver 580.159.04, 2026-11-28, each run 2 or 3 times, all
// alike): `KIND=captured ./mcl 5 20 16` crashes (SIGSEGV) every time, in
// C alone, with no purecuda involved; so do SHAPE=hostonly, explicit and
// stream (a cuLaunchHostFunc queued on the shared stream, no graph at
// all), and CHURNNOHOST (the kept graphs need only a kernel). It does not
// crash with CHURN=2000, with NOHOST, with SEPARATE, or with KEEPMULTI
// (one multi-context executable per thread, launched over and over). So:
// after ~10,000 executables were alive at once, launching newly made
// multi-context executables on a stream that also runs host functions
// crashes libcuda. The Go suite met it as TestGPUGraphStressCloseRaces
// after TestGPUManyGraphsLeaveNothing; KIND=capture (captures only, no
// launches of them on the shared stream) does not crash.
//
//   gcc -O1 -I/usr/local/cuda/include multi_ctx_launch.c -o mcl -L/usr/local/nvidia/lib64 -lcuda -lpthread
//   ./mcl MODE [SECONDS=20] [THREADS=16] [DEV_B=0]
// Run each mode several times; a crash is a SIGSEGV. The probe may itself
// crash where libcuda does not check the current context.
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x) do { CUresult r_ = (x); if (r_) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, r_); exit(1); } } while (0)

static CUdevice devA, devB;
static CUcontext A;
static int mode, seconds = 20, threads = 16;
static long rounds;

static CUgraphExec multiExec(CUcontext b, CUdeviceptr pb, CUdeviceptr pa, CUgraph *out) {
  CUgraph g;
  CUgraphNode ms, c1, c2;
  CK(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS m = {0};
  m.dst = pb; m.elementSize = 4; m.width = 64; m.height = 1; m.value = 7;
  CK(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, b));
  CUDA_MEMCPY3D c = {0};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE; c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.WidthInBytes = 256; c.Height = 1; c.Depth = 1;
  c.srcDevice = pb; c.dstDevice = pa;
  CK(cuGraphAddMemcpyNode(&c1, g, &ms, 1, &c, b)); // B → A, run in B
  c.srcDevice = pa; c.dstDevice = pb;
  CK(cuGraphAddMemcpyNode(&c2, g, &c1, 1, &c, A)); // A → B, run in A
  CUgraphExec x;
  CK(cuGraphInstantiateWithFlags(&x, g, 0));
  *out = g;
  return x;
}

static CUcontext doomed;
static void *destroyDoomed(void *p) { (void)p; CK(cuCtxDestroy(doomed)); return NULL; }

static void probe(void) {
  CUcontext b, top;
  CK(cuCtxCreate(&b, NULL, 0, devB)); // pushed: [b]
  CUdeviceptr pb, pa;
  CK(cuMemAlloc(&pb, 256));
  CK(cuCtxPopCurrent(&top));
  CK(cuCtxPushCurrent(A)); // [A]
  CK(cuMemAlloc(&pa, 256));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUgraph g, g1;
  CUgraphExec x = multiExec(b, pb, pa, &g), x1;
  CUgraphNode n;
  CUDA_MEMSET_NODE_PARAMS m = {0};
  m.dst = pa; m.elementSize = 4; m.width = 64; m.height = 1;
  CK(cuGraphCreate(&g1, 0));
  CK(cuGraphAddMemsetNode(&n, g1, NULL, 0, &m, A));
  CK(cuGraphInstantiateWithFlags(&x1, g1, 0));
  CK(cuCtxPopCurrent(&top)); // []
  CK(cuCtxCreate(&doomed, NULL, 0, devA)); // [doomed], destroyed by another thread
  pthread_t t;
  pthread_create(&t, NULL, destroyDoomed, NULL);
  pthread_join(t, NULL);
  CUresult rm = cuGraphLaunch(x, s), rs = cuGraphLaunch(x1, s);
  printf("destroyed context current: multi-context launch %d, single-context launch %d\n", rm, rs);
  cuCtxPopCurrent(&top); // []
  CUcontext cur = (CUcontext)1;
  CK(cuCtxGetCurrent(&cur));
  CUresult nm = cuGraphLaunch(x, s), ns = cuGraphLaunch(x1, s);
  printf("no current context (%p):  multi-context launch %d, single-context launch %d\n", (void *)cur, nm, ns);
  CK(cuCtxPushCurrent(A));
  CK(cuStreamSynchronize(s));
  CK(cuGraphExecDestroy(x)); CK(cuGraphExecDestroy(x1));
  CK(cuGraphDestroy(g)); CK(cuGraphDestroy(g1));
  CK(cuMemFree(pa)); CK(cuStreamDestroy(s));
  CK(cuCtxPopCurrent(&top));
  CK(cuCtxPushCurrent(b)); CK(cuMemFree(pb)); CK(cuCtxPopCurrent(&top));
  CK(cuCtxDestroy(b));
}

// churn keeps the thread's context stack explicit: [] between steps.
static void *churn(void *p) {
  (void)p;
  time_t end = time(NULL) + seconds;
  CUcontext top;
  CK(cuCtxPushCurrent(A));
  CUstream s;
  CUdeviceptr pa;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&pa, 256));
  CK(cuCtxPopCurrent(&top));
  while (time(NULL) < end) {
    CUcontext b;
    CK(cuCtxCreate(&b, NULL, 0, devB)); // [b]
    CUdeviceptr pb;
    CK(cuMemAlloc(&pb, 256));
    CK(cuCtxPopCurrent(&top));
    CK(cuCtxPushCurrent(A)); // [A]
    CUgraph g;
    CUgraphExec x = multiExec(b, pb, pa, &g);
    if (mode != 1) CK(cuCtxPopCurrent(&top)); // []
    CK(cuGraphLaunch(x, s));
    if (mode != 1) CK(cuCtxPushCurrent(A));
    if (mode == 2) CK(cuStreamSynchronize(s));
    CK(cuGraphExecDestroy(x)); // in flight, in modes 0 and 1
    CK(cuGraphDestroy(g));
    CK(cuStreamSynchronize(s));
    CK(cuCtxPopCurrent(&top));
    CK(cuCtxPushCurrent(b));
    CK(cuMemFree(pb));
    CK(cuCtxPopCurrent(&top)); // []
    CK(cuCtxDestroy(b));
    __atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
  }
  CK(cuCtxPushCurrent(A));
  CK(cuMemFree(pa));
  CK(cuStreamDestroy(s));
  CK(cuCtxPopCurrent(&top));
  return NULL;
}

static void CUDA_CB hostNop(void *p) { (void)p; }

static void *many(void *p) {
  long n = (long)p;
  CUcontext top;
  CK(cuCtxPushCurrent(A));
  CUstream s;
  CUdeviceptr pa;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&pa, 1024));
  int hold = !getenv("HOLD") || atoi(getenv("HOLD"));
  CUgraphExec *xs = calloc(n, sizeof *xs);
  CUgraph *gs = calloc(n, sizeof *gs);
  for (long i = 0; i < n; i++) {
    CUgraph g;
    CUgraphNode ms, hn;
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = {0};
    m.dst = pa; m.elementSize = 4; m.width = 256; m.height = 1; m.value = (unsigned)i;
    CK(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, A));
    CUDA_HOST_NODE_PARAMS h = {hostNop, NULL};
    CK(cuGraphAddHostNode(&hn, g, &ms, 1, &h));
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    if (hold) { xs[i] = x; gs[i] = g; continue; }
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
  }
  for (long i = 0; hold && i < n; i++) { CK(cuGraphExecDestroy(xs[i])); CK(cuGraphDestroy(gs[i])); }
  free(xs); free(gs);
  CK(cuMemFree(pa));
  CK(cuStreamDestroy(s));
  CK(cuCtxPopCurrent(&top));
  return NULL;
}

static pthread_mutex_t gmu = PTHREAD_MUTEX_INITIALIZER;
static CUgraph shared;
static CUcontext B;
static CUdeviceptr sharedA, sharedB;

static void *grow(void *p) {
  unsigned seed = (unsigned)(long)p;
  time_t end = time(NULL) + seconds;
  CUcontext top;
  CK(cuCtxPushCurrent(A));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuCtxPopCurrent(&top));
  while (time(NULL) < end) {
    int r = rand_r(&seed) % 4;
    CK(cuCtxPushCurrent(A));
    pthread_mutex_lock(&gmu);
    if (r == 0) {
      CUgraphNode n;
      CUDA_MEMSET_NODE_PARAMS m = {0};
      m.dst = sharedB; m.elementSize = 4; m.width = 1; m.height = 1; m.value = 7;
      CK(cuGraphAddMemsetNode(&n, shared, NULL, 0, &m, B));
      pthread_mutex_unlock(&gmu);
    } else if (r == 1) {
      CUgraphNode n;
      CUDA_MEMCPY3D c = {0};
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE; c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      c.WidthInBytes = 4; c.Height = 1; c.Depth = 1; c.srcDevice = sharedB; c.dstDevice = sharedA;
      CK(cuGraphAddMemcpyNode(&n, shared, NULL, 0, &c, B));
      pthread_mutex_unlock(&gmu);
    } else {
      CUgraphExec x;
      CK(cuGraphInstantiateWithFlags(&x, shared, 0));
      pthread_mutex_unlock(&gmu);
      CK(cuGraphLaunch(x, s));
      CK(cuGraphExecDestroy(x));
    }
    CK(cuCtxPopCurrent(&top));
    __atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
  }
  CK(cuCtxPushCurrent(A));
  CK(cuStreamSynchronize(s));
  CK(cuStreamDestroy(s));
  CK(cuCtxPopCurrent(&top));
  return NULL;
}

static CUstream sharedS;
static CUgraphExec single;
static CUfunction fillFn; /* mode 5's fill kernel */

static CUgraph kernelGraph(CUdeviceptr buf, int v, int host);

static void *race(void *p) {
  long id = (long)p;
  const char *kindEnv = getenv("KIND");
  int kind = !kindEnv || !strcmp(kindEnv, "graph") ? 0 : !strcmp(kindEnv, "memset") ? 1
    : !strcmp(kindEnv, "capture") ? 3 : !strcmp(kindEnv, "captured") ? 4 : 2;
  int capmode = getenv("CAPMODE") ? atoi(getenv("CAPMODE")) : CU_STREAM_CAPTURE_MODE_RELAXED;
  int tograph = getenv("TOGRAPH") != NULL;
  time_t end = time(NULL) + seconds;
  CUcontext top;
  CK(cuCtxPushCurrent(A));
  CUstream s = sharedS;
  if (kind == 2 || (kind == 3 && id % 2 == 0)) CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUstream cs = NULL;
  void *host = NULL;
  const char *shape = getenv("SHAPE") ? getenv("SHAPE") : "full";
  int keepMulti = getenv("KEEPMULTI") != NULL;
  CUgraph keptG = NULL;
  CUgraphExec kept = NULL;
  if (keepMulti && id % 2) kept = multiExec(B, sharedB, sharedA, &keptG);
  if (kind == 4 && id % 2 == 0) {
    CK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    CK(cuMemHostAlloc(&host, 1024, 0));
  }
  while (time(NULL) < end) {
    if (id % 2 && keepMulti) {
      CK(cuGraphLaunch(kept, s));
    } else if (id % 2) {
      CUgraph g;
      CUgraphExec x = multiExec(B, sharedB, sharedA, &g);
      CK(cuGraphLaunch(x, s));
      CK(cuGraphExecDestroy(x));
      CK(cuGraphDestroy(g));
    } else if (kind == 1) {
      CK(cuMemsetD32Async(sharedA, 1, 64, s));
    } else if (kind == 4) {
      /* the stress's Capture operation: a kernel, a copy to pinned host
         memory and a host function captured on a stream of its own, the
         graph instantiated, launched once on the shared stream and
         destroyed */
      CUgraph g = NULL;
      CUgraphExec x;
      int v = 5, n = 256;
      void *params[3] = {&sharedA, &v, &n};
      if (!strcmp(shape, "stream")) { /* no graph: the same work queued on the shared stream */
        CK(cuLaunchKernel(fillFn, 1, 1, 1, 256, 1, 1, 0, s, params, NULL));
        CK(cuMemcpyDtoHAsync(host, sharedA, 1024, s));
        CK(cuLaunchHostFunc(s, hostNop, NULL));
        __atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
        continue;
      }
      if (!strcmp(shape, "explicit")) { /* a kernel node and a host node, added */
        g = kernelGraph(sharedA, 5, 1);
      } else {
        CK(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_RELAXED));
        if (strcmp(shape, "hostonly")) {
          CK(cuLaunchKernel(fillFn, 1, 1, 1, 256, 1, 1, 0, cs, params, NULL));
          CK(cuMemcpyDtoHAsync(host, sharedA, 1024, cs));
        }
        if (!getenv("NOHOST")) CK(cuLaunchHostFunc(cs, hostNop, NULL));
        CK(cuStreamEndCapture(cs, &g));
      }
      CK(cuGraphInstantiateWithFlags(&x, g, 0));
      CK(cuGraphLaunch(x, getenv("SEPARATE") ? cs : s));
      CK(cuGraphExecDestroy(x));
      CK(cuGraphDestroy(g));
    } else if (kind == 3) {
      CUgraph g = NULL;
      if (tograph) {
        CK(cuGraphCreate(&g, 0));
        CK(cuStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, capmode));
      } else {
        CK(cuStreamBeginCapture(s, capmode));
      }
      CK(cuMemsetD32Async(sharedA, 1, 64, s));
      CUgraph out = NULL;
      CK(cuStreamEndCapture(s, &out));
      if (g) CK(cuGraphDestroy(g));
      else CK(cuGraphDestroy(out));
    } else {
      CK(cuGraphLaunch(single, s));
    }
    __atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
  }
  CK(cuStreamSynchronize(s));
  if (kind == 2 || (kind == 3 && id % 2 == 0)) CK(cuStreamDestroy(s));
  if (cs) { CK(cuStreamSynchronize(cs)); CK(cuStreamDestroy(cs)); CK(cuMemFreeHost(host)); }
  if (kept) { CK(cuStreamSynchronize(s)); CK(cuGraphExecDestroy(kept)); CK(cuGraphDestroy(keptG)); }
  CK(cuCtxPopCurrent(&top));
  return NULL;
}

static int raceMain(void) {
  long churn = getenv("CHURN") ? atol(getenv("CHURN")) : 0;
  pthread_t t[256];
  for (int i = 0; churn && i < threads; i++) pthread_create(&t[i], NULL, many, (void *)(churn / threads));
  for (int i = 0; churn && i < threads; i++) pthread_join(t[i], NULL);
  CUcontext top;
  CK(cuCtxCreate(&B, NULL, 0, devB));
  CK(cuMemAlloc(&sharedB, 256));
  CK(cuCtxPopCurrent(&top));
  CK(cuCtxPushCurrent(A));
  CK(cuMemAlloc(&sharedA, 256));
  CK(cuStreamCreate(&sharedS, CU_STREAM_NON_BLOCKING));
  CUgraph g;
  CUgraphNode n;
  CUDA_MEMSET_NODE_PARAMS m = {0};
  m.dst = sharedA; m.elementSize = 4; m.width = 64; m.height = 1; m.value = 3;
  CK(cuGraphCreate(&g, 0));
  CK(cuGraphAddMemsetNode(&n, g, NULL, 0, &m, A));
  CK(cuGraphInstantiateWithFlags(&single, g, 0));
  CK(cuCtxPopCurrent(&top));
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, race, (void *)(long)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  printf("mode 4 (%s): %ld rounds, no crash\n", getenv("KIND") ? getenv("KIND") : "graph", rounds);
  return 0;
}

static const char fillPTX[] =
  ".version 7.0\n.target sm_52\n.address_size 64\n"
  ".visible .entry fill(.param .u64 p, .param .u32 v, .param .u32 n) {\n"
  "  .reg .b32 %r<4>;\n  .reg .b64 %rd<4>;\n  .reg .pred %p1;\n"
  "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [v];\n  ld.param.u32 %r2, [n];\n"
  "  mov.u32 %r3, %tid.x;\n  setp.ge.s32 %p1, %r3, %r2;\n  @%p1 bra DONE;\n"
  "  cvta.to.global.u64 %rd2, %rd1;\n  mul.wide.s32 %rd3, %r3, 4;\n  add.s64 %rd2, %rd2, %rd3;\n"
  "  st.global.u32 [%rd2], %r1;\nDONE:\n  ret;\n}\n";

static CUgraph kernelGraph(CUdeviceptr buf, int v, int host) {
  CUgraph g;
  CUgraphNode k, h;
  int n = 256;
  void *params[3] = {&buf, &v, &n};
  CUDA_KERNEL_NODE_PARAMS p = {0};
  p.func = fillFn; p.gridDimX = p.gridDimY = p.gridDimZ = 1; p.blockDimX = 256; p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = params;
  CK(cuGraphCreate(&g, 0));
  CK(cuGraphAddKernelNode(&k, g, NULL, 0, &p));
  if (host) {
    CUDA_HOST_NODE_PARAMS hp = {hostNop, NULL};
    CK(cuGraphAddHostNode(&h, g, &k, 1, &hp));
  }
  return g;
}

static void *keepMany(void *p) {
  long n = (long)p;
  CUcontext top;
  CK(cuCtxPushCurrent(A));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUgraphExec *xs = calloc(n, sizeof *xs);
  CUgraph *gs = calloc(n, sizeof *gs);
  CUdeviceptr *bs = calloc(n, sizeof *bs);
  for (long i = 0; i < n; i++) {
    CK(cuMemAlloc(&bs[i], 1024));
    gs[i] = kernelGraph(bs[i], 1, !getenv("CHURNNOHOST"));
    CK(cuGraphInstantiateWithFlags(&xs[i], gs[i], 0));
    CK(cuGraphLaunch(xs[i], s));
    CK(cuStreamSynchronize(s));
  }
  for (long i = 0; i < n; i++) { CK(cuGraphExecDestroy(xs[i])); CK(cuGraphDestroy(gs[i])); CK(cuMemFree(bs[i])); }
  free(xs); free(gs); free(bs);
  CK(cuStreamDestroy(s));
  CK(cuCtxPopCurrent(&top));
  return NULL;
}

static CUgraphExec kernelExec;

static void *kernelLaunches(void *p) {
  (void)p;
  time_t end = time(NULL) + seconds;
  CUcontext top;
  CK(cuCtxPushCurrent(A));
  while (time(NULL) < end) {
    CK(cuGraphLaunch(kernelExec, sharedS));
    __atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
  }
  CK(cuCtxPopCurrent(&top));
  return NULL;
}

static int keptMain(void) {
  long churn = getenv("CHURN") ? atol(getenv("CHURN")) : 10000;
  CUcontext top;
  CK(cuCtxPushCurrent(A));
  CUmodule mod;
  CK(cuModuleLoadData(&mod, fillPTX));
  CK(cuModuleGetFunction(&fillFn, mod, "fill"));
  CK(cuCtxPopCurrent(&top));
  pthread_t t[256], k[4];
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, keepMany, (void *)(churn / threads));
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  printf("mode 5: %ld kernel graphs kept, then destroyed\n", churn);
  fflush(stdout);
  CK(cuCtxCreate(&B, NULL, 0, devB));
  CK(cuMemAlloc(&sharedB, 256));
  CK(cuCtxPopCurrent(&top));
  CK(cuCtxPushCurrent(A));
  CK(cuMemAlloc(&sharedA, 1024));
  CK(cuStreamCreate(&sharedS, CU_STREAM_NON_BLOCKING));
  CUgraph kg = kernelGraph(sharedA, 2, 0);
  CK(cuGraphInstantiateWithFlags(&kernelExec, kg, 0));
  CUgraph g;
  CUgraphNode n;
  CUDA_MEMSET_NODE_PARAMS m = {0};
  m.dst = sharedA; m.elementSize = 4; m.width = 64; m.height = 1; m.value = 3;
  CK(cuGraphCreate(&g, 0));
  CK(cuGraphAddMemsetNode(&n, g, NULL, 0, &m, A));
  CK(cuGraphInstantiateWithFlags(&single, g, 0));
  CK(cuCtxPopCurrent(&top));
  for (int i = 0; i < 4; i++) pthread_create(&k[i], NULL, kernelLaunches, NULL);
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, race, (void *)(long)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 4; i++) pthread_join(k[i], NULL);
  printf("mode 5: %ld rounds, no crash\n", rounds);
  return 0;
}

static int growMain(void) {
  long churn = getenv("CHURN") ? atol(getenv("CHURN")) : 20000;
  pthread_t t[256];
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, many, (void *)(churn / threads));
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  printf("mode 3: %ld graphs churned\n", churn);
  fflush(stdout);
  CUcontext top;
  CK(cuCtxCreate(&B, NULL, 0, devB));
  CK(cuMemAlloc(&sharedB, 256));
  CK(cuCtxPopCurrent(&top));
  CK(cuCtxPushCurrent(A));
  CK(cuMemAlloc(&sharedA, 256));
  CK(cuGraphCreate(&shared, 0));
  CK(cuCtxPopCurrent(&top));
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, grow, (void *)(long)(i + 1));
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  printf("mode 3: %ld rounds, no crash\n", rounds);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s MODE [SECONDS] [THREADS] [DEV_B]\n", argv[0]); return 2; }
  mode = atoi(argv[1]);
  if (argc > 2) seconds = atoi(argv[2]);
  if (argc > 3) threads = atoi(argv[3]);
  CK(cuInit(0));
  CK(cuDeviceGet(&devA, 0));
  CK(cuDeviceGet(&devB, argc > 4 ? atoi(argv[4]) : 0));
  CK(cuDevicePrimaryCtxRetain(&A, devA));
  if (threads > 256) threads = 256;
  if (mode < 0) { probe(); return 0; }
  if (mode == 3) return growMain();
  if (mode == 4) return raceMain();
  if (mode == 5) return keptMain();
  pthread_t t[256];
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, churn, NULL);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  printf("mode %d: %ld rounds, no crash\n", mode, rounds);
  return 0;
}
