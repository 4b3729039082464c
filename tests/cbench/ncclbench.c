/*
 * ncclbench: the C baseline for package nccl's benchmarks. One process,
 * every GPU (ncclCommInitAll), float32 all-reduce in place, grouped, as
 * BenchmarkAllReduce and BenchmarkAllReduceEnqueue time it in Go, so that
 * the numbers of one run compare. Built on the GPU machine by .gpu/run.sh:
 *   gcc -O2 -I$CUDA/include ncclbench.c -o ncclbench -lcuda -ldl
 * NCCL is opened with dlopen (no nccl.h needed): PURECUDA_LIBNCCL, else
 * libnccl.so.2.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void *ncclComm_t;
static int (*ncclCommInitAll)(ncclComm_t *, int, const int *);
static int (*ncclAllReduce)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
static int (*ncclGroupStart)(void);
static int (*ncclGroupEnd)(void);
static int (*ncclCommDestroy)(ncclComm_t);
static int (*ncclGetVersion)(int *);

#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "%s failed: %d at line %d\n", #x, (int)r_, __LINE__); exit(1); } } while (0)
#define NCHECK(x) do { int r_ = (x); if (r_ != 0) { \
    fprintf(stderr, "%s failed: %d at line %d\n", #x, r_, __LINE__); exit(1); } } while (0)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

#define MAXD 16
static int nd;
static CUcontext ctx[MAXD];
static CUstream st[MAXD];
static ncclComm_t comm[MAXD];

/* one grouped all-reduce of count floats on every device */
static void allreduce(CUdeviceptr *buf, size_t count) {
    NCHECK(ncclGroupStart());
    for (int i = 0; i < nd; i++) {
        CHECK(cuCtxSetCurrent(ctx[i]));
        NCHECK(ncclAllReduce((void *)buf[i], (void *)buf[i], count, 7 /* ncclFloat32 */, 0 /* ncclSum */, comm[i], st[i]));
    }
    NCHECK(ncclGroupEnd());
}

static void sync_all(void) {
    for (int i = 0; i < nd; i++) CHECK(cuStreamSynchronize(st[i]));
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 1;
    const char *path = getenv("PURECUDA_LIBNCCL");
    void *h = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW);
    if (!h) { fprintf(stderr, "ncclbench: %s\n", dlerror()); return 2; }
    ncclCommInitAll = dlsym(h, "ncclCommInitAll");
    ncclAllReduce = dlsym(h, "ncclAllReduce");
    ncclGroupStart = dlsym(h, "ncclGroupStart");
    ncclGroupEnd = dlsym(h, "ncclGroupEnd");
    ncclCommDestroy = dlsym(h, "ncclCommDestroy");
    ncclGetVersion = dlsym(h, "ncclGetVersion");
    int version = 0;
    NCHECK(ncclGetVersion(&version));
    CHECK(cuInit(0));
    CHECK(cuDeviceGetCount(&nd));
    if (nd > MAXD) nd = MAXD;
    int devs[MAXD];
    for (int i = 0; i < nd; i++) {
        CUdevice d;
        CHECK(cuDeviceGet(&d, i));
        CHECK(cuDevicePrimaryCtxRetain(&ctx[i], d));
        CHECK(cuCtxSetCurrent(ctx[i]));
        CHECK(cuStreamCreate(&st[i], CU_STREAM_NON_BLOCKING));
        devs[i] = i;
    }
    NCHECK(ncclCommInitAll(comm, nd, devs));
    printf("C nccl %d on %d GPUs\n", version, nd);
    size_t sizes[] = {8, (size_t)1 << 30};
    for (int si = 0; si < 2; si++) {
        size_t bytes = sizes[si], count = bytes / 4;
        CUdeviceptr buf[MAXD];
        for (int i = 0; i < nd; i++) {
            CHECK(cuCtxSetCurrent(ctx[i]));
            CHECK(cuMemAlloc(&buf[i], bytes));
            CHECK(cuMemsetD32(buf[i], 0, count));
        }
        int iters = bytes > 1 << 20 ? 20 : 5000;
        for (int w = 0; w < 5; w++) allreduce(buf, count);
        sync_all();
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            for (int it = 0; it < iters; it++) allreduce(buf, count);
            sync_all();
            double per = (now() - t0) / iters;
            double bus = 2.0 * (nd - 1) / nd * bytes / per;
            printf("C AllReduce/bytes=%-10zu %10.2f us/op %8.2f busGB/s\n", bytes, per / 1e3, bus);
        }
        if (bytes == 8) {
            /* the host's cost of queuing: the calls alone, GPU work not waited for inside the loop */
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                for (int it = 0; it < 1000; it++) allreduce(buf, count);
                double per = (now() - t0) / 1000;
                sync_all();
                printf("C AllReduceEnqueue/gpus=%d %10.1f ns/op\n", nd, per);
            }
        }
        for (int i = 0; i < nd; i++) {
            CHECK(cuCtxSetCurrent(ctx[i]));
            CHECK(cuMemFree(buf[i]));
        }
    }
    for (int i = 0; i < nd; i++) NCHECK(ncclCommDestroy(comm[i]));
    return 0;
}
