/*
 * cbench: the C baseline for purecuda's benchmarks. It times the same driver
 * calls the Go benchmarks time, on the same machine in the same run, so the
 * Go numbers can be compared with C's. Built on the GPU machine by .gpu/run.sh:
 *   gcc -O2 -I$CUDA/include cbench.c -o cbench -L$LIBCUDA_DIR -lcuda
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *ptx =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry empty()\n{\n\tret;\n}\n"
    ".visible .entry add4(.param .u64 out, .param .u32 a, .param .u32 b, .param .u32 c)\n{\n"
    "\t.reg .u64 %rd<3>;\n\t.reg .u32 %r<6>;\n"
    "\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
    "\tld.param.u32 %r1, [a];\n\tld.param.u32 %r2, [b];\n\tld.param.u32 %r3, [c];\n"
    "\tadd.u32 %r4, %r1, %r2;\n\tadd.u32 %r5, %r4, %r3;\n\tst.global.u32 [%rd2], %r5;\n\tret;\n}\n";

#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "%s failed: %d at line %d\n", #x, (int)r_, __LINE__); exit(1); } } while (0)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void hostfn(void *p) { (*(int *)p)++; }

#define REPORT(name, n, t0) printf("C %-28s %10.1f ns/op\n", name, (now() - (t0)) / (n))

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 1;
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction empty, add4; CUstream s;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));
    CHECK(cuModuleGetFunction(&add4, mod, "add4"));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d; CHECK(cuMemAlloc(&d, 4));
    unsigned a = 1, b = 2, c = 3; void *args[] = {&d, &a, &b, &c};
    CUevent ev; CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    int n, counter = 0; double t0;
    void *pinned; CHECK(cuMemHostAlloc(&pinned, 4, 0));
    CUcontext cur;

    for (int rep = 0; rep <= reps; rep++) { /* pass 0 warms up; the others report */ /* first pass warms up */
        n = 2000000; t0 = now();
        for (int i = 0; i < n; i++) CHECK(cuCtxGetCurrent(&cur));
        if (rep) REPORT("cuCtxGetCurrent", n, t0);

        n = 200000; t0 = now();
        for (int i = 0; i < n; i++) CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
        CHECK(cuStreamSynchronize(s));
        if (rep) REPORT("launch empty", n, t0);

        t0 = now();
        for (int i = 0; i < n; i++) CHECK(cuLaunchKernel(add4, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        CHECK(cuStreamSynchronize(s));
        if (rep) REPORT("launch 4 args", n, t0);

        n = 50000; t0 = now();
        for (int i = 0; i < n; i++) {
            CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
            CHECK(cuStreamSynchronize(s));
        }
        if (rep) REPORT("launch+sync", n, t0);

        t0 = now();
        for (int i = 0; i < n; i++) CHECK(cuStreamSynchronize(s));
        if (rep) REPORT("stream sync (idle)", n, t0);

        unsigned host = 7;
        t0 = now();
        for (int i = 0; i < n; i++) CHECK(cuMemcpyHtoD(d, &host, 4));
        if (rep) REPORT("4-byte H2D (sync)", n, t0);

        t0 = now();
        for (int i = 0; i < n; i++) CHECK(cuMemcpyHtoDAsync(d, pinned, 4, s));
        CHECK(cuStreamSynchronize(s));
        if (rep) REPORT("4-byte H2D async pinned", n, t0);

        /* Batches of 256 with a sync after each: the queue never fills, so
           this times the calls rather than waiting for queue slots. */
        n = 200000; t0 = now();
        for (int i = 0; i < n; i++) {
            CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
            if (i % 256 == 255) CHECK(cuStreamSynchronize(s));
        }
        CHECK(cuStreamSynchronize(s));
        if (rep) REPORT("launch empty (sync/256)", n, t0);

        t0 = now();
        for (int i = 0; i < n; i++) {
            CHECK(cuLaunchKernel(add4, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
            if (i % 256 == 255) CHECK(cuStreamSynchronize(s));
        }
        CHECK(cuStreamSynchronize(s));
        if (rep) REPORT("launch 4 args (sync/256)", n, t0);

        n = 200000; t0 = now();
        for (int i = 0; i < n; i++) CHECK(cuEventRecord(ev, s));
        CHECK(cuStreamSynchronize(s));
        if (rep) REPORT("event record", n, t0);

        n = 20000; t0 = now();
        for (int i = 0; i < n; i++) {
            CHECK(cuLaunchHostFunc(s, hostfn, &counter));
            CHECK(cuStreamSynchronize(s));
        }
        if (rep) REPORT("host func + sync", n, t0);
    }
    return 0;
}
