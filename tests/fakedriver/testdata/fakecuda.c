/*
 * fakecuda: a stand-in for libcuda, for testing purecuda's driver layer on
 * machines without a GPU (CI). It is compiled by the tests with gcc.
 *
 * What it models, because the tests depend on it:
 *  - the current context is per OS thread, and every function that needs
 *    one fails with CUDA_ERROR_INVALID_CONTEXT (201) when the calling thread
 *    has none (the real driver's behaviour that goroutine migration exposes);
 *  - each thread has a context stack (push, pop, set replaces the top, set
 *    to NULL pops);
 *  - a context destroyed while current on another thread stays current
 *    there, and every call on that thread, even one that names its stream,
 *    fails with CUDA_ERROR_CONTEXT_IS_DESTROYED (709), as the real driver's
 *    do;
 *  - "device" memory is host memory, so copies and kernels can be checked;
 *  - three kernels: empty(), add4(unsigned*, unsigned, unsigned, unsigned) and
 *    fill(int*, int, int), with parameter sizes for cuFuncGetParamInfo;
 *  - host functions run on a thread of the library's own, as CUDA's do;
 *    cuStreamSynchronize waits for them.
 * It counts live allocations and contexts so tests can check frees.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
enum { OK = 0, INVALID_VALUE = 1, NOT_READY = 600, INVALID_CONTEXT = 201, INVALID_HANDLE = 400, NOT_FOUND = 500,
       CONTEXT_IS_DESTROYED = 709 };

struct ctx { int magic; int alive; int primary; };
struct stream { int magic; struct ctx *ctx; pthread_t pending[4096]; int npending; pthread_mutex_t mu; };
struct kernel { const char *name; int nparams; size_t sizes[4]; };

static __thread struct ctx *current;  /* top of this thread's stack */
static __thread struct ctx *below[16]; /* the rest of it */
static __thread int depth;
static struct ctx primary = {0x600d, 0, 1};
static int primary_refs;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long live_allocs, live_contexts, live_modules, host_calls;
static struct kernel kernels[] = {
    {"empty", 0, {0}}, {"add4", 4, {8, 4, 4, 4}}, {"fill", 3, {8, 4, 4}},
};

long fake_live_allocations(void) { return __atomic_load_n(&live_allocs, __ATOMIC_SEQ_CST); }
long fake_live_contexts(void) { return __atomic_load_n(&live_contexts, __ATOMIC_SEQ_CST); }
long fake_live_modules(void) { return __atomic_load_n(&live_modules, __ATOMIC_SEQ_CST); }
long fake_host_calls(void) { return __atomic_load_n(&host_calls, __ATOMIC_SEQ_CST); }

static int have_ctx(void) { return current && current->magic == 0x600d && current->alive; }
static int stale_ctx(void) { return current && !current->alive; }
#define NEED_CTX() do { if (stale_ctx()) return CONTEXT_IS_DESTROYED; if (!have_ctx()) return INVALID_CONTEXT; } while (0)
#define NOT_STALE() do { if (stale_ctx()) return CONTEXT_IS_DESTROYED; } while (0)

CUresult cuInit(unsigned flags) { return flags ? INVALID_VALUE : OK; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int ordinal) { if (ordinal != 0) return 101; *d = 0; return OK; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    switch (attr) {
    case 1: *v = 1024; break;                 /* max threads per block */
    case 2: case 3: *v = 1024; break;         /* max block x, y */
    case 4: *v = 64; break;                   /* max block z */
    case 5: *v = 2147483647; break;           /* max grid x */
    case 6: case 7: *v = 65535; break;        /* max grid y, z */
    case 75: *v = 9; break;                   /* compute capability major */
    case 76: *v = 0; break;                   /* minor */
    default: *v = 1;
    }
    return OK;
}
CUresult cuDeviceGetName(char *name, int len, int dev) { strncpy(name, "Fake GPU", len); return OK; }
CUresult cuDevicePrimaryCtxRetain(struct ctx **c, int dev) {
    pthread_mutex_lock(&mu);
    if (primary_refs++ == 0) { primary.alive = 1; live_contexts++; }
    pthread_mutex_unlock(&mu);
    *c = &primary;
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
    pthread_mutex_lock(&mu);
    if (primary_refs > 0 && --primary_refs == 0) { primary.alive = 0; live_contexts--; }
    pthread_mutex_unlock(&mu);
    return OK;
}
CUresult cuCtxCreate_v4(struct ctx **c, void *params, unsigned flags, int dev) {
    struct ctx *n = calloc(1, sizeof *n);
    n->magic = 0x600d; n->alive = 1;
    __atomic_add_fetch(&live_contexts, 1, __ATOMIC_SEQ_CST);
    if (depth == 16) abort();
    below[depth++] = current; /* cuCtxCreate pushes the new context */
    current = n;
    *c = n;
    return OK;
}
CUresult cuCtxDestroy_v2(struct ctx *c) {
    if (!c || c->magic != 0x600d || !c->alive) return INVALID_CONTEXT;
    c->alive = 0; /* kept allocated: a stale handle must stay detectable */
    __atomic_sub_fetch(&live_contexts, 1, __ATOMIC_SEQ_CST);
    if (current == c) current = depth ? below[--depth] : NULL;
    return OK;
}
CUresult cuCtxPushCurrent_v2(struct ctx *c) {
    if (!c || c->magic != 0x600d || !c->alive) return INVALID_CONTEXT;
    if (depth == 16) return 2;
    below[depth++] = current;
    current = c;
    return OK;
}
CUresult cuCtxPopCurrent_v2(struct ctx **c) {
    if (!current) return INVALID_CONTEXT;
    if (c) *c = current;
    current = depth ? below[--depth] : NULL;
    return OK;
}
CUresult cuCtxSetCurrent(struct ctx *c) {
    if (c && (c->magic != 0x600d || !c->alive)) return INVALID_CONTEXT;
    if (!c) { /* NULL pops the top of the stack */
        current = depth ? below[--depth] : NULL;
        return OK;
    }
    current = c;
    return OK;
}
CUresult cuCtxGetCurrent(struct ctx **c) { *c = current; return OK; }
CUresult cuCtxSynchronize(void) { NEED_CTX(); return OK; }
CUresult cuCtxSynchronize_v2(struct ctx *c) { return c && c->alive ? OK : INVALID_CONTEXT; }
CUresult cuCtxGetLimit(size_t *v, int limit) { NEED_CTX(); *v = 1024; return OK; }
CUresult cuMemGetInfo_v2(size_t *free, size_t *total) { NEED_CTX(); *free = 1 << 30; *total = 2u << 30; return OK; }

/* cuGetProcAddress_v2: only the entry points whose export name purecuda
   cannot guess; the rest it finds with dlsym. */
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, unsigned long long flags, int *status) {
    *pfn = NULL; *status = 1;
    if (strcmp(sym, "cuCtxSynchronize") == 0 && version >= 13000) { *pfn = (void *)cuCtxSynchronize_v2; *status = 0; }
    return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    NEED_CTX();
    if (n == 0) return INVALID_VALUE;
    if (n > ((size_t)1 << 40)) return 2; /* out of memory */
    void *m = calloc(1, n);
    if (!m) return 2;
    __atomic_add_fetch(&live_allocs, 1, __ATOMIC_SEQ_CST);
    *p = (CUdeviceptr)(uintptr_t)m;
    return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    NEED_CTX();
    free((void *)(uintptr_t)p);
    __atomic_sub_fetch(&live_allocs, 1, __ATOMIC_SEQ_CST);
    return OK;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { NEED_CTX(); memcpy((void *)(uintptr_t)d, s, n); return OK; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { NEED_CTX(); memcpy(d, (void *)(uintptr_t)s, n); return OK; }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) {
    NEED_CTX();
    for (size_t i = 0; i < n; i++) ((unsigned *)(uintptr_t)d)[i] = v;
    return OK;
}

static int valid_stream(struct stream *s) { return s && s->magic == 0x5743 && s->ctx->alive; }
CUresult cuStreamCreate(struct stream **s, unsigned flags) {
    NEED_CTX();
    struct stream *n = calloc(1, sizeof *n);
    n->magic = 0x5743; n->ctx = current;
    pthread_mutex_init(&n->mu, NULL);
    *s = n;
    return OK;
}
CUresult cuStreamSynchronize(struct stream *s) {
    NOT_STALE();
    if (!valid_stream(s)) return INVALID_HANDLE;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->npending; i++) pthread_join(s->pending[i], NULL);
    s->npending = 0;
    pthread_mutex_unlock(&s->mu);
    return OK;
}
CUresult cuStreamQuery(struct stream *s) { NOT_STALE(); return valid_stream(s) ? OK : INVALID_HANDLE; }
CUresult cuStreamDestroy_v2(struct stream *s) {
    NEED_CTX();
    if (!valid_stream(s)) return INVALID_HANDLE;
    cuStreamSynchronize(s);
    s->magic = 0;
    return OK;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *src, size_t n, struct stream *s) {
    NOT_STALE();
    if (!valid_stream(s)) return INVALID_HANDLE;
    memcpy((void *)(uintptr_t)d, src, n);
    return OK;
}
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr src, size_t n, struct stream *s) {
    NOT_STALE();
    if (!valid_stream(s)) return INVALID_HANDLE;
    memcpy(d, (void *)(uintptr_t)src, n);
    return OK;
}

struct hostcall { void (*fn)(void *); void *data; };
static void *run_host(void *p) {
    struct hostcall h = *(struct hostcall *)p;
    free(p);
    h.fn(h.data);
    __atomic_add_fetch(&host_calls, 1, __ATOMIC_SEQ_CST);
    return NULL;
}
CUresult cuLaunchHostFunc(struct stream *s, void (*fn)(void *), void *data) {
    NEED_CTX();
    if (!valid_stream(s) || !fn) return INVALID_VALUE;
    struct hostcall *h = malloc(sizeof *h);
    h->fn = fn; h->data = data;
    pthread_mutex_lock(&s->mu);
    if (s->npending == 4096) { pthread_mutex_unlock(&s->mu); free(h); return 2; }
    pthread_create(&s->pending[s->npending++], NULL, run_host, h);
    pthread_mutex_unlock(&s->mu);
    return OK;
}

CUresult cuEventCreate(int **e, unsigned flags) { NEED_CTX(); *e = calloc(1, sizeof(int)); **e = 0xe7; return OK; }
CUresult cuEventRecord(int *e, struct stream *s) { NOT_STALE(); return e && *e == 0xe7 && valid_stream(s) ? OK : INVALID_HANDLE; }
CUresult cuEventSynchronize(int *e) { return e && *e == 0xe7 ? OK : INVALID_HANDLE; }
CUresult cuEventDestroy_v2(int *e) { NEED_CTX(); if (!e || *e != 0xe7) return INVALID_HANDLE; *e = 0; return OK; }

CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals) {
    NEED_CTX();
    if (strncmp(image, "FAKE", 4) != 0) return 218; /* invalid PTX */
    *m = (void *)kernels;
    __atomic_add_fetch(&live_modules, 1, __ATOMIC_SEQ_CST);
    return OK;
}
CUresult cuModuleUnload(void *m) {
    NEED_CTX();
    if (__atomic_sub_fetch(&live_modules, 1, __ATOMIC_SEQ_CST) < 0) abort(); /* unloaded twice */
    return OK;
}
CUresult cuModuleGetFunction(struct kernel **f, void *m, const char *name) {
    NEED_CTX();
    for (unsigned i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (strcmp(kernels[i].name, name) == 0) { *f = &kernels[i]; return OK; }
    return NOT_FOUND;
}
CUresult cuFuncGetParamInfo(struct kernel *f, size_t i, size_t *off, size_t *size) {
    if ((int)i >= f->nparams) return INVALID_VALUE;
    *off = i * 8; *size = f->sizes[i];
    return OK;
}
/* FAKE_EVICT_KB, when set, makes each launch write that many KiB of memory
   of its own, evicting the caller's data from the CPU caches as libcuda's
   launch does: for studying the cost of the code around a launch. */
static char *evict_buf;
static size_t evict_len;
static pthread_once_t evict_once = PTHREAD_ONCE_INIT;
static void evict_init(void) {
    const char *e = getenv("FAKE_EVICT_KB");
    if (e && atol(e) > 0) { evict_len = (size_t)atol(e) << 10; evict_buf = malloc(evict_len); }
}
static void evict(void) {
    pthread_once(&evict_once, evict_init);
    for (size_t i = 0; i < evict_len; i += 64) evict_buf[i]++;
}

CUresult cuLaunchKernel(struct kernel *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, struct stream *s, void **params, void **extra) {
    NOT_STALE();
    if (!s) { NEED_CTX(); } else if (!valid_stream(s)) return INVALID_HANDLE;
    if (!gx || !gy || !gz || !bx || !by || !bz) return INVALID_VALUE;
    evict();
    if (strcmp(f->name, "add4") == 0) {
        unsigned *out = (unsigned *)(uintptr_t)*(CUdeviceptr *)params[0];
        *out = *(unsigned *)params[1] + *(unsigned *)params[2] + *(unsigned *)params[3];
    } else if (strcmp(f->name, "fill") == 0) {
        int *out = (int *)(uintptr_t)*(CUdeviceptr *)params[0];
        int v = *(int *)params[1], n = *(int *)params[2];
        for (int i = 0; i < n; i++) out[i] = v + i;
    }
    return OK;
}
