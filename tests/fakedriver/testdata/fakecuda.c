/*
 * fakecuda: a stand-in for libcuda, for testing purecuda's driver and graph
 * layers on machines without a GPU (CI). It is compiled by the tests with gcc
 * and loaded through PURECUDA_LIBCUDA. tests/fakedriver/MODEL.md lists every
 * fake_* control and counter; this comment says what is modelled and how.
 *
 * Contexts
 *  - the current context is per OS thread, with a push/pop stack (set
 *    replaces the top, set to NULL pops); every function that needs one
 *    fails with CUDA_ERROR_INVALID_CONTEXT (201) on a thread that has none,
 *    as the real driver does once goroutines migrate;
 *  - a context destroyed while current on another thread stays current
 *    there, and every call on that thread, even one that names its stream,
 *    fails with CUDA_ERROR_CONTEXT_IS_DESTROYED (709);
 *  - destroying a context (or releasing the primary context to zero) kills
 *    everything made in it: streams, events, modules, device memory,
 *    registrations. Later uses of those count as bad uses.
 *
 * Memory
 *  - "device" memory is host memory from a private arena whose addresses are
 *    never reused, each allocation on pages of its own followed by an
 *    unused page, so a stale or overrunning pointer never aliases a newer
 *    one. Every allocation is registered (base, size, kind, context,
 *    live). Freed memory is
 *    poisoned with 0xdd and kept mapped (large or old blocks are given back
 *    to the OS with MADV_DONTNEED and then read as zero), so a late use
 *    through a pointer the fake does not check cannot crash the process;
 *  - every call that takes a device pointer (copies, memsets, kernel
 *    arguments of the fake kernels, frees, pointer queries, graph nodes when
 *    they run) checks the range lies in one live allocation; a freed or
 *    unknown pointer, a double free or a kernel argument from another
 *    context counts as a bad pointer use and returns CUDA_ERROR_INVALID_VALUE
 *    without touching memory. Host-side pointers are checked only when they
 *    point into the arena (pinned host or managed memory);
 *  - cuMemFree of ordinary memory waits for work queued in its context
 *    before the call (the driver's implicit synchronisation); cuMemFree of
 *    stream-ordered memory frees at once, so queued work that still uses it
 *    counts bad uses when it runs;
 *  - stream-ordered allocation (pools: default, created, per-device current
 *    pool; attributes; trim), managed memory, pinned host memory, host
 *    registrations, pointer attributes, cuMemGetInfo.
 *
 * Streams
 *  - each stream executes its work in order on a worker thread of its own
 *    (started on demand, gone after 200 ms idle): copies, memsets, fake
 *    kernels, host functions, stream-ordered frees, event records and waits,
 *    graph launches. Work is read and checked when it runs, not when it is
 *    queued. When a stream is idle and no delay is set, a kernel, copy,
 *    memset, free or record runs at once on the caller's thread (the GPU
 *    could have been that fast); host functions and graphs always queue;
 *  - FAKE_COPY_DELAY_US / fake_set_copy_delay_us slow every copy (sync and
 *    async) and FAKE_KERNEL_DELAY_US / fake_set_kernel_delay_us every
 *    kernel; a buffer freed during the delay is detected;
 *    fake_set_launch_call_delay_us holds cuLaunchKernel itself in the
 *    driver (fake_set_record_call_delay_us, cuEventRecord), and a stream
 *    destroyed meanwhile is detected;
 *  - a negative delay (copy, kernel, launch call, record call, unregister,
 *    graph call) is a hold: the work waits until the test sets the delay
 *    to 0 or more, so a test asserts "not yet run" with no timing on a
 *    loaded machine; fake_copies_in_delay, fake_kernels_in_delay,
 *    fake_launch_calls_in_delay, fake_record_calls_in_delay,
 *    fake_unregisters_in_delay and fake_graph_calls_in_delay count the
 *    calls waiting or sleeping there. fake_gate_fn, a host function,
 *    holds its stream until fake_open_gate(slot);
 *  - NULL and CU_STREAM_LEGACY name the current context's legacy stream,
 *    CU_STREAM_PER_THREAD a stream per (OS thread, context);
 *  - synchronize/query of streams, events and contexts wait for or report
 *    the work queued before the call; cuStreamDestroy lets queued work
 *    finish but the handle is dead at once.
 *  - a handle that was destroyed or never created counts as a bad handle
 *    use and returns CUDA_ERROR_INVALID_HANDLE (contexts:
 *    CUDA_ERROR_INVALID_CONTEXT; host registrations:
 *    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, as the real driver); handle
 *    structs are never freed, so detection is reliable.
 *
 * Kernels: empty(), add4(unsigned*, unsigned, unsigned, unsigned) storing
 * a+b+c (like gputest's PTX), fill(int*, int v, int n): out[i] = v + i, and
 * copyi(int *dst, const int *src, int n), pack(unsigned *out, unsigned char a,
 * unsigned short b, unsigned char c) storing a | b << 8 | c << 24 (parameters
 * of 1 and 2 bytes), in every module ("FAKE..." images)
 * and library, with parameter sizes for cuFuncGetParamInfo/
 * cuKernelGetParamInfo. A function outlives its module only as a dead
 * handle.
 *
 * Graphs: nodes of every kind but conditional, external semaphore and
 * batch memop; edges with edge data; introspection; clone and find-in-clone;
 * instantiate (with flags or params), launch (the nodes run in a
 * topological order on the stream's worker, checked like stream work),
 * upload, exec update and per-node exec set-params, DOT output; graph
 * memory nodes with the driver's restrictions; user objects whose
 * destructors run on a fake CUDA thread of their own after the last
 * reference (user, graph, clone, executable) is gone and every launch of an
 * executable holding one has finished. Node adds and instantiation need a
 * current context (the real driver crashes without one: they count
 * fake_no_ctx_graph_calls and fail instead).
 *
 * Concurrent graph calls: graphs and executables are not internally
 * synchronised (the real driver crashes when, e.g., instantiate or clone of
 * g races an exec destroy of an executable of g). Every call that touches a
 * graph or an executable (resolving it, a node of it, or adding captured
 * work to it; an exec destroy touches its source graph too; a launch only
 * its executable) marks it in use until it returns; one that finds it in
 * use by another thread's call counts fake_concurrent_graph_calls and
 * proceeds as before. Marks live outside the global lock, a thread's nested
 * calls do not count, captured work from two threads into one capture does
 * not count; FAKE_GRAPH_CALL_DELAY_US / fake_set_graph_call_delay_us makes
 * each marking call sleep before it returns, holding its marks but not the
 * lock, so races are seen (details at use_mark).
 *
 * Stream capture: work queued on a captured stream becomes graph nodes;
 * events fork and join streams into a capture; ending checks joins, thread
 * and invalidation; syncs and unsafe calls are refused as the capture modes
 * say (CUDA_ERROR_STREAM_CAPTURE_*).
 *
 * Also: failure injection (fake_fail_next), a sticky context error
 * (fake_set_sticky_error), CUDA calls made from host functions or
 * destructors (refused with CUDA_ERROR_NOT_PERMITTED and counted), and
 * counters of everything live. Peer copies (cuMemcpyPeer, cuMemcpyPeerAsync)
 * between contexts of the one device, each side checked against the context
 * named for it. Not modelled: arrays and textures, peer
 * access, IPC, virtual memory management, green contexts, conditional
 * nodes, capturing a graph launch, the legacy stream's implicit
 * synchronisation with other blocking streams.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void (*hostfn)(void *);

enum {
    OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_DEVICE = 101, INVALID_CONTEXT = 201, INVALID_PTX = 218,
    OPERATING_SYSTEM = 304, INVALID_HANDLE = 400, LOSSY_QUERY = 402, NOT_FOUND = 500, NOT_READY = 600,
    CONTEXT_IS_DESTROYED = 709, ALREADY_REGISTERED = 712, NOT_REGISTERED = 713, NOT_PERMITTED = 800,
    NOT_SUPPORTED = 801, CAPTURE_UNSUPPORTED = 900, CAPTURE_INVALIDATED = 901, CAPTURE_UNMATCHED = 903,
    CAPTURE_UNJOINED = 904, CAPTURE_ISOLATION = 905, CAPTURE_WRONG_THREAD = 908, EXEC_UPDATE_FAILURE = 910,
    ILLEGAL_STATE = 401
};

/* ---- C layouts of the structs the fake reads (x86-64, as internal/cu) ---- */

typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray, *reserved0;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray, *reserved1;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} memcpy3d_t;
enum { MT_HOST = 1, MT_DEVICE = 2, MT_ARRAY = 3, MT_UNIFIED = 4 };

typedef struct {
    void *func;
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void **kernelParams, **extra;
    void *kern, *ctx;
} kernel_params_t; /* CUDA_KERNEL_NODE_PARAMS_v2 and _v3 */

typedef struct {
    CUdeviceptr dst;
    size_t pitch;
    unsigned value, elementSize;
    size_t width, height;
} memset_params_t; /* CUDA_MEMSET_NODE_PARAMS_v1 */

typedef struct { memset_params_t p; void *ctx; } memset_params2_t; /* _v2 */
typedef struct { hostfn fn; void *userData; } host_params_t;

typedef struct {
    int allocType, handleTypes;
    struct { int type, id; } location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} pool_props_t;

typedef struct {
    pool_props_t poolProps;
    const void *accessDescs;
    size_t accessDescCount, bytesize;
    CUdeviceptr dptr;
} mem_alloc_params_t;

typedef struct { unsigned char from_port, to_port, type, reserved[5]; } edge_data_t;

typedef struct {
    int type;
    int reserved0[3];
    union {
        long long reserved1[29];
        kernel_params_t kernel;
        struct { int flags, reserved; void *copyCtx; memcpy3d_t copyParams; } memcpy;
        memset_params2_t memset;
        host_params_t host;
        struct { void *graph; int ownership; } graph;
        struct { void *event; } event;
        mem_alloc_params_t alloc;
        struct { CUdeviceptr dptr; } free;
    } u;
    long long reserved2;
} node_params_t; /* CUgraphNodeParams */

typedef struct {
    unsigned long long flags;
    void *hUploadStream;
    void *hErrNode_out;
    int result_out;
} instantiate_params_t;

typedef struct {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void *hStream;
    void *attrs;
    unsigned numAttrs;
} launch_config_t;

typedef struct { int result; void *errorNode, *errorFromNode; } update_result_t;

_Static_assert(sizeof(memcpy3d_t) == 200, "CUDA_MEMCPY3D");
_Static_assert(sizeof(kernel_params_t) == 72, "CUDA_KERNEL_NODE_PARAMS_v2");
_Static_assert(sizeof(memset_params_t) == 40, "CUDA_MEMSET_NODE_PARAMS_v1");
_Static_assert(sizeof(memset_params2_t) == 48, "CUDA_MEMSET_NODE_PARAMS_v2");
_Static_assert(sizeof(pool_props_t) == 88, "CUmemPoolProps");
_Static_assert(sizeof(mem_alloc_params_t) == 120, "CUDA_MEM_ALLOC_NODE_PARAMS");
_Static_assert(sizeof(node_params_t) == 256, "CUgraphNodeParams");
_Static_assert(sizeof(instantiate_params_t) == 32, "CUDA_GRAPH_INSTANTIATE_PARAMS");
_Static_assert(sizeof(launch_config_t) == 56, "CUlaunchConfig");
_Static_assert(sizeof(edge_data_t) == 8, "CUgraphEdgeData");

enum { NT_KERNEL = 0, NT_MEMCPY = 1, NT_MEMSET = 2, NT_HOST = 3, NT_GRAPH = 4, NT_EMPTY = 5, NT_WAIT_EVENT = 6,
       NT_EVENT_RECORD = 7, NT_MEM_ALLOC = 10, NT_MEM_FREE = 11 };

/* ---- global state ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;  /* guards everything below but the atomics */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; /* broadcast when any work completes */
#define LOCK() pthread_mutex_lock(&mu)
#define UNLOCK() pthread_mutex_unlock(&mu)
#define LOCKED(expr) do { LOCK(); CUresult r_ = (expr); UNLOCK(); return r_; } while (0)

static long live_allocs, live_contexts, live_modules, host_calls, live_streams, live_events, live_pools,
    live_regs, live_host_allocs, live_libraries, live_graphs, live_execs, live_uobjs, live_nodes, destructors_run,
    pending_destructors, queued_ops, running_ops, dropped_ops, bad_ptr_uses, bad_handle_uses, no_ctx_graph_calls,
    callback_cuda_calls, fail_armed;
static size_t live_bytes;
static long copy_delay_us, kernel_delay_us;
static int sticky, verbose;
static char last_bad[512], last_bad_out[512];
static __thread int in_callback; /* a host function or destructor is running on this thread */

#define ATOMIC_GET(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define INC(x) __atomic_add_fetch(&(x), 1, __ATOMIC_SEQ_CST)
#define DEC(x) __atomic_sub_fetch(&(x), 1, __ATOMIC_SEQ_CST)

static const size_t TOTAL_MEM = (size_t)16 << 30;

static void note_bad(const char *what, const char *fn, const char *detail) {
    snprintf(last_bad, sizeof last_bad, "%s: %s: %s", fn, what, detail);
    if (verbose) fprintf(stderr, "fakecuda: %s\n", last_bad);
}

/* bad_ptr counts a use of a freed or unknown device pointer (lock held). */
static CUresult bad_ptr(const char *fn, CUdeviceptr p, size_t n, const char *why) {
    char d[160];
    snprintf(d, sizeof d, "%s [0x%llx, +%zu)", why, p, n);
    INC(bad_ptr_uses);
    note_bad("bad pointer", fn, d);
    return INVALID_VALUE;
}

/* bad_handle counts a use of a destroyed or unknown handle (lock held). */
static CUresult bad_handle(const char *fn, const void *h, const char *kind, CUresult code) {
    char d[120];
    snprintf(d, sizeof d, "%s %p is destroyed or unknown", kind, h);
    INC(bad_handle_uses);
    note_bad("bad handle", fn, d);
    return code;
}

/* ---- failure injection and the common prologue ---- */

struct failure { char name[64]; int code, skip, times; };
static struct failure failures[32];
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;

static void base_name(char *dst, size_t len, const char *src) {
    snprintf(dst, len, "%s", src);
    char *v = strrchr(dst, '_');
    if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9') *v = 0; /* cuMemFree_v2 -> cuMemFree */
}

static CUresult check_fail(const char *fn) {
    CUresult r = OK;
    pthread_mutex_lock(&fail_mu);
    for (int i = 0; i < 32; i++) {
        struct failure *f = &failures[i];
        if (f->times == 0 || strcmp(f->name, fn) != 0) continue;
        if (f->skip > 0) { f->skip--; continue; }
        r = f->code;
        if (f->times > 0 && --f->times == 0) DEC(fail_armed);
        break;
    }
    pthread_mutex_unlock(&fail_mu);
    return r;
}

static CUresult enter(const char *fn) {
    if (in_callback) {
        INC(callback_cuda_calls);
        LOCK();
        note_bad("CUDA call from a host function or destructor", fn, "refused with CUDA_ERROR_NOT_PERMITTED");
        UNLOCK();
        return NOT_PERMITTED;
    }
    if (ATOMIC_GET(fail_armed)) return check_fail(fn);
    return OK;
}
/* ---- concurrent calls on one graph or executable ----
 *
 * CUDA's graphs (CUgraph) and executables (CUgraphExec) are not internally
 * synchronised: calls that touch one must be serialised by the caller, and
 * the real driver crashes when some are not (instantiate or clone racing an
 * exec destroy of the same graph, instantiate racing clone). Every fake call
 * runs in a frame (ENTER declares it; it ends when the call returns); a call
 * that resolves a graph, a graph node or an executable marks that object in
 * use by its frame until it returns. Marking one that another thread's call
 * has in use counts a concurrent graph call. The marker is separate from the
 * global lock: its own small mutex (use_mu, a leaf: never held while taking
 * mu) guards a count of the calls in the object and the names of up to four
 * of them. A thread's nested call finds the mark in its own chain of frames
 * and does not count. With fake_set_graph_call_delay_us, a call that marked
 * something sleeps that long before it returns, holding its marks but not
 * the global lock, which widens the window in which races are seen. Nodes
 * that stream capture adds mark the capture's graph as "captured": captured
 * work from two threads into one capture is the driver's own business and
 * does not count, captured work against any other call on that graph does. */
struct marker { int users, caps; const char *fn[4]; int cap[4]; }; /* guarded by use_mu */
struct umark { struct marker *m; int slot, cap; };
struct frame { struct frame *prev; const char *fn; int n; struct umark v[6]; };
static pthread_mutex_t use_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread struct frame *cur_frame; /* the innermost fake call on this thread */
static long concurrent_graph_calls, graph_call_delay_us, graph_calls_in_delay;
long fake_graph_calls_in_delay(void) { return __atomic_load_n(&graph_calls_in_delay, __ATOMIC_SEQ_CST); }
static void sleep_us(long us);
static void delay_wait(long *delay_us, long *in_delay);

/* use_mark marks m (a graph's or an executable's, kind and h describe it)
   in use by the calling thread's current call until the call returns, and
   counts a concurrent call if another thread's call has it in use. Lock
   held (the description goes to fake_last_bad_use). */
static void use_mark(struct marker *m, const char *kind, const void *h, int cap) {
    struct frame *f = cur_frame;
    if (!f) return;
    for (struct frame *x = f; x; x = x->prev)
        for (int i = 0; i < x->n; i++)
            if (x->v[i].m == m) return; /* this thread's: a nested call */
    if (f->n == (int)(sizeof f->v / sizeof f->v[0])) return;
    const char *other = NULL;
    int slot = -1;
    pthread_mutex_lock(&use_mu);
    int busy = cap ? m->users > 0 : m->users + m->caps > 0;
    for (int i = 0; i < 4; i++) {
        if (m->fn[i] && !other && (!cap || !m->cap[i])) other = m->fn[i];
        if (!m->fn[i] && slot < 0) slot = i;
    }
    if (slot >= 0) { m->fn[slot] = f->fn; m->cap[slot] = cap; }
    if (cap) m->caps++; else m->users++;
    pthread_mutex_unlock(&use_mu);
    f->v[f->n].m = m; f->v[f->n].slot = slot; f->v[f->n].cap = cap;
    f->n++;
    if (busy) {
        char d[200];
        INC(concurrent_graph_calls);
        snprintf(d, sizeof d, "%s %p %sin use by %s on another thread", kind, h, cap ? "(capturing) " : "",
                 other ? other : "another call");
        note_bad("concurrent graph call", f->fn, d);
    }
}
/* frame_end ends a fake call: after the delay, if it marked anything, its
   marks go (the global lock is not held here). */
static void frame_end(struct frame *f) {
    cur_frame = f->prev;
    if (!f->n) return;
    delay_wait(&graph_call_delay_us, &graph_calls_in_delay);
    pthread_mutex_lock(&use_mu);
    for (int i = 0; i < f->n; i++) {
        struct marker *m = f->v[i].m;
        if (f->v[i].cap) m->caps--; else m->users--;
        if (f->v[i].slot >= 0) m->fn[f->v[i].slot] = NULL;
    }
    pthread_mutex_unlock(&use_mu);
}

/* ENTER opens the call's frame (it ends when the function returns) and
   refuses calls from callbacks and injected failures. */
#define ENTER(name)                                                                              \
    struct frame frame_ __attribute__((cleanup(frame_end))) = {cur_frame, (name), 0, {{0, 0, 0}}}; \
    cur_frame = &frame_;                                                                         \
    do { CUresult e_ = enter(frame_.fn); if (e_) return e_; } while (0)

/* ---- the handle registry: every handle ever made, never freed ---- */

enum { K_CTX = 1, K_STREAM, K_EVENT, K_MODULE, K_FUNC, K_LIBRARY, K_KERNEL, K_POOL, K_GRAPH, K_NODE, K_EXEC, K_UOBJ };
#define MAGIC 0xfa4ec0deu
struct ctx;
struct hdr { unsigned magic; int kind; int alive; struct ctx *ctx; };

static void **reg_tab;
static size_t reg_cap, reg_len;

static size_t reg_hash(const void *p, size_t cap) {
    return (size_t)((((uintptr_t)p >> 3) * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}
static void reg_put(void **tab, size_t cap, void *p) {
    size_t i = reg_hash(p, cap);
    while (tab[i]) i = (i + 1) & (cap - 1);
    tab[i] = p;
}
static void reg_add(void *p) {
    if ((reg_len + 1) * 2 > reg_cap) {
        size_t ncap = reg_cap ? reg_cap * 2 : 1024;
        void **nt = calloc(ncap, sizeof *nt);
        if (!nt) abort();
        for (size_t i = 0; i < reg_cap; i++)
            if (reg_tab[i]) reg_put(nt, ncap, reg_tab[i]);
        free(reg_tab);
        reg_tab = nt;
        reg_cap = ncap;
    }
    reg_put(reg_tab, reg_cap, p);
    reg_len++;
}
/* reg_get returns the object h names if the fake made it with that kind,
   dead or alive; NULL for anything else. It never dereferences h first. */
static void *reg_get(const void *h, int kind) {
    if (!h || !reg_cap) return NULL;
    for (size_t i = reg_hash(h, reg_cap); reg_tab[i]; i = (i + 1) & (reg_cap - 1))
        if (reg_tab[i] == h) {
            struct hdr *o = reg_tab[i];
            return o->magic == MAGIC && o->kind == kind ? o : NULL;
        }
    return NULL;
}
static void *new_obj(size_t size, int kind, struct ctx *c) {
    struct hdr *o = calloc(1, size);
    if (!o) abort();
    o->magic = MAGIC; o->kind = kind; o->alive = 1; o->ctx = c;
    reg_add(o);
    return o;
}

/* ---- contexts ---- */

struct stream;
struct ctx {
    struct hdr h;
    int primary;
    unsigned flags;
    unsigned long long id;
    struct stream *legacy;
    size_t limits[16];
};

static __thread struct ctx *current;   /* top of this thread's stack */
static __thread struct ctx *below[16]; /* the rest of it */
static __thread int depth;
static struct ctx *primary;
static int primary_refs;
static unsigned primary_flags;
static unsigned long long next_id = 1;

static int have_ctx(void) { return current && current->h.alive; }
static int stale_ctx(void) { return current && !current->h.alive; }
#define NEED_CTX() do { if (stale_ctx()) return CONTEXT_IS_DESTROYED; if (!have_ctx()) return INVALID_CONTEXT; } while (0)
#define NOT_STALE() do { if (stale_ctx()) return CONTEXT_IS_DESTROYED; } while (0)

static struct ctx *get_ctx(const void *h) { return reg_get(h, K_CTX); }

/* ---- the memory registry ---- */

enum { A_DEV = 1, A_MANAGED, A_HOST, A_GRAPH, A_GLOBAL };
struct pool;
struct alloc {
    uintptr_t base;
    size_t size;
    int kind, live, free_pending, stream_ordered, alloc_pending, released, queued;
    int graph_freed; /* graph memory: a free node for it exists */
    unsigned long epoch; /* bumped at every free */
    unsigned long long id;
    struct ctx *ctx;
    struct pool *pool;
    struct alloc *qnext;
};
static struct alloc **allocs; /* sorted by base: the arena only grows */
static size_t nallocs, callocs;
static char *arena;
static size_t arena_size, arena_used;
static struct alloc *q_head, *q_tail; /* freed blocks still resident, oldest first */
static size_t q_bytes;
static const size_t Q_LIMIT = (size_t)256 << 20, POISON_ALL = (size_t)16 << 20, POISON_EDGE = (size_t)1 << 20;

static void arena_init(void) {
    for (size_t sz = (size_t)1 << 40; sz >= ((size_t)256 << 20); sz /= 4) {
        void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) { arena = p; arena_size = sz; return; }
    }
    fprintf(stderr, "fakecuda: cannot reserve an arena for device memory\n");
    abort();
}
static int in_arena(uintptr_t p) { return p >= (uintptr_t)arena && p < (uintptr_t)arena + arena_size; }

/* Allocations start on a page of their own and are followed by an unused
   page, so an overrun hits no allocation and freed pages can be returned. */
static struct alloc *new_alloc(size_t n, int kind, struct ctx *c) {
    size_t sz = (n + 4095) & ~(size_t)4095;
    if (n > ((size_t)1 << 40) || arena_used + sz + 4096 > arena_size) return NULL;
    struct alloc *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->base = (uintptr_t)arena + arena_used;
    arena_used += sz + 4096;
    a->size = n; a->kind = kind; a->ctx = c; a->id = next_id++;
    if (nallocs == callocs) {
        callocs = callocs ? callocs * 2 : 1024;
        allocs = realloc(allocs, callocs * sizeof *allocs);
        if (!allocs) abort();
    }
    allocs[nallocs++] = a;
    return a;
}
/* find_alloc returns the allocation whose range holds p, dead or alive. */
static struct alloc *find_alloc(uintptr_t p) {
    size_t lo = 0, hi = nallocs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (allocs[mid]->base <= p) lo = mid + 1; else hi = mid;
    }
    if (lo == 0) return NULL;
    struct alloc *a = allocs[lo - 1];
    return p < a->base + (a->size ? a->size : 1) ? a : NULL;
}

static void make_live(struct alloc *a) {
    a->live = 1;
    if (a->kind == A_HOST) INC(live_host_allocs);
    else if (a->kind != A_GLOBAL) { INC(live_allocs); live_bytes += a->size; }
}

static void release_pages(struct alloc *a) {
    madvise((void *)a->base, (a->size + 4095) & ~(size_t)4095, MADV_DONTNEED);
}
static void pool_freed(struct alloc *a);
/* pool access and interprocess sharing: the section at the end of the file */
static int ipc_free_import(struct alloc *a);
static void ipc_exporter_free(const char *fn, struct alloc *a);
/* kill_alloc frees a: dead at once, poisoned, kept mapped (lock held). */
static void kill_alloc(struct alloc *a) {
    a->live = 0;
    a->free_pending = 0;
    a->epoch++;
    if (a->kind == A_HOST) DEC(live_host_allocs);
    else if (a->kind != A_GLOBAL) { DEC(live_allocs); live_bytes -= a->size; }
    if (a->pool) pool_freed(a);
    if (a->size <= POISON_ALL) memset((void *)a->base, 0xdd, a->size);
    else {
        memset((void *)a->base, 0xdd, POISON_EDGE);
        memset((void *)(a->base + a->size - POISON_EDGE), 0xdd, POISON_EDGE);
        uintptr_t lo = (a->base + POISON_EDGE + 4095) & ~(uintptr_t)4095;
        uintptr_t hi = (a->base + a->size - POISON_EDGE) & ~(uintptr_t)4095;
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
    }
    if (a->kind == A_GRAPH || a->queued) return; /* graph memory comes back to life at the next launch */
    a->queued = 1;
    a->qnext = NULL;
    if (q_tail) q_tail->qnext = a; else q_head = a;
    q_tail = a;
    q_bytes += a->size < POISON_ALL ? a->size : 2 * POISON_EDGE;
    while (q_bytes > Q_LIMIT && q_head) {
        struct alloc *o = q_head;
        q_head = o->qnext;
        if (!q_head) q_tail = NULL;
        q_bytes -= o->size < POISON_ALL ? o->size : 2 * POISON_EDGE;
        if (!o->released) { release_pages(o); o->released = 1; }
    }
}

/* check_range checks that [p, p+n) lies in one live allocation (lock held).
   callside: the call is being made now, so memory whose stream-ordered
   free is already queued counts as freed too. want_ctx, if set, must be
   the context of ordinary device memory (kernel arguments). */
static CUresult check_range(const char *fn, CUdeviceptr p, size_t n, int callside, struct ctx *want_ctx,
                            struct alloc **out) {
    struct alloc *a = find_alloc((uintptr_t)p);
    if (out) *out = a;
    if (!a) return bad_ptr(fn, p, n, "no allocation holds the address");
    if (!a->live) return bad_ptr(fn, p, n, a->alloc_pending ? "graph memory not yet allocated" : "freed memory");
    if (callside && a->free_pending) return bad_ptr(fn, p, n, "memory whose stream-ordered free is queued");
    if (n > a->size || p - a->base > a->size - n) return bad_ptr(fn, p, n, "range overruns its allocation");
    if (want_ctx && (a->kind == A_DEV || a->kind == A_GLOBAL) && a->ctx != want_ctx && !a->pool)
        return bad_ptr(fn, p, n, "memory of another context"); /* a pool's memory is its device's */
    return OK;
}

/* ---- pools ---- */

struct pool {
    struct hdr h;
    int is_default;
    int reuse[3];
    unsigned long long threshold, used, used_high, reserved_high, cached;
};
static struct pool *default_pool, *device_pool;
static struct pool **pools; /* every pool, for the sync-point trim */
static size_t npools, cpools;
static void pool_list_add(struct pool *p) {
    if (npools == cpools) {
        cpools = cpools ? cpools * 2 : 16;
        pools = realloc(pools, cpools * sizeof *pools);
        if (!pools) abort();
    }
    pools[npools++] = p;
}

static void pool_took(struct pool *p, size_t n) {
    p->used += n;
    p->cached = p->cached > n ? p->cached - n : 0;
    if (p->used > p->used_high) p->used_high = p->used;
    if (p->used + p->cached > p->reserved_high) p->reserved_high = p->used + p->cached;
}
static void pool_freed(struct alloc *a) {
    struct pool *p = a->pool;
    p->used -= a->size;
    p->cached += a->size;
}
static void pools_at_sync(void) {
    /* memory above a pool's release threshold goes back at a sync point */
    for (size_t i = 0; i < npools; i++)
        if (pools[i]->h.alive && pools[i]->cached > pools[i]->threshold) pools[i]->cached = pools[i]->threshold;
}

/* ---- events ---- */

struct capture;
struct node;
struct event {
    struct hdr h;
    unsigned flags;
    long long rec_gen, done_gen;
    double t_ms;
    struct capture *cap; /* recorded in this capture: cdeps are where */
    struct node **cdeps;
    int ncdeps, ccdeps;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
static void event_done(struct event *e, long long gen) {
    if (gen > e->done_gen) { e->done_gen = gen; e->t_ms = now_ms(); }
    pthread_cond_broadcast(&done_cv);
}

/* ---- modules, libraries, functions ---- */

enum { KD_EMPTY, KD_ADD4, KD_FILL, KD_COPYI, KD_PACK };
struct kdef { const char *name; int id, nparams; size_t sizes[4]; };
static const struct kdef kdefs[] = {
    {"empty", KD_EMPTY, 0, {0}}, {"add4", KD_ADD4, 4, {8, 4, 4, 4}}, {"fill", KD_FILL, 3, {8, 4, 4}},
    {"copyi", KD_COPYI, 3, {8, 8, 4}}, {"pack", KD_PACK, 4, {8, 1, 2, 1}},
};
#define NK ((int)(sizeof kdefs / sizeof kdefs[0]))
struct module;
struct library;
struct func { /* K_FUNC (a module's CUfunction) or K_KERNEL (a library's CUkernel) */
    struct hdr h;
    const struct kdef *k;
    struct module *mod;
    struct library *lib;
    int maxdyn, carveout;
};
struct module { struct hdr h; struct func f[NK]; struct alloc *global; };
struct library { struct hdr h; struct func *k[NK]; };

/* get_func resolves a CUfunction or CUkernel; dead if its module or
   library is gone (lock held). */
static CUresult get_func(const char *fn, void *h, struct func **out) {
    *out = NULL;
    struct func *f = reg_get(h, K_FUNC);
    if (!f) f = reg_get(h, K_KERNEL);
    if (!f || !f->h.alive) return bad_handle(fn, h, "function", INVALID_HANDLE);
    *out = f;
    return OK;
}

/* ---- work: kernels, copies, memsets ---- */

struct kcall {
    struct func *f;
    void *fh;
    struct ctx *ctx;
    unsigned grid[3], block[3], shmem;
    uint64_t a[4];
};

static void sleep_us(long us) {
    if (us <= 0) return;
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* delay_wait sleeps *delay_us microseconds. A negative value is a hold:
   it waits until a test sets the delay to 0 or more, however long that
   takes, so a test can keep work "not yet run" with no timing at all.
   *in_delay counts the calls inside, for a test to wait until one is. */
static void delay_wait(long *delay_us, long *in_delay) {
    long us = __atomic_load_n(delay_us, __ATOMIC_SEQ_CST);
    if (!us) return;
    __atomic_add_fetch(in_delay, 1, __ATOMIC_SEQ_CST);
    if (us > 0) sleep_us(us);
    else
        while (__atomic_load_n(delay_us, __ATOMIC_SEQ_CST) < 0) sleep_us(100);
    __atomic_sub_fetch(in_delay, 1, __ATOMIC_SEQ_CST);
}
static long copies_in_delay, kernels_in_delay;
long fake_copies_in_delay(void) { return __atomic_load_n(&copies_in_delay, __ATOMIC_SEQ_CST); }
long fake_kernels_in_delay(void) { return __atomic_load_n(&kernels_in_delay, __ATOMIC_SEQ_CST); }

/* kcall_args copies the argument values, as the driver does at launch. */
static CUresult kcall_args(const char *fn, struct kcall *k, void **params, void **extra) {
    memset(k->a, 0, sizeof k->a);
    const struct kdef *d = k->f->k;
    if (params) {
        for (int i = 0; i < d->nparams; i++) {
            if (!params[i]) return INVALID_VALUE;
            memcpy(&k->a[i], params[i], d->sizes[i]);
        }
        return OK;
    }
    if (extra) {
        void *buf = NULL;
        size_t size = 0;
        for (int i = 0; extra[i] && i < 16; i += 2) {
            if ((uintptr_t)extra[i] == 1) buf = extra[i + 1];
            else if ((uintptr_t)extra[i] == 2 && extra[i + 1]) size = *(size_t *)extra[i + 1];
            else return INVALID_VALUE;
        }
        if (!buf || size < (size_t)d->nparams * 8 - (d->nparams ? 8 - d->sizes[d->nparams - 1] : 0)) return INVALID_VALUE;
        memcpy(k->a, buf, size < sizeof k->a ? size : sizeof k->a);
        return OK;
    }
    return d->nparams ? INVALID_VALUE : OK;
}

static CUresult kernel_check(const char *fn, struct kcall *k, int callside) {
    int id = k->f->k->id;
    CUresult r = OK;
    if (id == KD_ADD4 || id == KD_PACK) r = check_range(fn, k->a[0], 4, callside, k->ctx, NULL);
    else if (id == KD_FILL) {
        int cnt = (int)(uint32_t)k->a[2];
        if (cnt > 0) r = check_range(fn, k->a[0], (size_t)cnt * 4, callside, k->ctx, NULL);
    } else if (id == KD_COPYI) {
        int cnt = (int)(uint32_t)k->a[2];
        if (cnt > 0) r = check_range(fn, k->a[0], (size_t)cnt * 4, callside, k->ctx, NULL);
        if (!r && cnt > 0) r = check_range(fn, k->a[1], (size_t)cnt * 4, callside, k->ctx, NULL);
    }
    return r;
}

/* kernel_exec runs a fake kernel (lock held; may drop it for the delay). */
static CUresult kernel_exec(const char *fn, struct kcall *k, int callside, int may_unlock) {
    if (!k->f->h.alive) return bad_handle(fn, k->fh, "function (module or library unloaded)", INVALID_HANDLE);
    CUresult r = kernel_check(fn, k, callside);
    if (r) return r;
    long delay = ATOMIC_GET(kernel_delay_us);
    if (delay && may_unlock) {
        UNLOCK();
        delay_wait(&kernel_delay_us, &kernels_in_delay);
        LOCK();
        if ((r = kernel_check(fn, k, 0))) return r; /* freed while it ran */
    }
    int id = k->f->k->id;
    if (id == KD_ADD4) {
        *(unsigned *)(uintptr_t)k->a[0] = (unsigned)k->a[1] + (unsigned)k->a[2] + (unsigned)k->a[3];
    } else if (id == KD_FILL) {
        int *out = (int *)(uintptr_t)k->a[0], v = (int)(uint32_t)k->a[1], cnt = (int)(uint32_t)k->a[2];
        for (int i = 0; i < cnt; i++) out[i] = v + i;
    } else if (id == KD_PACK) {
        *(unsigned *)(uintptr_t)k->a[0] = (unsigned)(uint8_t)k->a[1] | (unsigned)(uint16_t)k->a[2] << 8 | (unsigned)(uint8_t)k->a[3] << 24;
    } else if (id == KD_COPYI) {
        int cnt = (int)(uint32_t)k->a[2];
        if (cnt > 0) memmove((void *)(uintptr_t)k->a[0], (void *)(uintptr_t)k->a[1], (size_t)cnt * 4);
    }
    return OK;
}

/* copy_side resolves one side of a 3D copy and checks it. */
static CUresult copy_side(const char *fn, int mtype, const void *host, CUdeviceptr dev, size_t x, size_t y, size_t z,
                          size_t pitch, size_t height, const memcpy3d_t *p, int callside, uintptr_t *base,
                          uintptr_t *first, size_t *len, struct alloc **a) {
    uintptr_t b;
    switch (mtype) {
    case MT_HOST: b = (uintptr_t)host; break;
    case MT_DEVICE: case MT_UNIFIED: b = (uintptr_t)dev; break;
    default: return INVALID_VALUE; /* arrays are not modelled */
    }
    if (!pitch) pitch = p->WidthInBytes;
    if (!height) height = p->Height;
    if (pitch < p->WidthInBytes && (p->Height > 1 || p->Depth > 1)) return INVALID_VALUE;
    size_t off = x + y * pitch + z * pitch * height;
    size_t extent = (p->Depth - 1) * pitch * height + (p->Height - 1) * pitch + p->WidthInBytes;
    *base = b + off; *first = pitch; *len = extent; *a = NULL;
    if (mtype == MT_DEVICE || in_arena(b)) return check_range(fn, b + off, extent, callside, NULL, a);
    if (!b) return INVALID_VALUE;
    return OK;
}

static int still_live(struct alloc *a, unsigned long epoch) { return !a || (a->live && a->epoch == epoch); }

static long reg_covering(uintptr_t b);
static int reg_live(long i);
/* copy3d checks and performs a copy (lock held; may drop it for the delay).
   A host side on registered pages is copied by DMA, as the driver does: a
   registration removed during the delay is a bad use. */
static CUresult copy3d(const char *fn, const memcpy3d_t *p, int callside, int may_unlock) {
    if (!p->WidthInBytes || !p->Height || !p->Depth) return INVALID_VALUE;
    uintptr_t s, d;
    size_t spitch, dpitch, slen, dlen;
    struct alloc *sa, *da;
    CUresult r = copy_side(fn, p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ,
                           p->srcPitch, p->srcHeight, p, callside, &s, &spitch, &slen, &sa);
    if (r) return r;
    r = copy_side(fn, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
                  p->dstHeight, p, callside, &d, &dpitch, &dlen, &da);
    if (r) return r;
    long delay = ATOMIC_GET(copy_delay_us);
    if (delay && may_unlock) {
        unsigned long se = sa ? sa->epoch : 0, de = da ? da->epoch : 0;
        long sr = p->srcMemoryType == MT_HOST ? reg_covering(s) : -1;
        long dr = p->dstMemoryType == MT_HOST ? reg_covering(d) : -1;
        UNLOCK();
        delay_wait(&copy_delay_us, &copies_in_delay);
        LOCK();
        if (!still_live(sa, se)) return bad_ptr(fn, s, slen, "source freed during the copy");
        if (!still_live(da, de)) return bad_ptr(fn, d, dlen, "destination freed during the copy");
        if (sr >= 0 && !reg_live(sr)) return bad_ptr(fn, s, slen, "source's host registration removed during the copy");
        if (dr >= 0 && !reg_live(dr)) return bad_ptr(fn, d, dlen, "destination's host registration removed during the copy");
    }
    size_t sh = p->srcHeight ? p->srcHeight : p->Height, dh = p->dstHeight ? p->dstHeight : p->Height;
    for (size_t z = 0; z < p->Depth; z++)
        for (size_t y = 0; y < p->Height; y++)
            memmove((void *)(d + z * dpitch * dh + y * dpitch), (const void *)(s + z * spitch * sh + y * spitch),
                    p->WidthInBytes);
    return OK;
}

static memcpy3d_t linear_copy(int stype, const void *sh, CUdeviceptr sd, int dtype, void *dh, CUdeviceptr dd,
                              size_t n) {
    memcpy3d_t p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = stype; p.srcHost = sh; p.srcDevice = sd;
    p.dstMemoryType = dtype; p.dstHost = dh; p.dstDevice = dd;
    p.WidthInBytes = n; p.Height = 1; p.Depth = 1;
    return p;
}
/* unified picks the memory type of a cuMemcpy pointer. */
static int unified(CUdeviceptr p) { return in_arena((uintptr_t)p) ? MT_DEVICE : MT_HOST; }

static CUresult memset2d(const char *fn, const memset_params_t *m, int callside) {
    size_t es = m->elementSize;
    if (es != 1 && es != 2 && es != 4) return INVALID_VALUE;
    if (!m->width || !m->height) return INVALID_VALUE;
    if (m->dst % es) return INVALID_VALUE;
    size_t pitch = m->height > 1 ? m->pitch : m->width * es;
    if (pitch < m->width * es) return INVALID_VALUE;
    size_t extent = (m->height - 1) * pitch + m->width * es;
    CUresult r = check_range(fn, m->dst, extent, callside, NULL, NULL);
    if (r) return r;
    for (size_t y = 0; y < m->height; y++) {
        char *row = (char *)(uintptr_t)(m->dst + y * pitch);
        for (size_t i = 0; i < m->width; i++) {
            if (es == 1) row[i] = (char)m->value;
            else if (es == 2) ((uint16_t *)row)[i] = (uint16_t)m->value;
            else ((uint32_t *)row)[i] = m->value;
        }
    }
    return OK;
}

/* ---- streams and their workers ---- */

enum { OP_KERNEL = 1, OP_COPY, OP_MEMSET, OP_HOST, OP_FREE, OP_RECORD, OP_WAIT, OP_GRAPH };
struct plan;
struct exec;
struct op {
    struct op *next;
    int type;
    const char *fn;
    union {
        struct kcall k;
        memcpy3d_t c;
        memset_params_t m;
        host_params_t h;
        CUdeviceptr free;
        struct { struct event *e; long long gen; } ev;
        struct { struct exec *x; struct plan *pl; long long *gens; int autofree; } g;
    } u;
};

struct stream {
    struct hdr h;
    unsigned flags;
    int prio, special, killed, worker;
    unsigned long long id, enq_seq, done_seq;
    struct op *head, *tail;
    pthread_cond_t cv;
    struct stream *anext, *aprev; /* the active list: alive, or draining */
    int active;
    struct capture *cap; /* the capture this stream's work goes into */
    struct node **cdeps; /* what the next captured node depends on */
    edge_data_t *cedges;  /* zeros, for cuStreamGetCaptureInfo */
    int ncdeps, ccdeps;
};
static struct stream *active_streams;

static void activate(struct stream *s) {
    s->active = 1;
    s->anext = active_streams;
    s->aprev = NULL;
    if (active_streams) active_streams->aprev = s;
    active_streams = s;
}
static void maybe_deactivate(struct stream *s) {
    if (!s->active || s->h.alive || s->enq_seq != s->done_seq) return;
    s->active = 0;
    if (s->aprev) s->aprev->anext = s->anext; else active_streams = s->anext;
    if (s->anext) s->anext->aprev = s->aprev;
}

static struct stream *new_stream(struct ctx *c, unsigned flags, int prio, int special) {
    struct stream *s = new_obj(sizeof *s, K_STREAM, c);
    s->flags = flags; s->prio = prio; s->special = special; s->id = next_id++;
    pthread_cond_init(&s->cv, NULL);
    activate(s);
    if (!special) INC(live_streams);
    return s;
}

static __thread struct { struct ctx *c; struct stream *s; } pts[8];
static __thread int npts;

/* get_stream resolves a stream handle, NULL/legacy/per-thread included
   (lock held). */
static CUresult get_stream(const char *fn, void *h, struct stream **out) {
    *out = NULL;
    NOT_STALE();
    uintptr_t v = (uintptr_t)h;
    if (v <= 2) {
        if (!have_ctx()) return INVALID_CONTEXT;
        if (v == 2) {
            for (int i = 0; i < npts; i++)
                if (pts[i].c == current && pts[i].s->h.alive) { *out = pts[i].s; return OK; }
            struct stream *s = new_stream(current, 0, 0, 2);
            int slot = npts;
            for (int i = 0; i < npts; i++)
                if (pts[i].c == current || !pts[i].s->h.alive) { slot = i; break; }
            if (slot == 8) slot = 0;
            else if (slot == npts) npts++;
            pts[slot].c = current; pts[slot].s = s;
            *out = s;
            return OK;
        }
        if (!current->legacy || !current->legacy->h.alive) current->legacy = new_stream(current, 0, 0, 1);
        *out = current->legacy;
        return OK;
    }
    struct stream *s = reg_get(h, K_STREAM);
    if (!s || !s->h.alive) return bad_handle(fn, h, "stream", INVALID_HANDLE);
    *out = s;
    return OK;
}

static int stream_idle(struct stream *s) { return s->enq_seq == s->done_seq; }

static void *worker_main(void *arg);
static CUresult enqueue(struct stream *s, struct op *o) {
    o->next = NULL;
    if (!s->worker) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int e = pthread_create(&t, &at, worker_main, s);
        pthread_attr_destroy(&at);
        if (e) return OUT_OF_MEMORY;
        s->worker = 1;
    }
    if (s->tail) s->tail->next = o; else s->head = o;
    s->tail = o;
    s->enq_seq++;
    INC(queued_ops);
    pthread_cond_signal(&s->cv);
    return OK;
}
static struct op *new_op(int type, const char *fn) {
    struct op *o = calloc(1, sizeof *o);
    if (!o) abort();
    o->type = type; o->fn = fn;
    return o;
}

/* wait_seq waits until s has done the work queued before seq (lock held). */
static void wait_seq(struct stream *s, unsigned long long seq) {
    while (s->done_seq < seq && !sticky) pthread_cond_wait(&done_cv, &mu);
}
/* ctx_sync waits for the work queued in c before the call (lock held). */
static CUresult ctx_sync(struct ctx *c) {
    size_t n = 0, i = 0;
    for (struct stream *s = active_streams; s; s = s->anext)
        if (s->h.ctx == c && !stream_idle(s)) n++;
    if (n) {
        struct { struct stream *s; unsigned long long seq; } *v = malloc(n * sizeof *v);
        if (!v) abort();
        for (struct stream *s = active_streams; s && i < n; s = s->anext)
            if (s->h.ctx == c && !stream_idle(s)) { v[i].s = s; v[i].seq = s->enq_seq; i++; }
        for (i = 0; i < n; i++) wait_seq(v[i].s, v[i].seq);
        free(v);
    }
    pools_at_sync();
    return sticky ? sticky : OK;
}

static void host_exec(hostfn fn, void *data) {
    UNLOCK();
    in_callback = 1;
    fn(data);
    in_callback = 0;
    LOCK();
    INC(host_calls);
}

static void free_exec(const char *fn, CUdeviceptr p) {
    struct alloc *a = find_alloc((uintptr_t)p);
    if (!a || !a->live || a->base != p) { bad_ptr(fn, p, 0, "stream-ordered free of freed or unknown memory"); return; }
    ipc_exporter_free(fn, a);
    kill_alloc(a);
}

static void graph_exec(struct stream *s, struct op *o);
static void graph_done(struct op *o);
/* multi-context graphs: see the block "nodes in several contexts" */
struct nparams;
struct plan;
static int mgraph_node_runs(const char *fn, const struct nparams *p);
static int mgraph_contexts(const struct plan *pl);
static CUresult mgraph_record_check(const char *fn, const struct hdr *e, const struct hdr *s);

static void run_op(struct stream *s, struct op *o) {
    switch (o->type) {
    case OP_KERNEL: kernel_exec(o->fn, &o->u.k, 0, 1); break;
    case OP_COPY: copy3d(o->fn, &o->u.c, 0, 1); break;
    case OP_MEMSET: memset2d(o->fn, &o->u.m, 0); break;
    case OP_HOST: host_exec(o->u.h.fn, o->u.h.userData); break;
    case OP_FREE: free_exec(o->fn, o->u.free); break;
    case OP_RECORD: event_done(o->u.ev.e, o->u.ev.gen); break;
    case OP_WAIT:
        while (o->u.ev.e->done_gen < o->u.ev.gen && !sticky && !s->killed) pthread_cond_wait(&done_cv, &mu);
        break;
    case OP_GRAPH: graph_exec(s, o); break;
    }
}
/* drop_op discards work that will never run (sticky error, context gone). */
static void drop_op(struct op *o) {
    INC(dropped_ops);
    if (o->type == OP_RECORD) event_done(o->u.ev.e, o->u.ev.gen); /* no one waits forever */
}

static void *worker_main(void *arg) {
    struct stream *s = arg;
    LOCK();
    for (;;) {
        while (!s->head) {
            if (!s->h.alive) goto out;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            if (pthread_cond_timedwait(&s->cv, &mu, &ts) == ETIMEDOUT && !s->head) goto out;
        }
        struct op *o = s->head;
        s->head = o->next;
        if (!s->head) s->tail = NULL;
        DEC(queued_ops);
        INC(running_ops);
        if (sticky || s->killed) drop_op(o);
        else run_op(s, o);
        if (o->type == OP_GRAPH) graph_done(o);
        free(o);
        DEC(running_ops);
        s->done_seq++;
        maybe_deactivate(s);
        pthread_cond_broadcast(&done_cv);
    }
out:
    s->worker = 0;
    UNLOCK();
    return NULL;
}

static void op_init(struct op *o, int type, const char *fn) {
    memset(o, 0, sizeof *o);
    o->type = type;
    o->fn = fn;
}

/* run_or_queue runs o (the caller's) at once when s is idle and nothing is
   slowed down, or queues a copy of it (lock held). A check that fails at
   call time is returned. */
static CUresult run_or_queue(struct stream *s, struct op *o) {
    CUresult r = OK;
    int now = stream_idle(s);
    switch (o->type) {
    case OP_KERNEL:
        if ((r = kernel_check(o->fn, &o->u.k, 1))) break;
        if (now && !ATOMIC_GET(kernel_delay_us)) { r = kernel_exec(o->fn, &o->u.k, 1, 0); goto done; }
        break;
    case OP_COPY: {
        /* check at call time, without copying: a zero-delay dry run */
        memcpy3d_t dry = o->u.c;
        uintptr_t b, f;
        size_t l;
        struct alloc *a;
        if ((r = copy_side(o->fn, dry.srcMemoryType, dry.srcHost, dry.srcDevice, dry.srcXInBytes, dry.srcY, dry.srcZ,
                           dry.srcPitch, dry.srcHeight, &dry, 1, &b, &f, &l, &a)))
            break;
        if ((r = copy_side(o->fn, dry.dstMemoryType, dry.dstHost, dry.dstDevice, dry.dstXInBytes, dry.dstY, dry.dstZ,
                           dry.dstPitch, dry.dstHeight, &dry, 1, &b, &f, &l, &a)))
            break;
        if (now && !ATOMIC_GET(copy_delay_us)) { r = copy3d(o->fn, &o->u.c, 1, 0); goto done; }
        break;
    }
    case OP_MEMSET:
        if (now) { r = memset2d(o->fn, &o->u.m, 1); goto done; }
        if (o->u.m.elementSize != 1 && o->u.m.elementSize != 2 && o->u.m.elementSize != 4) { r = INVALID_VALUE; break; }
        r = check_range(o->fn, o->u.m.dst, o->u.m.width * o->u.m.elementSize, 1, NULL, NULL);
        break;
    case OP_FREE:
        if (now) { free_exec(o->fn, o->u.free); goto done; }
        break;
    case OP_RECORD:
        if (now) { event_done(o->u.ev.e, o->u.ev.gen); goto done; }
        break;
    case OP_WAIT:
        if (o->u.ev.e->done_gen >= o->u.ev.gen) goto done;
        break;
    }
    if (r) return r;
    struct op *q = malloc(sizeof *q);
    if (!q) abort();
    *q = *o;
    if ((r = enqueue(s, q))) free(q);
    return r;
done:
    return r;
}

/* ---- user objects and their destructor thread ---- */

struct uobj { struct hdr h; void *ptr; hostfn destroy; long refs; };
struct djob { hostfn fn; void *ptr; struct djob *next; };
static struct djob *dq_head, *dq_tail;
static int dthread;
static pthread_cond_t dq_cv = PTHREAD_COND_INITIALIZER;

static void *destructor_main(void *arg) {
    LOCK();
    for (;;) {
        while (!dq_head) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            if (pthread_cond_timedwait(&dq_cv, &mu, &ts) == ETIMEDOUT && !dq_head) goto out;
        }
        struct djob *j = dq_head;
        dq_head = j->next;
        if (!dq_head) dq_tail = NULL;
        UNLOCK();
        in_callback = 1;
        j->fn(j->ptr);
        in_callback = 0;
        free(j);
        LOCK();
        INC(destructors_run);
        DEC(pending_destructors);
        pthread_cond_broadcast(&done_cv);
    }
out:
    dthread = 0;
    UNLOCK();
    return NULL;
}

static void uobj_release(struct uobj *o, long n) {
    o->refs -= n;
    if (o->refs > 0) return;
    o->h.alive = 0;
    DEC(live_uobjs);
    struct djob *j = calloc(1, sizeof *j);
    if (!j) abort();
    j->fn = o->destroy; j->ptr = o->ptr;
    if (dq_tail) dq_tail->next = j; else dq_head = j;
    dq_tail = j;
    INC(pending_destructors);
    if (!dthread) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &at, destructor_main, NULL) == 0) dthread = 1;
        else abort();
        pthread_attr_destroy(&at);
    } else pthread_cond_signal(&dq_cv);
}

struct uoref { struct uobj *o; long n; };
struct uoset { struct uoref *v; int n, cap; };
static void uoset_add(struct uoset *s, struct uobj *o, long n) {
    for (int i = 0; i < s->n; i++)
        if (s->v[i].o == o) { s->v[i].n += n; return; }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (!s->v) abort();
    }
    s->v[s->n].o = o; s->v[s->n].n = n; s->n++;
}
static void uoset_release(struct uoset *s) {
    for (int i = 0; i < s->n; i++) uobj_release(s->v[i].o, s->v[i].n);
    free(s->v);
    memset(s, 0, sizeof *s);
}
/* uoset_copy gives dst its own references to everything src holds. */
static void uoset_copy(struct uoset *dst, const struct uoset *src) {
    for (int i = 0; i < src->n; i++) {
        src->v[i].o->refs += src->v[i].n;
        uoset_add(dst, src->v[i].o, src->v[i].n);
    }
}

/* ---- graphs ---- */

struct graph;
struct nparams { /* a node's parameters, as the fake keeps them */
    int type;
    union {
        struct kcall k;
        memcpy3d_t c;
        memset_params_t m;
        host_params_t h;
        struct graph *child;
        struct event *e;
        struct { struct alloc *a; pool_props_t props; } ma;
        CUdeviceptr free;
    } u;
    void *kern;         /* kernel nodes: the CUkernel field as given */
    struct ctx *ctx;    /* the context of kernel, memcpy and memset nodes */
};
struct edge { struct node *n; edge_data_t d; };
struct node {
    struct hdr h;
    struct graph *g;
    struct node *orig; /* the node this one was cloned from */
    struct nparams p;
    void *argp[4];     /* kernel nodes: kernelParams as read back */
    struct edge *in, *out;
    int nin, cin, nout, cout;
};
struct graph {
    struct hdr h;
    int embedded, memnodes, nexecs;
    struct node *owner; /* embedded graphs: the child node */
    struct node **nodes;
    int n, cap;
    struct uoset uo;
    struct marker use; /* calls in progress on it (the root graph's, for embedded ones) */
};
struct xnode {
    struct nparams p;
    struct node *src;  /* the graph's node it was made from */
    struct node *via;  /* the top-level child-graph node it came through, if any */
    int disabled;      /* cuGraphNodeSetEnabled */
};
struct plan { long refs; struct xnode *x; int n; struct uoset uo; };
struct exec {
    struct hdr h;
    struct plan *pl;
    struct graph *memsrc; /* graphs with memory nodes allow one executable at a time */
    unsigned long long flags;
    long inflight;
    struct graph *src;    /* the graph it was instantiated from */
    struct marker use;    /* calls in progress on it */
};

static CUresult graph_ctx_check(void) {
    if (stale_ctx()) { INC(no_ctx_graph_calls); return CONTEXT_IS_DESTROYED; }
    if (!have_ctx()) { INC(no_ctx_graph_calls); return INVALID_CONTEXT; }
    return OK;
}
#define GRAPH_CTX() do { CUresult g_ = graph_ctx_check(); if (g_) return g_; } while (0)

/* use_graph marks g in use by this call: the graph that owns it, for a
   graph embedded in a child node (lock held). */
static void use_graph(struct graph *g, int cap) {
    while (g->embedded && g->owner && g->owner->h.alive && g->owner->g) g = g->owner->g;
    use_mark(&g->use, "graph", g, cap);
}
/* get_graph resolves a live graph and marks it in use by this call. */
static CUresult get_graph(const char *fn, void *h, struct graph **out) {
    *out = NULL;
    struct graph *g = reg_get(h, K_GRAPH);
    if (!g || !g->h.alive) return bad_handle(fn, h, "graph", INVALID_HANDLE);
    use_graph(g, 0);
    *out = g;
    return OK;
}
/* find_node resolves a live graph node; get_node also marks its graph in
   use by this call (find_node is for calls that name a node of an
   executable's graph without touching that graph). */
static CUresult find_node(const char *fn, void *h, struct node **out) {
    *out = NULL;
    struct node *n = reg_get(h, K_NODE);
    if (!n || !n->h.alive) return bad_handle(fn, h, "graph node", INVALID_VALUE);
    *out = n;
    return OK;
}
static CUresult get_node(const char *fn, void *h, struct node **out) {
    CUresult r = find_node(fn, h, out);
    if (!r) use_graph((*out)->g, 0);
    return r;
}

static void edge_push(struct edge **v, int *n, int *cap, struct node *x, edge_data_t d) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        *v = realloc(*v, *cap * sizeof **v);
        if (!*v) abort();
    }
    (*v)[*n].n = x; (*v)[*n].d = d; (*n)++;
}
static void edge_del(struct edge *v, int *n, struct node *x) {
    for (int i = 0; i < *n; i++)
        if (v[i].n == x) { memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof *v); (*n)--; return; }
}
static int has_edge(struct node *from, struct node *to) {
    for (int i = 0; i < from->nout; i++)
        if (from->out[i].n == to) return 1;
    return 0;
}
static void add_edge(struct node *from, struct node *to, edge_data_t d) {
    edge_push(&from->out, &from->nout, &from->cout, to, d);
    edge_push(&to->in, &to->nin, &to->cin, from, d);
}
/* reaches reports whether to can be reached from from along edges. */
static int reaches(struct node *from, struct node *to, int depth) {
    if (from == to) return 1;
    if (depth > 100000) return 1;
    for (int i = 0; i < from->nout; i++)
        if (reaches(from->out[i].n, to, depth + 1)) return 1;
    return 0;
}

static struct graph *new_graph(void) {
    struct graph *g = new_obj(sizeof *g, K_GRAPH, NULL);
    return g;
}
static void graph_kill(struct graph *g);
static void node_kill(struct node *n) {
    n->h.alive = 0;
    DEC(live_nodes);
    if (n->p.type == NT_GRAPH && n->p.u.child) graph_kill(n->p.u.child);
    for (int i = 0; i < n->nin; i++) edge_del(n->in[i].n->out, &n->in[i].n->nout, n);
    for (int i = 0; i < n->nout; i++) edge_del(n->out[i].n->in, &n->out[i].n->nin, n);
    free(n->in); free(n->out);
    n->in = n->out = NULL;
    n->nin = n->nout = n->cin = n->cout = 0;
}
/* graph_kill destroys g, its nodes and embedded children, and drops the
   user-object references it held (lock held). */
static void graph_kill(struct graph *g) {
    if (!g->h.alive) return;
    g->h.alive = 0;
    if (!g->embedded) DEC(live_graphs);
    for (int i = 0; i < g->n; i++) {
        struct node *n = g->nodes[i];
        n->h.alive = 0;
        DEC(live_nodes);
        if (n->p.type == NT_GRAPH && n->p.u.child) graph_kill(n->p.u.child);
        free(n->in); free(n->out);
        n->in = n->out = NULL;
        n->nin = n->nout = 0;
    }
    free(g->nodes);
    g->nodes = NULL;
    g->n = g->cap = 0;
    uoset_release(&g->uo);
}

static void set_argp(struct node *n) {
    for (int i = 0; i < 4; i++) n->argp[i] = &n->p.u.k.a[i];
}

static struct node *graph_new_node(struct graph *g, const struct nparams *p) {
    struct node *n = new_obj(sizeof *n, K_NODE, NULL);
    n->g = g;
    n->p = *p;
    if (p->type == NT_KERNEL) set_argp(n);
    if (p->type == NT_GRAPH) p->u.child->owner = n;
    if (g->n == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 8;
        g->nodes = realloc(g->nodes, g->cap * sizeof *g->nodes);
        if (!g->nodes) abort();
    }
    g->nodes[g->n++] = n;
    INC(live_nodes);
    return n;
}

/* clone_graph deep-copies g (lock held): nodes in the same order, each
   remembering its original, edges, embedded children, user objects. */
static struct graph *clone_graph(struct graph *g, int embedded) {
    struct graph *c = new_graph();
    c->embedded = embedded;
    c->memnodes = g->memnodes;
    if (!embedded) INC(live_graphs);
    for (int i = 0; i < g->n; i++) {
        struct nparams p = g->nodes[i]->p;
        if (p.type == NT_GRAPH) p.u.child = clone_graph(p.u.child, 1);
        struct node *n = graph_new_node(c, &p);
        n->orig = g->nodes[i];
    }
    for (int i = 0; i < g->n; i++) {
        struct node *o = g->nodes[i];
        for (int j = 0; j < o->nout; j++) {
            int k = 0;
            while (k < g->n && g->nodes[k] != o->out[j].n) k++;
            if (k < g->n) add_edge(c->nodes[i], c->nodes[k], o->out[j].d);
        }
    }
    uoset_copy(&c->uo, &g->uo);
    return c;
}

/* topo writes g's nodes in a topological order; -1 on a cycle. */
static int topo(struct graph *g, struct node **order) {
    int *indeg = calloc(g->n + 1, sizeof *indeg), head = 0, tail = 0;
    if (!indeg) abort();
    for (int i = 0; i < g->n; i++) {
        indeg[i] = g->nodes[i]->nin;
        if (!indeg[i]) order[tail++] = g->nodes[i];
    }
    while (head < tail) {
        struct node *n = order[head++];
        for (int j = 0; j < n->nout; j++) {
            int k = 0;
            while (k < g->n && g->nodes[k] != n->out[j].n) k++;
            if (k < g->n && --indeg[k] == 0) order[tail++] = g->nodes[k];
        }
    }
    free(indeg);
    return tail == g->n ? tail : -1;
}

static void plan_push(struct plan *pl, int *cap, const struct nparams *p, struct node *src, struct node *via) {
    if (pl->n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        pl->x = realloc(pl->x, *cap * sizeof *pl->x);
        if (!pl->x) abort();
    }
    memset(&pl->x[pl->n], 0, sizeof pl->x[pl->n]);
    pl->x[pl->n].p = *p;
    pl->x[pl->n].src = src;
    pl->x[pl->n].via = via;
    pl->n++;
}
/* flatten appends g's nodes in a topological order, child graphs inlined,
   and takes references to the user objects g and its children hold. */
static int flatten(struct graph *g, struct plan *pl, int *cap, struct node *via) {
    struct node **order = malloc((g->n + 1) * sizeof *order);
    if (!order) abort();
    if (topo(g, order) < 0) { free(order); return -1; }
    for (int i = 0; i < g->n; i++) {
        struct node *n = order[i];
        if (n->p.type == NT_GRAPH) {
            if (flatten(n->p.u.child, pl, cap, via ? via : n) < 0) { free(order); return -1; }
        } else plan_push(pl, cap, &n->p, n, via);
    }
    free(order);
    uoset_copy(&pl->uo, &g->uo);
    return 0;
}
static struct plan *make_plan(struct graph *g) {
    struct plan *pl = calloc(1, sizeof *pl);
    if (!pl) abort();
    int cap = 0;
    pl->refs = 1;
    if (flatten(g, pl, &cap, NULL) < 0) {
        uoset_release(&pl->uo);
        free(pl->x);
        free(pl);
        return NULL;
    }
    return pl;
}
static void plan_unref(struct plan *pl) {
    if (--pl->refs > 0) return;
    uoset_release(&pl->uo);
    free(pl->x);
    free(pl);
}
/* plan_copy makes a private copy of pl, for a change that must not touch
   launches in flight. */
static struct plan *plan_copy(struct plan *pl) {
    struct plan *c = calloc(1, sizeof *c);
    if (!c) abort();
    c->refs = 1;
    c->n = pl->n;
    c->x = malloc((pl->n + 1) * sizeof *c->x);
    if (!c->x) abort();
    memcpy(c->x, pl->x, pl->n * sizeof *c->x);
    uoset_copy(&c->uo, &pl->uo);
    return c;
}

static const char *node_fn[] = {"graph kernel node", "graph memcpy node", "graph memset node", "graph host node",
                                "graph child node", "graph empty node", "graph event wait node",
                                "graph event record node", "?", "?", "graph mem alloc node", "graph mem free node"};

static void graph_exec(struct stream *s, struct op *o) {
    struct plan *pl = o->u.g.pl;
    if (o->u.g.autofree)
        for (int i = 0; i < pl->n; i++)
            if (pl->x[i].p.type == NT_MEM_ALLOC && pl->x[i].p.u.ma.a->live) kill_alloc(pl->x[i].p.u.ma.a);
    for (int i = 0; i < pl->n; i++) {
        if (sticky || s->killed) { INC(dropped_ops); break; }
        struct xnode *x = &pl->x[i];
        const char *fn = node_fn[x->p.type];
        if (x->disabled) continue;
        if (mgraph_node_runs(fn, &x->p)) continue;
        switch (x->p.type) {
        case NT_KERNEL: kernel_exec(fn, &x->p.u.k, 0, 1); break;
        case NT_MEMCPY: copy3d(fn, &x->p.u.c, 0, 1); break;
        case NT_MEMSET: memset2d(fn, &x->p.u.m, 0); break;
        case NT_HOST: host_exec(x->p.u.h.fn, x->p.u.h.userData); break;
        case NT_EVENT_RECORD:
            if (!x->p.u.e->h.alive) bad_handle(fn, x->p.u.e, "event", INVALID_HANDLE);
            event_done(x->p.u.e, o->u.g.gens[i]);
            break;
        case NT_WAIT_EVENT:
            if (!x->p.u.e->h.alive) { bad_handle(fn, x->p.u.e, "event", INVALID_HANDLE); break; }
            while (x->p.u.e->done_gen < o->u.g.gens[i] && !sticky && !s->killed) pthread_cond_wait(&done_cv, &mu);
            break;
        case NT_MEM_ALLOC: {
            struct alloc *a = x->p.u.ma.a;
            a->alloc_pending = 0;
            if (a->live) bad_ptr(fn, a->base, a->size, "graph allocation still live at its alloc node");
            else make_live(a);
            break;
        }
        case NT_MEM_FREE: free_exec(fn, x->p.u.free); break;
        }
    }
}
static void graph_done(struct op *o) {
    struct plan *pl = o->u.g.pl;
    for (int i = 0; i < pl->n; i++)
        if (pl->x[i].p.type == NT_EVENT_RECORD) event_done(pl->x[i].p.u.e, o->u.g.gens[i]);
        else if (pl->x[i].p.type == NT_MEM_ALLOC) pl->x[i].p.u.ma.a->alloc_pending = 0;
    o->u.g.x->inflight--;
    plan_unref(pl);
    free(o->u.g.gens);
}

/* ---- stream capture ---- */

struct capture {
    int status; /* 1 active, 2 invalidated, 0 over (CUstreamCaptureStatus while it lasts) */
    int mode, owns_graph;
    struct graph *g;
    unsigned long long id;
    pthread_t thread; /* began it: global and thread-local captures end there */
    struct stream *origin;
    struct ctx *ctx;
    struct capture *next; /* the list of captures in progress */
};
enum { CM_GLOBAL = 0, CM_THREAD_LOCAL = 1, CM_RELAXED = 2 };
static struct capture *captures;
static __thread int thread_capture_mode; /* cuThreadExchangeStreamCaptureMode; CM_GLOBAL at first */

static void deps_reserve(struct node ***v, int *cap, int n, edge_data_t **zeros) {
    if (n <= *cap) return;
    *cap = n + 8;
    *v = realloc(*v, *cap * sizeof **v);
    if (!*v) abort();
    if (zeros) {
        free(*zeros);
        *zeros = calloc(*cap, sizeof **zeros);
        if (!*zeros) abort();
    }
}
static void sdeps_set(struct stream *s, struct node *const *v, int n) {
    deps_reserve(&s->cdeps, &s->ccdeps, n, &s->cedges);
    if (n) memcpy(s->cdeps, v, n * sizeof *v);
    s->ncdeps = n;
}
static void sdeps_add(struct stream *s, struct node *x) {
    for (int i = 0; i < s->ncdeps; i++)
        if (s->cdeps[i] == x) return;
    deps_reserve(&s->cdeps, &s->ccdeps, s->ncdeps + 1, &s->cedges);
    s->cdeps[s->ncdeps++] = x;
}
static void capture_invalidate(struct capture *c) {
    if (c->status == 1) c->status = 2;
}
/* capture_finish ends c: its streams stop capturing (lock held). */
static void capture_finish(struct capture *c) {
    c->status = 0;
    for (struct capture **pp = &captures; *pp; pp = &(*pp)->next)
        if (*pp == c) { *pp = c->next; break; }
    for (struct stream *x = active_streams; x; x = x->anext)
        if (x->cap == c) { x->cap = NULL; x->ncdeps = 0; }
}
static void graph_kill(struct graph *g);
/* capture_abandon takes s out of its capture when s dies; a capture whose
   stream of origin dies is over, its new graph destroyed. */
static void capture_abandon(struct stream *s) {
    struct capture *c = s->cap;
    if (!c) return;
    capture_invalidate(c);
    if (c->origin == s) {
        capture_finish(c);
        if (c->owns_graph) graph_kill(c->g);
    }
    s->cap = NULL;
    s->ncdeps = 0;
}
/* capture_unsafe refuses a potentially unsafe call (allocation, free,
   synchronous copy, context sync, and a stream's or an event's query or
   wait) that the capture modes prohibit on the calling thread, and
   invalidates the captures that prohibit it, as the driver does (seen on
   an H200: tests/libcuda/capture_global_calls.c) (lock held). */
static CUresult capture_unsafe(const char *fn) {
    if (thread_capture_mode == CM_RELAXED) return OK;
    CUresult r = OK;
    for (struct capture *c = captures; c; c = c->next) {
        if (c->mode == CM_RELAXED) continue;
        if (pthread_equal(c->thread, pthread_self()) || (thread_capture_mode == CM_GLOBAL && c->mode == CM_GLOBAL)) {
            if (!r) note_bad("potentially unsafe call during stream capture", fn, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
            capture_invalidate(c);
            r = CAPTURE_UNSUPPORTED;
        }
    }
    return r;
}
/* capture_sync refuses to synchronise with work being captured in c's
   context, and invalidates those captures, as the driver does. */
static CUresult capture_sync(struct ctx *c) {
    CUresult r = OK;
    for (struct capture *k = captures; k; k = k->next)
        if (k->ctx == c) { capture_invalidate(k); r = CAPTURE_UNSUPPORTED; }
    return r;
}
static struct node *graph_new_node(struct graph *g, const struct nparams *p);
static void add_edge(struct node *from, struct node *to, edge_data_t d);
/* capture_add puts a node for work queued on a captured stream into the
   capture's graph, after the stream's dependencies (lock held). */
static CUresult capture_add(struct stream *s, struct nparams *p, struct node **out) {
    struct capture *c = s->cap;
    if (c->status != 1) return CAPTURE_INVALIDATED;
    if (!c->g->h.alive) { capture_invalidate(c); return CAPTURE_INVALIDATED; }
    use_graph(c->g, 1);
    struct node *n = graph_new_node(c->g, p);
    edge_data_t zero;
    memset(&zero, 0, sizeof zero);
    for (int i = 0; i < s->ncdeps; i++)
        if (s->cdeps[i]->h.alive && s->cdeps[i]->g == c->g) add_edge(s->cdeps[i], n, zero);
    sdeps_set(s, &n, 1);
    if (out) *out = n;
    return OK;
}
static CUresult prep_kernel(const char *fn, const kernel_params_t *kp, struct nparams *p, struct ctx *defctx);
static CUresult prep_memcpy(const char *fn, const memcpy3d_t *c, void *hctx, struct nparams *p);
static CUresult prep_memset(const char *fn, const memset_params_t *m, void *hctx, struct nparams *p);
static CUresult prep_host(const host_params_t *h, struct nparams *p);
static CUresult prep_event(const char *fn, int type, void *he, struct nparams *p);
static CUresult prep_alloc(struct graph *g, mem_alloc_params_t *mp, struct nparams *p, struct ctx *c);
static CUresult prep_free(const char *fn, struct graph *g, CUdeviceptr d, struct nparams *p);

/* ============================================================
 * Controls and counters for tests (see MODEL.md)
 * ============================================================ */

long fake_live_allocations(void) { return ATOMIC_GET(live_allocs); }
long fake_live_contexts(void) { return ATOMIC_GET(live_contexts); }
/* fake_context_alive reports whether context handle h is live (1) or
   destroyed or unknown (0), without counting a bad use: for tests that
   check one context's release while others' may still be under way. */
long fake_context_alive(void *h) {
    LOCK();
    struct ctx *x = get_ctx(h);
    long alive = x && x->h.alive;
    UNLOCK();
    return alive;
}
long fake_live_modules(void) { return ATOMIC_GET(live_modules); }
long fake_live_libraries(void) { return ATOMIC_GET(live_libraries); }
long fake_host_calls(void) { return ATOMIC_GET(host_calls); }
long fake_live_streams(void) { return ATOMIC_GET(live_streams); }
long fake_live_events(void) { return ATOMIC_GET(live_events); }
long fake_live_pools(void) { return ATOMIC_GET(live_pools); }
long fake_live_registrations(void) { return ATOMIC_GET(live_regs); }
long fake_live_host_allocs(void) { return ATOMIC_GET(live_host_allocs); }
long fake_live_graphs(void) { return ATOMIC_GET(live_graphs); }
long fake_live_execs(void) { return ATOMIC_GET(live_execs); }
long fake_live_nodes(void) { return ATOMIC_GET(live_nodes); }
long fake_live_user_objects(void) { return ATOMIC_GET(live_uobjs); }
long fake_destructors_run(void) { return ATOMIC_GET(destructors_run); }
long fake_pending_destructors(void) { return ATOMIC_GET(pending_destructors); }
long fake_queued_ops(void) { return ATOMIC_GET(queued_ops) + ATOMIC_GET(running_ops); }
long fake_dropped_ops(void) { return ATOMIC_GET(dropped_ops); }
long fake_bad_ptr_uses(void) { return ATOMIC_GET(bad_ptr_uses); }
long fake_bad_handle_uses(void) { return ATOMIC_GET(bad_handle_uses); }
long fake_no_ctx_graph_calls(void) { return ATOMIC_GET(no_ctx_graph_calls); }
long fake_callback_cuda_calls(void) { return ATOMIC_GET(callback_cuda_calls); }
long fake_concurrent_graph_calls(void) { return ATOMIC_GET(concurrent_graph_calls); }
long fake_live_bytes(void) { LOCK(); long n = (long)live_bytes; UNLOCK(); return n; }

/* fake_last_bad_use describes the latest bad use ("" if none since reset). */
const char *fake_last_bad_use(void) {
    LOCK();
    memcpy(last_bad_out, last_bad, sizeof last_bad_out);
    UNLOCK();
    return last_bad_out;
}

void fake_reset_counters(void) {
    LOCK();
    __atomic_store_n(&bad_ptr_uses, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&bad_handle_uses, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&no_ctx_graph_calls, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&callback_cuda_calls, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&dropped_ops, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&concurrent_graph_calls, 0, __ATOMIC_SEQ_CST);
    last_bad[0] = 0;
    UNLOCK();
}

void fake_set_copy_delay_us(long us) { __atomic_store_n(&copy_delay_us, us, __ATOMIC_SEQ_CST); }
void fake_set_kernel_delay_us(long us) { __atomic_store_n(&kernel_delay_us, us, __ATOMIC_SEQ_CST); }
/* fake_set_graph_call_delay_us: every call that marks a graph or an
   executable in use sleeps this long before it returns, holding the mark
   but not the global lock, so that concurrent calls are seen. */
void fake_set_graph_call_delay_us(long us) { __atomic_store_n(&graph_call_delay_us, us, __ATOMIC_SEQ_CST); }

/* fake_fail_calls makes calls of fn (its base name, "cuMemFree_v2" and
   "cuMemFree" alike) return code without doing anything: after skip calls
   that succeed, the next times calls fail (times < 0: until cleared). */
void fake_fail_calls(const char *fn, int code, int skip, int times) {
    char name[64];
    base_name(name, sizeof name, fn);
    pthread_mutex_lock(&fail_mu);
    for (int i = 0; i < 32; i++) {
        struct failure *f = &failures[i];
        if (f->times != 0 && strcmp(f->name, name) != 0) continue;
        if (f->times == 0 && times != 0) INC(fail_armed);
        if (f->times != 0 && times == 0) DEC(fail_armed);
        snprintf(f->name, sizeof f->name, "%s", name);
        f->code = code; f->skip = skip; f->times = times;
        break;
    }
    pthread_mutex_unlock(&fail_mu);
}
void fake_fail_next(const char *fn, int code) { fake_fail_calls(fn, code, 0, 1); }
void fake_fail_clear(void) {
    pthread_mutex_lock(&fail_mu);
    for (int i = 0; i < 32; i++)
        if (failures[i].times != 0) { failures[i].times = 0; DEC(fail_armed); }
    pthread_mutex_unlock(&fail_mu);
}

void fake_set_sticky_error(int code) {
    LOCK();
    sticky = code;
    pthread_cond_broadcast(&done_cv);
    UNLOCK();
}
void fake_clear_sticky_error(void) { fake_set_sticky_error(0); }

/* fake_quiesce waits up to timeout_ms for every queue to drain and every
   pending destructor to run; it returns 1 if that happened. */
int fake_quiesce(long timeout_ms) {
    double end = now_ms() + timeout_ms;
    LOCK();
    for (;;) {
        int busy = ATOMIC_GET(pending_destructors) > 0;
        for (struct stream *s = active_streams; s && !busy; s = s->anext)
            if (!stream_idle(s)) busy = 1;
        if (!busy) { UNLOCK(); return 1; }
        if (now_ms() >= end) { UNLOCK(); return 0; }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&done_cv, &mu, &ts);
    }
}

/* fake_check_device, for fakenccl (internal/ncclraw/testdata/fakenccl.c),
   whose collectives run as host functions: it counts a bad pointer use,
   named fn, unless [p, p+n) lies in one live allocation, and returns 0 when
   it does. */
int fake_check_device(const char *fn, unsigned long long p, size_t n) {
    if (!n) return 0;
    LOCK();
    CUresult r = check_range(fn, p, n, 0, NULL, NULL);
    UNLOCK();
    return r != OK;
}

/* Host functions for tests, usable as CUhostFn and as user-object
   destructors: fake_count_fn adds one to slot (uintptr_t)data % 64;
   fake_log_fn appends (uintptr_t)data to a log (order checks). */
static long hostfn_slots[64];
static long hostfn_log[4096];
static long hostfn_log_len;
void fake_count_fn(void *data) { INC(hostfn_slots[(uintptr_t)data % 64]); }
long fake_count(long slot) { return ATOMIC_GET(hostfn_slots[slot % 64]); }
void fake_log_fn(void *data) {
    long i = INC(hostfn_log_len) - 1;
    if (i < 4096) __atomic_store_n(&hostfn_log[i], (long)(uintptr_t)data, __ATOMIC_SEQ_CST);
}
long fake_log_len(void) { return ATOMIC_GET(hostfn_log_len); }
long fake_log_at(long i) { return i >= 0 && i < 4096 ? ATOMIC_GET(hostfn_log[i]) : -1; }
/* fake_cuda_fn calls cuCtxSynchronize from the callback, which a host
   function must not do: the fake refuses it and counts it. */
CUresult cuCtxSynchronize(void);
void fake_cuda_fn(void *data) { (void)cuCtxSynchronize(); }
/* fake_gate_fn holds its stream until fake_open_gate(slot) is called for
   slot (uintptr_t)data % 64 (fake_close_gate closes it again): work queued
   behind it stays queued for as long as a test needs, with no timing. */
static long gates_open[64];
void fake_gate_fn(void *data) {
    while (!ATOMIC_GET(gates_open[(uintptr_t)data % 64])) sleep_us(200);
}
void fake_open_gate(long slot) { __atomic_store_n(&gates_open[slot % 64], 1, __ATOMIC_SEQ_CST); }
void fake_close_gate(long slot) { __atomic_store_n(&gates_open[slot % 64], 0, __ATOMIC_SEQ_CST); }
void fake_reset_log(void) {
    __atomic_store_n(&hostfn_log_len, 0, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 64; i++) __atomic_store_n(&hostfn_slots[i], 0, __ATOMIC_SEQ_CST);
}

__attribute__((constructor)) static void fake_init(void) {
    const char *e;
    if ((e = getenv("FAKE_COPY_DELAY_US"))) copy_delay_us = atol(e);
    if ((e = getenv("FAKE_KERNEL_DELAY_US"))) kernel_delay_us = atol(e);
    if ((e = getenv("FAKE_GRAPH_CALL_DELAY_US"))) graph_call_delay_us = atol(e);
    verbose = getenv("FAKE_VERBOSE") != NULL;
    arena_init();
    primary = new_obj(sizeof *primary, K_CTX, NULL);
    primary->h.alive = 0;
    primary->primary = 1;
    primary->h.ctx = primary;
    default_pool = new_obj(sizeof *default_pool, K_POOL, NULL);
    default_pool->is_default = 1;
    default_pool->reuse[0] = default_pool->reuse[1] = default_pool->reuse[2] = 1;
    device_pool = default_pool;
    pool_list_add(default_pool);
}

/* ============================================================
 * Initialisation and devices
 * ============================================================ */

CUresult cuInit(unsigned flags) { ENTER("cuInit"); return flags ? INVALID_VALUE : OK; }
CUresult cuDriverGetVersion(int *v) { ENTER("cuDriverGetVersion"); if (!v) return INVALID_VALUE; *v = 13000; return OK; }
CUresult cuDeviceGetCount(int *n) { ENTER("cuDeviceGetCount"); *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int ordinal) {
    ENTER("cuDeviceGet");
    if (ordinal != 0) return INVALID_DEVICE;
    *d = 0;
    return OK;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    ENTER("cuDeviceGetAttribute");
    if (dev != 0) return INVALID_DEVICE;
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
CUresult cuDeviceGetName(char *name, int len, int dev) {
    ENTER("cuDeviceGetName");
    if (dev != 0) return INVALID_DEVICE;
    strncpy(name, "Fake GPU", len);
    return OK;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) {
    ENTER("cuDeviceTotalMem");
    if (dev != 0) return INVALID_DEVICE;
    *bytes = TOTAL_MEM;
    return OK;
}
CUresult cuDeviceGetUuid_v2(unsigned char *uuid, int dev) {
    ENTER("cuDeviceGetUuid");
    if (dev != 0) return INVALID_DEVICE;
    for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(0xfa + i);
    return OK;
}
CUresult cuDeviceGetUuid(unsigned char *uuid, int dev) { return cuDeviceGetUuid_v2(uuid, dev); }
CUresult cuDeviceGetPCIBusId(char *bus, int len, int dev) {
    ENTER("cuDeviceGetPCIBusId");
    if (dev != 0) return INVALID_DEVICE;
    if (len <= 0) return INVALID_VALUE;
    snprintf(bus, len, "0000:fa:00.0");
    return OK;
}
CUresult cuDeviceGetByPCIBusId(int *dev, const char *bus) {
    ENTER("cuDeviceGetByPCIBusId");
    if (!bus || (strcasecmp(bus, "0000:fa:00.0") != 0 && strcasecmp(bus, "fa:00.0") != 0)) return INVALID_DEVICE;
    *dev = 0;
    return OK;
}
CUresult cuDeviceCanAccessPeer(int *can, int dev, int peer) {
    ENTER("cuDeviceCanAccessPeer");
    if (dev != 0 || peer != 0) return INVALID_DEVICE;
    *can = 0;
    return OK;
}
CUresult cuDeviceGetExecAffinitySupport(int *pi, int type, int dev) {
    ENTER("cuDeviceGetExecAffinitySupport");
    *pi = 0;
    return OK;
}
CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) {
    ENTER("cuDevicePrimaryCtxGetState");
    if (dev != 0) return INVALID_DEVICE;
    LOCK();
    *flags = primary_flags;
    *active = primary->h.alive;
    UNLOCK();
    return OK;
}
CUresult cuDevicePrimaryCtxSetFlags_v2(int dev, unsigned flags) {
    ENTER("cuDevicePrimaryCtxSetFlags");
    if (dev != 0) return INVALID_DEVICE;
    LOCK();
    primary_flags = flags;
    UNLOCK();
    return OK;
}

/* ============================================================
 * Contexts
 * ============================================================ */

/* kill_ctx destroys c and everything made in it (lock held). */
static void kill_ctx(struct ctx *c) {
    c->h.alive = 0;
    DEC(live_contexts);
    for (size_t i = 0; i < reg_cap; i++) {
        struct hdr *o = reg_tab[i];
        if (!o || o->ctx != c || !o->alive || o == &c->h) continue;
        switch (o->kind) {
        case K_STREAM: {
            struct stream *s = (struct stream *)o;
            s->h.alive = 0;
            s->killed = 1;
            capture_abandon(s);
            if (!s->special) DEC(live_streams);
            pthread_cond_signal(&s->cv);
            maybe_deactivate(s);
            break;
        }
        case K_EVENT: o->alive = 0; DEC(live_events); break;
        case K_MODULE: {
            struct module *m = (struct module *)o;
            m->h.alive = 0;
            for (int k = 0; k < NK; k++) m->f[k].h.alive = 0;
            if (m->global && m->global->live) kill_alloc(m->global);
            DEC(live_modules);
            break;
        }
        default: break;
        }
    }
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i]->ctx == c && allocs[i]->live && allocs[i]->kind != A_GRAPH) kill_alloc(allocs[i]);
    c->legacy = NULL;
    pthread_cond_broadcast(&done_cv);
}
static void kill_registrations(struct ctx *c);

CUresult cuDevicePrimaryCtxRetain(struct ctx **c, int dev) {
    ENTER("cuDevicePrimaryCtxRetain");
    if (dev != 0) return INVALID_DEVICE;
    LOCK();
    if (primary_refs++ == 0) { primary->h.alive = 1; primary->id = next_id++; INC(live_contexts); }
    *c = primary;
    UNLOCK();
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
    ENTER("cuDevicePrimaryCtxRelease");
    if (dev != 0) return INVALID_DEVICE;
    LOCK();
    if (primary_refs == 0) {
        CUresult r = bad_handle("cuDevicePrimaryCtxRelease", primary, "primary context (released more often than retained)",
                                INVALID_CONTEXT);
        UNLOCK();
        return r;
    }
    if (--primary_refs == 0) { kill_registrations(primary); kill_ctx(primary); }
    UNLOCK();
    return OK;
}
CUresult cuDevicePrimaryCtxReset_v2(int dev) {
    ENTER("cuDevicePrimaryCtxReset");
    if (dev != 0) return INVALID_DEVICE;
    LOCK();
    if (primary->h.alive) {
        kill_registrations(primary);
        kill_ctx(primary);
        primary->h.alive = 1; /* the handle stays valid while retained */
        primary->id = next_id++;
        INC(live_contexts);
    }
    UNLOCK();
    return OK;
}

static CUresult ctx_create(struct ctx **c, unsigned flags, int dev) {
    if (dev != 0) return INVALID_DEVICE;
    if (depth == 16) return 2;
    LOCK();
    struct ctx *n = new_obj(sizeof *n, K_CTX, NULL);
    n->h.ctx = n;
    n->flags = flags;
    n->id = next_id++;
    INC(live_contexts);
    UNLOCK();
    below[depth++] = current; /* cuCtxCreate pushes the new context */
    current = n;
    *c = n;
    return OK;
}
CUresult cuCtxCreate_v4(struct ctx **c, void *params, unsigned flags, int dev) {
    ENTER("cuCtxCreate");
    return ctx_create(c, flags, dev);
}
CUresult cuCtxCreate_v3(struct ctx **c, void *affinity, int n, unsigned flags, int dev) {
    ENTER("cuCtxCreate");
    return ctx_create(c, flags, dev);
}
CUresult cuCtxCreate_v2(struct ctx **c, unsigned flags, int dev) {
    ENTER("cuCtxCreate");
    return ctx_create(c, flags, dev);
}
CUresult cuCtxDestroy_v2(struct ctx *c) {
    ENTER("cuCtxDestroy");
    LOCK();
    struct ctx *x = get_ctx(c);
    if (!x || !x->h.alive) {
        CUresult r = bad_handle("cuCtxDestroy", c, "context", INVALID_CONTEXT);
        UNLOCK();
        return r;
    }
    kill_registrations(x);
    kill_ctx(x); /* kept allocated: a stale handle must stay detectable */
    UNLOCK();
    if (current == c) current = depth ? below[--depth] : NULL;
    return OK;
}
CUresult cuCtxPushCurrent_v2(struct ctx *c) {
    ENTER("cuCtxPushCurrent");
    LOCK();
    struct ctx *x = get_ctx(c);
    CUresult r = !x || !x->h.alive ? bad_handle("cuCtxPushCurrent", c, "context", INVALID_CONTEXT) : OK;
    UNLOCK();
    if (r) return r;
    if (depth == 16) return 2;
    below[depth++] = current;
    current = c;
    return OK;
}
CUresult cuCtxPopCurrent_v2(struct ctx **c) {
    ENTER("cuCtxPopCurrent");
    if (!current) return INVALID_CONTEXT;
    if (c) *c = current;
    current = depth ? below[--depth] : NULL;
    return OK;
}
CUresult cuCtxSetCurrent(struct ctx *c) {
    ENTER("cuCtxSetCurrent");
    if (!c) { /* NULL pops the top of the stack */
        current = depth ? below[--depth] : NULL;
        return OK;
    }
    LOCK();
    struct ctx *x = get_ctx(c);
    CUresult r = !x || !x->h.alive ? bad_handle("cuCtxSetCurrent", c, "context", INVALID_CONTEXT) : OK;
    UNLOCK();
    if (r) return r;
    current = c;
    return OK;
}
CUresult cuCtxGetCurrent(struct ctx **c) { ENTER("cuCtxGetCurrent"); *c = current; return OK; }
CUresult cuCtxGetDevice(int *dev) { ENTER("cuCtxGetDevice"); NEED_CTX(); *dev = 0; return OK; }
CUresult cuCtxGetDevice_v2(int *dev, struct ctx *c) {
    ENTER("cuCtxGetDevice");
    if (!c) return cuCtxGetDevice(dev);
    LOCK();
    struct ctx *x = get_ctx(c);
    CUresult r = !x || !x->h.alive ? bad_handle("cuCtxGetDevice", c, "context", INVALID_CONTEXT) : OK;
    UNLOCK();
    if (!r) *dev = 0;
    return r;
}
CUresult cuCtxGetId(struct ctx *c, unsigned long long *id) {
    ENTER("cuCtxGetId");
    LOCK();
    struct ctx *x = c ? get_ctx(c) : current;
    CUresult r = !x || !x->h.alive ? bad_handle("cuCtxGetId", c, "context", INVALID_CONTEXT) : OK;
    if (!r) *id = x->id;
    UNLOCK();
    return r;
}
CUresult cuCtxGetFlags(unsigned *flags) {
    ENTER("cuCtxGetFlags");
    NEED_CTX();
    *flags = current->primary ? primary_flags : current->flags;
    return OK;
}
CUresult cuCtxGetApiVersion(struct ctx *c, unsigned *v) { ENTER("cuCtxGetApiVersion"); *v = 13000; return OK; }
CUresult cuCtxSynchronize(void) {
    ENTER("cuCtxSynchronize");
    NEED_CTX();
    LOCK();
    CUresult r = capture_sync(current);
    if (!r) r = ctx_sync(current);
    UNLOCK();
    return r;
}
CUresult cuCtxSynchronize_v2(struct ctx *c) {
    ENTER("cuCtxSynchronize");
    LOCK();
    struct ctx *x = get_ctx(c);
    CUresult r = !x || !x->h.alive ? bad_handle("cuCtxSynchronize", c, "context", INVALID_CONTEXT) : capture_sync(x);
    if (!r) r = ctx_sync(x);
    UNLOCK();
    return r;
}
CUresult cuCtxGetLimit(size_t *v, int limit) {
    ENTER("cuCtxGetLimit");
    NEED_CTX();
    if (limit < 0 || limit >= 16) return INVALID_VALUE;
    LOCK();
    *v = current->limits[limit] ? current->limits[limit] : 1024;
    UNLOCK();
    return OK;
}
CUresult cuCtxSetLimit(int limit, size_t v) {
    ENTER("cuCtxSetLimit");
    NEED_CTX();
    if (limit < 0 || limit >= 16) return INVALID_VALUE;
    LOCK();
    current->limits[limit] = v;
    UNLOCK();
    return OK;
}
CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    ENTER("cuCtxGetStreamPriorityRange");
    NEED_CTX();
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return OK;
}
/* Peer access: one device, so no other context is a peer (as
   cuDeviceCanAccessPeer says). */
static CUresult peer_check(const char *fn, struct ctx *peer) {
    NEED_CTX();
    LOCK();
    struct ctx *x = get_ctx(peer);
    CUresult r = !x || !x->h.alive ? bad_handle(fn, peer, "context", INVALID_CONTEXT) : OK;
    UNLOCK();
    if (!r && x == current) r = INVALID_CONTEXT;
    return r;
}
CUresult cuCtxEnablePeerAccess(struct ctx *peer, unsigned flags) {
    ENTER("cuCtxEnablePeerAccess");
    CUresult r = peer_check("cuCtxEnablePeerAccess", peer);
    if (!r && flags) r = INVALID_VALUE;
    return r ? r : 217; /* CUDA_ERROR_PEER_ACCESS_UNSUPPORTED */
}
CUresult cuCtxDisablePeerAccess(struct ctx *peer) {
    ENTER("cuCtxDisablePeerAccess");
    CUresult r = peer_check("cuCtxDisablePeerAccess", peer);
    return r ? r : 705; /* CUDA_ERROR_PEER_ACCESS_NOT_ENABLED */
}
CUresult cuCtxGetExecAffinity(void *p, int type) { ENTER("cuCtxGetExecAffinity"); NEED_CTX(); return NOT_SUPPORTED; }
CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
    ENTER("cuMemGetInfo");
    NEED_CTX();
    LOCK();
    *total = TOTAL_MEM;
    *free_ = live_bytes < TOTAL_MEM ? TOTAL_MEM - live_bytes : 0;
    UNLOCK();
    return OK;
}

/* ============================================================
 * Memory
 * ============================================================ */

static CUresult alloc_in(struct ctx *c, size_t n, int kind, CUdeviceptr *p, struct alloc **out) {
    if (n == 0) return INVALID_VALUE;
    if (!p) return INVALID_VALUE;
    if (n > ((size_t)1 << 40) || (kind != A_HOST && live_bytes + n > TOTAL_MEM)) return OUT_OF_MEMORY;
    struct alloc *a = new_alloc(n, kind, c);
    if (!a) return OUT_OF_MEMORY;
    make_live(a);
    *p = a->base;
    if (out) *out = a;
    return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    ENTER("cuMemAlloc");
    NEED_CTX();
    LOCK();
    CUresult r = capture_unsafe("cuMemAlloc");
    if (!r) r = alloc_in(current, n, A_DEV, p, NULL);
    UNLOCK();
    return r;
}
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags) {
    ENTER("cuMemAllocManaged");
    NEED_CTX();
    if (flags != 1 && flags != 2) return INVALID_VALUE; /* CU_MEM_ATTACH_GLOBAL or _HOST */
    LOCK();
    CUresult r = capture_unsafe("cuMemAllocManaged");
    if (!r) r = alloc_in(current, n, A_MANAGED, p, NULL);
    UNLOCK();
    return r;
}
CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags) {
    ENTER("cuMemHostAlloc");
    NEED_CTX();
    if (flags & ~7u) return INVALID_VALUE;
    CUdeviceptr p = 0;
    LOCK();
    CUresult r = capture_unsafe("cuMemHostAlloc");
    if (!r) r = alloc_in(current, n, A_HOST, &p, NULL);
    UNLOCK();
    if (!r) *pp = (void *)(uintptr_t)p;
    return r;
}
CUresult cuMemAllocHost_v2(void **pp, size_t n) {
    ENTER("cuMemAllocHost");
    return cuMemHostAlloc(pp, n, 0);
}
CUresult cuMemFreeHost(void *p) {
    ENTER("cuMemFreeHost");
    LOCK();
    struct alloc *a = find_alloc((uintptr_t)p);
    CUresult r = capture_unsafe("cuMemFreeHost");
    if (!r && (!a || a->kind != A_HOST || a->base != (uintptr_t)p || !a->live)
)
        r = bad_ptr("cuMemFreeHost", (uintptr_t)p, 0, a && a->kind == A_HOST ? "freed host memory" : "not pinned host memory");
    else if (!r) kill_alloc(a);
    UNLOCK();
    return r;
}

/* free_now frees a for cuMemFree (lock held). Ordinary memory waits for the
   work queued in its context before the call, as the driver synchronises;
   stream-ordered and graph memory goes at once. */
static CUresult free_now(const char *fn, CUdeviceptr p, int kind_ok(int)) {
    struct alloc *a = find_alloc((uintptr_t)p);
    if (!a || a->base != p || !kind_ok(a->kind)) return bad_ptr(fn, p, 0, "not the base of an allocation");
    if (!a->live) return bad_ptr(fn, p, 0, "freed memory (double free)");
    if (a->free_pending) return bad_ptr(fn, p, 0, "memory whose stream-ordered free is queued (double free)");
    if (ipc_free_import(a)) return OK; /* an imported pointer: the exporter's memory stays */
    if (!a->stream_ordered && a->kind != A_GRAPH && a->ctx && a->ctx->h.alive && !sticky) {
        unsigned long epoch = a->epoch;
        ctx_sync(a->ctx);
        if (!a->live || a->epoch != epoch) return bad_ptr(fn, p, 0, "freed by another call while this one waited");
    }
    kill_alloc(a);
    return OK;
}
static int dev_kind(int k) { return k == A_DEV || k == A_MANAGED || k == A_GRAPH; }
CUresult cuMemFree_v2(CUdeviceptr p) {
    ENTER("cuMemFree");
    NEED_CTX();
    LOCK();
    CUresult r = capture_unsafe("cuMemFree");
    if (!r) r = free_now("cuMemFree", p, dev_kind);
    UNLOCK();
    return r;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    ENTER("cuMemGetAddressRange");
    LOCK();
    CUresult r = check_range("cuMemGetAddressRange", p, 1, 0, NULL, NULL);
    if (!r) {
        struct alloc *a = find_alloc((uintptr_t)p);
        if (base) *base = a->base;
        if (size) *size = a->size;
    }
    UNLOCK();
    return r;
}

/* pointer attributes; booleans are written as one byte, which reads right
   in a zeroed int as well as in a bool */
static CUresult ptr_attr(void *data, int attr, CUdeviceptr p) {
    struct alloc *a = find_alloc((uintptr_t)p);
    if (!a || !a->live) return bad_ptr("cuPointerGetAttribute", p, 1, a ? "freed memory" : "no allocation holds the address");
    switch (attr) {
    case 1: *(struct ctx **)data = a->ctx; break;                                /* CONTEXT */
    case 2: *(unsigned *)data = a->kind == A_HOST ? MT_HOST : MT_DEVICE; break; /* MEMORY_TYPE */
    case 3: *(CUdeviceptr *)data = p; break;                                     /* DEVICE_POINTER */
    case 4:                                                                      /* HOST_POINTER */
        if (a->kind != A_HOST && a->kind != A_MANAGED) return INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)p;
        break;
    case 6: *(unsigned char *)data = 0; break;                                  /* SYNC_MEMOPS */
    case 7: *(unsigned long long *)data = a->id; break;                          /* BUFFER_ID */
    case 8: *(unsigned char *)data = a->kind == A_MANAGED; break;                /* IS_MANAGED */
    case 9: *(int *)data = 0; break;                                             /* DEVICE_ORDINAL */
    case 11: *(CUdeviceptr *)data = a->base; break;                              /* RANGE_START_ADDR */
    case 12: *(size_t *)data = a->size; break;                                   /* RANGE_SIZE */
    case 13: *(unsigned char *)data = 1; break;                                  /* MAPPED */
    case 17: *(void **)data = a->pool; break;                                    /* MEMPOOL_HANDLE */
    default: return INVALID_VALUE;
    }
    return OK;
}
CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    ENTER("cuPointerGetAttribute");
    if (!data) return INVALID_VALUE;
    LOCKED(ptr_attr(data, attr, p));
}
CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p) {
    ENTER("cuPointerGetAttributes");
    LOCK();
    CUresult r = OK;
    for (unsigned i = 0; i < n && !r; i++) r = ptr_attr(data[i], attrs[i], p);
    UNLOCK();
    return r;
}

/* host registrations */
struct reg { uintptr_t base; size_t size; unsigned flags; int live; struct ctx *ctx; };
static struct reg *regs;
static size_t nregs, cregs;
static long unregister_delay_us, unregisters_in_delay;
void fake_set_unregister_delay_us(long us) { __atomic_store_n(&unregister_delay_us, us, __ATOMIC_SEQ_CST); }
long fake_unregisters_in_delay(void) { return __atomic_load_n(&unregisters_in_delay, __ATOMIC_SEQ_CST); }
/* reg_covering is the index of the live registration holding b, or -1;
   reg_live says whether registration i is still live (entries are never
   reused: a new registration is a new entry). Lock held. */
static long reg_covering(uintptr_t b) {
    for (size_t i = 0; i < nregs; i++)
        if (regs[i].live && b >= regs[i].base && b < regs[i].base + regs[i].size) return (long)i;
    return -1;
}
static int reg_live(long i) { return i >= 0 && (size_t)i < nregs && regs[i].live; }

static void kill_registrations(struct ctx *c) {
    for (size_t i = 0; i < nregs; i++)
        if (regs[i].live && regs[i].ctx == c) { regs[i].live = 0; DEC(live_regs); }
}
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
    ENTER("cuMemHostRegister");
    NEED_CTX();
    if (!p || !n || (flags & ~15u)) return INVALID_VALUE;
    LOCK();
    uintptr_t b = (uintptr_t)p;
    for (size_t i = 0; i < nregs; i++)
        if (regs[i].live && b < regs[i].base + regs[i].size && regs[i].base < b + n) { UNLOCK(); return ALREADY_REGISTERED; }
    if (nregs == cregs) {
        cregs = cregs ? cregs * 2 : 64;
        regs = realloc(regs, cregs * sizeof *regs);
        if (!regs) abort();
    }
    regs[nregs].base = b; regs[nregs].size = n; regs[nregs].flags = flags; regs[nregs].live = 1;
    regs[nregs].ctx = current;
    nregs++;
    INC(live_regs);
    UNLOCK();
    return OK;
}
CUresult cuMemHostUnregister(void *p) {
    ENTER("cuMemHostUnregister");
    NEED_CTX();
    delay_wait(&unregister_delay_us, &unregisters_in_delay); /* the registration holds until the call ends */
    LOCK();
    CUresult r = NOT_REGISTERED;
    for (size_t i = nregs; i-- > 0;)
        if (regs[i].live && regs[i].base == (uintptr_t)p) {
            regs[i].live = 0;
            DEC(live_regs);
            r = OK;
            break;
        }
    if (r) r = bad_handle("cuMemHostUnregister", p, "host registration", NOT_REGISTERED);
    UNLOCK();
    return r;
}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags) {
    ENTER("cuMemHostGetDevicePointer");
    NEED_CTX();
    if (flags) return INVALID_VALUE;
    LOCK();
    CUresult r = INVALID_VALUE;
    uintptr_t b = (uintptr_t)p;
    struct alloc *a = find_alloc(b);
    if (a && a->live && a->kind == A_HOST) r = OK;
    for (size_t i = 0; i < nregs && r; i++)
        if (regs[i].live && b >= regs[i].base && b < regs[i].base + regs[i].size) r = OK;
    if (!r) *d = b;
    UNLOCK();
    return r;
}
CUresult cuMemHostGetFlags(unsigned *flags, void *p) {
    ENTER("cuMemHostGetFlags");
    LOCK();
    struct alloc *a = find_alloc((uintptr_t)p);
    CUresult r = a && a->live && a->kind == A_HOST ? OK : INVALID_VALUE;
    if (!r) *flags = 0;
    UNLOCK();
    return r;
}

/* synchronous copies and memsets: they follow the legacy stream's work */
static CUresult sync_prologue(const char *fn) {
    CUresult r = capture_unsafe(fn);
    if (r) return r;
    if (current->legacy && !stream_idle(current->legacy)) wait_seq(current->legacy, current->legacy->enq_seq);
    return sticky;
}
static CUresult copy_sync(const char *fn, memcpy3d_t p) {
    if (!p.WidthInBytes) return OK; /* nothing to copy, as the driver answers */
    LOCK();
    CUresult r = sync_prologue(fn);
    if (!r) r = copy3d(fn, &p, 1, 1);
    UNLOCK();
    return r;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) {
    ENTER("cuMemcpyHtoD");
    NEED_CTX();
    return copy_sync("cuMemcpyHtoD", linear_copy(MT_HOST, s, 0, MT_DEVICE, NULL, d, n));
}
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
    ENTER("cuMemcpyDtoH");
    NEED_CTX();
    return copy_sync("cuMemcpyDtoH", linear_copy(MT_DEVICE, NULL, s, MT_HOST, d, 0, n));
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
    ENTER("cuMemcpyDtoD");
    NEED_CTX();
    return copy_sync("cuMemcpyDtoD", linear_copy(MT_DEVICE, NULL, s, MT_DEVICE, NULL, d, n));
}
CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) {
    ENTER("cuMemcpy");
    NEED_CTX();
    return copy_sync("cuMemcpy", linear_copy(unified(s), (void *)(uintptr_t)s, s, unified(d), (void *)(uintptr_t)d, d, n));
}
CUresult cuMemcpy3D_v2(const memcpy3d_t *p) {
    ENTER("cuMemcpy3D");
    NEED_CTX();
    if (!p) return INVALID_VALUE;
    return copy_sync("cuMemcpy3D", *p);
}
static CUresult memset_sync(const char *fn, CUdeviceptr d, size_t pitch, unsigned v, unsigned es, size_t w, size_t h) {
    if (!w || !h) return OK; /* nothing to set */
    memset_params_t m = {d, pitch, v, es, w, h};
    LOCK();
    CUresult r = sync_prologue(fn);
    if (!r) r = memset2d(fn, &m, 1);
    UNLOCK();
    return r;
}
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { ENTER("cuMemsetD8"); NEED_CTX(); return memset_sync("cuMemsetD8", d, 0, v, 1, n, 1); }
CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { ENTER("cuMemsetD16"); NEED_CTX(); return memset_sync("cuMemsetD16", d, 0, v, 2, n, 1); }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) { ENTER("cuMemsetD32"); NEED_CTX(); return memset_sync("cuMemsetD32", d, 0, v, 4, n, 1); }
CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h) { ENTER("cuMemsetD2D8"); NEED_CTX(); return memset_sync("cuMemsetD2D8", d, pitch, v, 1, w, h); }
CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h) { ENTER("cuMemsetD2D16"); NEED_CTX(); return memset_sync("cuMemsetD2D16", d, pitch, v, 2, w, h); }
CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned v, size_t w, size_t h) { ENTER("cuMemsetD2D32"); NEED_CTX(); return memset_sync("cuMemsetD2D32", d, pitch, v, 4, w, h); }

/* asynchronous copies and memsets */
static CUresult copy_async(const char *fn, memcpy3d_t p, void *hs) {
    LOCK();
    struct stream *s;
    CUresult r = get_stream(fn, hs, &s);
    if (!r && sticky) r = sticky;
    if (!r && (!p.WidthInBytes || !p.Height || !p.Depth)) r = p.WidthInBytes ? INVALID_VALUE : OK;
    else if (!r && s->cap) {
        struct nparams np;
        if (!(r = prep_memcpy(fn, &p, s->h.ctx, &np))) r = capture_add(s, &np, NULL);
    } else if (!r) {
        struct op o;
        op_init(&o, OP_COPY, fn);
        o.u.c = p;
        r = run_or_queue(s, &o);
    }
    UNLOCK();
    return r;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *src, size_t n, void *s) {
    ENTER("cuMemcpyHtoDAsync");
    return copy_async("cuMemcpyHtoDAsync", linear_copy(MT_HOST, src, 0, MT_DEVICE, NULL, d, n), s);
}
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr src, size_t n, void *s) {
    ENTER("cuMemcpyDtoHAsync");
    return copy_async("cuMemcpyDtoHAsync", linear_copy(MT_DEVICE, NULL, src, MT_HOST, d, 0, n), s);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n, void *s) {
    ENTER("cuMemcpyDtoDAsync");
    return copy_async("cuMemcpyDtoDAsync", linear_copy(MT_DEVICE, NULL, src, MT_DEVICE, NULL, d, n), s);
}
CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr src, size_t n, void *s) {
    ENTER("cuMemcpyAsync");
    return copy_async("cuMemcpyAsync",
                      linear_copy(unified(src), (void *)(uintptr_t)src, src, unified(d), (void *)(uintptr_t)d, d, n), s);
}
CUresult cuMemcpy3DAsync_v2(const memcpy3d_t *p, void *s) {
    ENTER("cuMemcpy3DAsync");
    if (!p) return INVALID_VALUE;
    return copy_async("cuMemcpy3DAsync", *p, s);
}
/* Peer copies (cuMemcpyPeer, cuMemcpyPeerAsync): device memory of one
   context into device memory of another (the fake has one device, so the
   contexts share it). Each side must lie in memory of the context named for
   it, or it counts as a bad pointer use (the driver picks the copy's path
   from the contexts); a destroyed or unknown context is a bad handle use.
   The async copy is ordered on its stream only and runs as any async copy:
   read and checked when it runs. On a captured stream it is refused with
   CAPTURE_UNSUPPORTED and invalidates the capture (what libcuda does there
   was not measured; purecuda never makes the call in a capture). Lock held. */
static CUresult peer_sides(const char *fn, CUdeviceptr d, void *dc, CUdeviceptr s, void *sc, size_t n) {
    struct ctx *dx = get_ctx(dc), *sx = get_ctx(sc);
    if (!dx || !dx->h.alive) return bad_handle(fn, dc, "destination context", INVALID_CONTEXT);
    if (!sx || !sx->h.alive) return bad_handle(fn, sc, "source context", INVALID_CONTEXT);
    if (!n) return OK;
    CUresult r = check_range(fn, d, n, 1, dx, NULL);
    return r ? r : check_range(fn, s, n, 1, sx, NULL);
}
CUresult cuMemcpyPeer(CUdeviceptr d, void *dc, CUdeviceptr s, void *sc, size_t n) {
    ENTER("cuMemcpyPeer");
    NEED_CTX();
    LOCK();
    CUresult r = sync_prologue("cuMemcpyPeer");
    if (!r) r = peer_sides("cuMemcpyPeer", d, dc, s, sc, n);
    if (!r && n) r = copy3d("cuMemcpyPeer", (memcpy3d_t[]){linear_copy(MT_DEVICE, NULL, s, MT_DEVICE, NULL, d, n)}, 1, 1);
    UNLOCK();
    return r;
}
CUresult cuMemcpyPeerAsync(CUdeviceptr d, void *dc, CUdeviceptr s, void *sc, size_t n, void *hs) {
    ENTER("cuMemcpyPeerAsync");
    LOCK();
    struct stream *st;
    CUresult r = get_stream("cuMemcpyPeerAsync", hs, &st);
    if (!r && sticky) r = sticky;
    if (!r) r = peer_sides("cuMemcpyPeerAsync", d, dc, s, sc, n);
    if (!r && st->cap) {
        capture_invalidate(st->cap);
        r = CAPTURE_UNSUPPORTED;
    } else if (!r && n) {
        struct op o;
        op_init(&o, OP_COPY, "cuMemcpyPeerAsync");
        o.u.c = linear_copy(MT_DEVICE, NULL, s, MT_DEVICE, NULL, d, n);
        r = run_or_queue(st, &o);
    }
    UNLOCK();
    return r;
}
static CUresult memset_async(const char *fn, CUdeviceptr d, size_t pitch, unsigned v, unsigned es, size_t w, size_t h,
                             void *hs) {
    LOCK();
    struct stream *s;
    CUresult r = get_stream(fn, hs, &s);
    if (!r && sticky) r = sticky;
    if (!r && (w && h) && s->cap) {
        memset_params_t m = {d, pitch, v, es, w, h};
        struct nparams np;
        if (!(r = prep_memset(fn, &m, s->h.ctx, &np))) r = capture_add(s, &np, NULL);
    } else if (!r && (w && h)) {
        struct op o;
        op_init(&o, OP_MEMSET, fn);
        memset_params_t m = {d, pitch, v, es, w, h};
        o.u.m = m;
        r = run_or_queue(s, &o);
    }
    UNLOCK();
    return r;
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *s) { ENTER("cuMemsetD8Async"); return memset_async("cuMemsetD8Async", d, 0, v, 1, n, 1, s); }
CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, void *s) { ENTER("cuMemsetD16Async"); return memset_async("cuMemsetD16Async", d, 0, v, 2, n, 1, s); }
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, void *s) { ENTER("cuMemsetD32Async"); return memset_async("cuMemsetD32Async", d, 0, v, 4, n, 1, s); }
CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, void *s) { ENTER("cuMemsetD2D8Async"); return memset_async("cuMemsetD2D8Async", d, p, v, 1, w, h, s); }
CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, void *s) { ENTER("cuMemsetD2D16Async"); return memset_async("cuMemsetD2D16Async", d, p, v, 2, w, h, s); }
CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t p, unsigned v, size_t w, size_t h, void *s) { ENTER("cuMemsetD2D32Async"); return memset_async("cuMemsetD2D32Async", d, p, v, 4, w, h, s); }

/* stream-ordered allocation */
static CUresult get_pool(const char *fn, void *h, struct pool **out) {
    *out = NULL;
    struct pool *p = reg_get(h, K_POOL);
    if (!p || !p->h.alive) return bad_handle(fn, h, "memory pool", INVALID_HANDLE);
    *out = p;
    return OK;
}
static CUresult alloc_async(const char *fn, CUdeviceptr *d, size_t n, struct pool *p, void *hs) {
    struct stream *s;
    CUresult r = get_stream(fn, hs, &s);
    if (r) return r;
    if (sticky) return sticky;
    if (s->cap) { /* a memory-alloc node */
        mem_alloc_params_t mp;
        memset(&mp, 0, sizeof mp);
        mp.poolProps.allocType = 1;
        mp.poolProps.location.type = 1;
        mp.bytesize = n;
        struct nparams np;
        if (s->cap->status != 1) return CAPTURE_INVALIDATED;
        if ((r = prep_alloc(s->cap->g, &mp, &np, s->h.ctx))) return r;
        if ((r = capture_add(s, &np, NULL))) return r;
        *d = mp.dptr;
        return OK;
    }
    if (!p) p = device_pool;
    struct alloc *a;
    if ((r = alloc_in(s->h.ctx, n, A_DEV, d, &a))) return r;
    a->stream_ordered = 1;
    a->pool = p;
    pool_took(p, n);
    return OK;
}
CUresult cuMemAllocAsync(CUdeviceptr *d, size_t n, void *s) {
    ENTER("cuMemAllocAsync");
    LOCKED(alloc_async("cuMemAllocAsync", d, n, NULL, s));
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t n, void *pool, void *s) {
    ENTER("cuMemAllocFromPoolAsync");
    LOCK();
    struct pool *p;
    CUresult r = get_pool("cuMemAllocFromPoolAsync", pool, &p);
    if (!r) r = alloc_async("cuMemAllocFromPoolAsync", d, n, p, s);
    UNLOCK();
    return r;
}
CUresult cuMemFreeAsync(CUdeviceptr d, void *hs) {
    ENTER("cuMemFreeAsync");
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuMemFreeAsync", hs, &s);
    if (!r && sticky) r = sticky;
    if (!r && s->cap) { /* a memory-free node, for graph memory */
        struct nparams np;
        if (s->cap->status != 1) r = CAPTURE_INVALIDATED;
        else if (!(r = prep_free("cuMemFreeAsync", s->cap->g, d, &np))) r = capture_add(s, &np, NULL);
    } else if (!r) {
        struct alloc *a = find_alloc((uintptr_t)d);
        if (!a || a->base != d || !dev_kind(a->kind)) r = bad_ptr("cuMemFreeAsync", d, 0, "not the base of an allocation");
        else if (!a->live) r = bad_ptr("cuMemFreeAsync", d, 0, "freed memory (double free)");
        else if (a->free_pending) r = bad_ptr("cuMemFreeAsync", d, 0, "memory whose stream-ordered free is queued (double free)");
        else {
            a->free_pending = 1;
            struct op o;
            op_init(&o, OP_FREE, "cuMemFreeAsync");
            o.u.free = d;
            if ((r = run_or_queue(s, &o))) a->free_pending = 0;
        }
    }
    UNLOCK();
    return r;
}
CUresult cuDeviceGetDefaultMemPool(void **pool, int dev) {
    ENTER("cuDeviceGetDefaultMemPool");
    if (dev != 0) return INVALID_DEVICE;
    *pool = default_pool;
    return OK;
}
CUresult cuDeviceGetMemPool(void **pool, int dev) {
    ENTER("cuDeviceGetMemPool");
    if (dev != 0) return INVALID_DEVICE;
    LOCK();
    *pool = device_pool;
    UNLOCK();
    return OK;
}
CUresult cuDeviceSetMemPool(int dev, void *pool) {
    ENTER("cuDeviceSetMemPool");
    if (dev != 0) return INVALID_DEVICE;
    LOCK();
    struct pool *p;
    CUresult r = get_pool("cuDeviceSetMemPool", pool, &p);
    if (!r) device_pool = p;
    UNLOCK();
    return r;
}
static void ipc_pool_created(struct pool *p, int handle_types);
CUresult cuMemPoolCreate(void **pool, const pool_props_t *props) {
    ENTER("cuMemPoolCreate");
    if (!pool || !props || props->allocType != 1 || props->location.type != 1 || props->location.id != 0)
        return INVALID_VALUE;
    LOCK();
    struct pool *p = new_obj(sizeof *p, K_POOL, NULL);
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    pool_list_add(p);
    ipc_pool_created(p, props->handleTypes);
    INC(live_pools);
    *pool = p;
    UNLOCK();
    return OK;
}
CUresult cuMemPoolDestroy(void *pool) {
    ENTER("cuMemPoolDestroy");
    LOCK();
    struct pool *p;
    CUresult r = get_pool("cuMemPoolDestroy", pool, &p);
    if (!r && p->is_default) r = INVALID_VALUE;
    if (!r) {
        p->h.alive = 0; /* its allocations stay usable until freed */
        DEC(live_pools);
        if (device_pool == p) device_pool = default_pool;
    }
    UNLOCK();
    return r;
}
CUresult cuMemPoolGetAttribute(void *pool, int attr, void *v) {
    ENTER("cuMemPoolGetAttribute");
    LOCK();
    struct pool *p;
    CUresult r = get_pool("cuMemPoolGetAttribute", pool, &p);
    if (!r) switch (attr) {
        case 1: case 2: case 3: *(int *)v = p->reuse[attr - 1]; break;
        case 4: *(unsigned long long *)v = p->threshold; break;
        case 5: *(unsigned long long *)v = p->used + p->cached; break;
        case 6: *(unsigned long long *)v = p->reserved_high; break;
        case 7: *(unsigned long long *)v = p->used; break;
        case 8: *(unsigned long long *)v = p->used_high; break;
        default: r = INVALID_VALUE;
        }
    UNLOCK();
    return r;
}
CUresult cuMemPoolSetAttribute(void *pool, int attr, void *v) {
    ENTER("cuMemPoolSetAttribute");
    LOCK();
    struct pool *p;
    CUresult r = get_pool("cuMemPoolSetAttribute", pool, &p);
    if (!r) switch (attr) {
        case 1: case 2: case 3: p->reuse[attr - 1] = *(int *)v; break;
        case 4: p->threshold = *(unsigned long long *)v; break;
        case 6:
            if (*(unsigned long long *)v) r = INVALID_VALUE;
            else p->reserved_high = p->used + p->cached;
            break;
        case 8:
            if (*(unsigned long long *)v) r = INVALID_VALUE;
            else p->used_high = p->used;
            break;
        default: r = INVALID_VALUE;
        }
    UNLOCK();
    return r;
}
CUresult cuMemPoolTrimTo(void *pool, size_t keep) {
    ENTER("cuMemPoolTrimTo");
    LOCK();
    struct pool *p;
    CUresult r = get_pool("cuMemPoolTrimTo", pool, &p);
    if (!r && p->cached > keep) p->cached = keep;
    UNLOCK();
    return r;
}

/* ============================================================
 * Streams and events
 * ============================================================ */

static CUresult stream_create(struct stream **out, unsigned flags, int prio) {
    NEED_CTX();
    if (flags & ~1u) return INVALID_VALUE;
    if (prio > 0) prio = 0;
    if (prio < -5) prio = -5;
    LOCK();
    *out = new_stream(current, flags, prio, 0);
    UNLOCK();
    return OK;
}
CUresult cuStreamCreate(struct stream **s, unsigned flags) { ENTER("cuStreamCreate"); return stream_create(s, flags, 0); }
CUresult cuStreamCreateWithPriority(struct stream **s, unsigned flags, int prio) {
    ENTER("cuStreamCreateWithPriority");
    return stream_create(s, flags, prio);
}
CUresult cuStreamGetPriority(void *h, int *prio) {
    ENTER("cuStreamGetPriority");
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuStreamGetPriority", h, &s);
    if (!r) *prio = s->prio;
    UNLOCK();
    return r;
}
CUresult cuStreamGetFlags(void *h, unsigned *flags) {
    ENTER("cuStreamGetFlags");
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuStreamGetFlags", h, &s);
    if (!r) *flags = s->flags;
    UNLOCK();
    return r;
}
CUresult cuStreamGetId(void *h, unsigned long long *id) {
    ENTER("cuStreamGetId");
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuStreamGetId", h, &s);
    if (!r) *id = s->id;
    UNLOCK();
    return r;
}
CUresult cuStreamGetCtx(void *h, struct ctx **c) {
    ENTER("cuStreamGetCtx");
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuStreamGetCtx", h, &s);
    if (!r) *c = s->h.ctx;
    UNLOCK();
    return r;
}
CUresult cuStreamGetCtx_v2(void *h, struct ctx **c, void **green) {
    ENTER("cuStreamGetCtx");
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuStreamGetCtx", h, &s);
    if (!r) { *c = s->h.ctx; if (green) *green = NULL; }
    UNLOCK();
    return r;
}
CUresult cuStreamGetDevice(void *h, int *dev) {
    ENTER("cuStreamGetDevice");
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuStreamGetDevice", h, &s);
    if (!r) *dev = 0;
    UNLOCK();
    return r;
}
CUresult cuStreamIsCapturing(void *h, int *status) {
    ENTER("cuStreamIsCapturing");
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuStreamIsCapturing", h, &s);
    if (!r && !status) r = INVALID_VALUE;
    if (!r && sticky) r = sticky; /* as libcuda after a fault (seen on an H100) */
    if (!r) *status = s->cap ? s->cap->status : 0;
    UNLOCK();
    return r;
}
CUresult cuStreamSynchronize(void *h) {
    ENTER("cuStreamSynchronize");
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuStreamSynchronize", h, &s);
    if (!r && s->cap) { capture_invalidate(s->cap); r = CAPTURE_UNSUPPORTED; }
    if (!r) r = capture_unsafe("cuStreamSynchronize");
    if (!r) {
        wait_seq(s, s->enq_seq);
        pools_at_sync();
        r = sticky;
    }
    UNLOCK();
    return r;
}
CUresult cuStreamQuery(void *h) {
    ENTER("cuStreamQuery");
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuStreamQuery", h, &s);
    if (!r && s->cap) { capture_invalidate(s->cap); r = CAPTURE_UNSUPPORTED; }
    if (!r) r = capture_unsafe("cuStreamQuery");
    if (!r) r = sticky ? sticky : stream_idle(s) ? OK : NOT_READY;
    UNLOCK();
    return r;
}
CUresult cuStreamDestroy_v2(void *h) {
    ENTER("cuStreamDestroy");
    NEED_CTX();
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuStreamDestroy", h, &s);
    if (!r && s->special) r = bad_handle("cuStreamDestroy", h, "default stream (cannot be destroyed)", INVALID_HANDLE);
    if (!r) {
        s->h.alive = 0; /* queued work still runs */
        DEC(live_streams);
        capture_abandon(s);
        pthread_cond_signal(&s->cv);
        maybe_deactivate(s);
    }
    UNLOCK();
    return r;
}

static CUresult get_event(const char *fn, void *h, struct event **out) {
    *out = NULL;
    struct event *e = reg_get(h, K_EVENT);
    if (!e || !e->h.alive) return bad_handle(fn, h, "event", INVALID_HANDLE);
    *out = e;
    return OK;
}
CUresult cuEventCreate(struct event **e, unsigned flags) {
    ENTER("cuEventCreate");
    NEED_CTX();
    if (flags & ~15u) return INVALID_VALUE;
    LOCK();
    struct event *n = new_obj(sizeof *n, K_EVENT, current);
    n->flags = flags;
    INC(live_events);
    *e = n;
    UNLOCK();
    return OK;
}
static CUresult event_record(const char *fn, void *he, void *hs, unsigned flags) {
    NOT_STALE();
    struct event *e;
    struct stream *s;
    CUresult r = get_event(fn, he, &e);
    if (!r) r = get_stream(fn, hs, &s);
    if (!r && sticky) r = sticky;
    if (!r) r = mgraph_record_check(fn, &e->h, &s->h);
    if (r) return r;
    if (s->cap) {
        if (s->cap->status != 1) return CAPTURE_INVALIDATED;
        if (flags & 1) { /* CU_EVENT_RECORD_EXTERNAL: an event record node */
            struct nparams np;
            if ((r = prep_event(fn, NT_EVENT_RECORD, he, &np))) return r;
            return capture_add(s, &np, NULL);
        }
        e->cap = s->cap; /* marks where in the capture: for waits that fork or join */
        deps_reserve(&e->cdeps, &e->ccdeps, s->ncdeps, NULL);
        if (s->ncdeps) memcpy(e->cdeps, s->cdeps, s->ncdeps * sizeof *s->cdeps);
        e->ncdeps = s->ncdeps;
        return OK;
    }
    e->cap = NULL;
    struct op o;
    op_init(&o, OP_RECORD, fn);
    o.u.ev.e = e;
    o.u.ev.gen = ++e->rec_gen;
    return run_or_queue(s, &o);
}
static CUresult record_call_delay(const char *fn, void *hs);
CUresult cuEventRecord(void *e, void *s) {
    ENTER("cuEventRecord");
    CUresult d_ = record_call_delay("cuEventRecord", s);
    if (d_) return d_;
    LOCKED(event_record("cuEventRecord", e, s, 0));
}
CUresult cuEventRecordWithFlags(void *e, void *s, unsigned flags) {
    ENTER("cuEventRecordWithFlags");
    if (flags & ~1u) return INVALID_VALUE;
    LOCKED(event_record("cuEventRecordWithFlags", e, s, flags));
}
CUresult cuEventQuery(void *h) {
    ENTER("cuEventQuery");
    LOCK();
    struct event *e;
    CUresult r = get_event("cuEventQuery", h, &e);
    if (!r && e->cap && e->cap->status) { capture_invalidate(e->cap); r = CAPTURE_UNSUPPORTED; }
    if (!r) r = capture_unsafe("cuEventQuery");
    if (!r) r = sticky ? sticky : e->done_gen >= e->rec_gen ? OK : NOT_READY;
    UNLOCK();
    return r;
}
CUresult cuEventSynchronize(void *h) {
    ENTER("cuEventSynchronize");
    LOCK();
    struct event *e;
    CUresult r = get_event("cuEventSynchronize", h, &e);
    if (!r && e->cap && e->cap->status) { capture_invalidate(e->cap); r = CAPTURE_UNSUPPORTED; }
    if (!r) r = capture_unsafe("cuEventSynchronize");
    if (!r) {
        long long gen = e->rec_gen;
        while (e->done_gen < gen && !sticky && e->h.alive) pthread_cond_wait(&done_cv, &mu);
        r = sticky;
    }
    UNLOCK();
    return r;
}
static int ipc_event_unref(struct event *e);
CUresult cuEventDestroy_v2(void *h) {
    ENTER("cuEventDestroy");
    NEED_CTX();
    LOCK();
    struct event *e;
    CUresult r = get_event("cuEventDestroy", h, &e);
    if (!r && !ipc_event_unref(e)) { e->h.alive = 0; DEC(live_events); }
    UNLOCK();
    return r;
}
static CUresult elapsed(float *ms, void *a, void *b) {
    struct event *s, *e;
    CUresult r = get_event("cuEventElapsedTime", a, &s);
    if (!r) r = get_event("cuEventElapsedTime", b, &e);
    if (r) return r;
    if (!ms) return INVALID_VALUE;
    if ((s->flags | e->flags) & 2) return INVALID_HANDLE; /* CU_EVENT_DISABLE_TIMING */
    if (!s->rec_gen || !e->rec_gen) return INVALID_HANDLE;
    if (s->done_gen < s->rec_gen || e->done_gen < e->rec_gen) return NOT_READY;
    if (sticky) return sticky;
    *ms = (float)(e->t_ms - s->t_ms);
    return OK;
}
CUresult cuEventElapsedTime(float *ms, void *a, void *b) { ENTER("cuEventElapsedTime"); LOCKED(elapsed(ms, a, b)); }
CUresult cuEventElapsedTime_v2(float *ms, void *a, void *b) { ENTER("cuEventElapsedTime"); LOCKED(elapsed(ms, a, b)); }
CUresult cuStreamWaitEvent(void *hs, void *he, unsigned flags) {
    ENTER("cuStreamWaitEvent");
    LOCK();
    struct stream *s;
    struct event *e;
    CUresult r = get_stream("cuStreamWaitEvent", hs, &s);
    if (!r) r = get_event("cuStreamWaitEvent", he, &e);
    if (!r && sticky) r = sticky;
    if (!r && flags & ~1u) r = INVALID_VALUE;
    if (!r && e->cap && e->cap->status) { /* recorded in a capture: fork into it, or join */
        struct capture *c = e->cap;
        if (s->cap && s->cap != c) {
            capture_invalidate(s->cap);
            capture_invalidate(c);
            r = CAPTURE_ISOLATION;
        } else if (c->status != 1) r = CAPTURE_INVALIDATED;
        else if (!s->cap) {
            if (s->special == 1) { capture_invalidate(c); r = CAPTURE_UNSUPPORTED; }
            else { s->cap = c; sdeps_set(s, e->cdeps, e->ncdeps); }
        } else
            for (int i = 0; i < e->ncdeps; i++) sdeps_add(s, e->cdeps[i]);
    } else if (!r && s->cap) {
        if (s->cap->status != 1) r = CAPTURE_INVALIDATED;
        else if (flags & 1) { /* CU_EVENT_WAIT_EXTERNAL: an event wait node */
            struct nparams np;
            if (!(r = prep_event("cuStreamWaitEvent", NT_WAIT_EVENT, he, &np))) r = capture_add(s, &np, NULL);
        } else { /* an event from outside the capture */
            capture_invalidate(s->cap);
            r = CAPTURE_ISOLATION;
        }
    } else if (!r) {
        struct op o;
        op_init(&o, OP_WAIT, "cuStreamWaitEvent");
        o.u.ev.e = e;
        o.u.ev.gen = e->rec_gen;
        r = run_or_queue(s, &o);
    }
    UNLOCK();
    return r;
}

CUresult cuLaunchHostFunc(void *hs, hostfn fn, void *data) {
    ENTER("cuLaunchHostFunc");
    NEED_CTX();
    LOCK();
    struct stream *s;
    CUresult r = get_stream("cuLaunchHostFunc", hs, &s);
    if (!r && !fn) r = INVALID_VALUE;
    if (!r && sticky) r = sticky;
    if (!r && s->cap) {
        host_params_t hp = {fn, data};
        struct nparams np;
        if (!(r = prep_host(&hp, &np))) r = capture_add(s, &np, NULL);
    } else if (!r) {
        struct op *o = new_op(OP_HOST, "cuLaunchHostFunc");
        o->u.h.fn = fn;
        o->u.h.userData = data;
        if ((r = enqueue(s, o))) free(o);
    }
    UNLOCK();
    return r;
}

/* ============================================================
 * Modules, libraries, functions, launches
 * ============================================================ */

static void init_funcs(struct func *f, int kind, struct ctx *c, struct module *m, struct library *l) {
    for (int i = 0; i < NK; i++) {
        f[i].h.magic = MAGIC; f[i].h.kind = kind; f[i].h.alive = 1; f[i].h.ctx = c;
        f[i].k = &kdefs[i]; f[i].mod = m; f[i].lib = l; f[i].carveout = -1;
        reg_add(&f[i]);
    }
}
static CUresult module_load(void **m, const void *image) {
    NEED_CTX();
    if (!m || !image) return INVALID_VALUE;
    if (strncmp(image, "FAKE", 4) != 0) return INVALID_PTX;
    LOCK();
    struct module *n = new_obj(sizeof *n, K_MODULE, current);
    init_funcs(n->f, K_FUNC, current, n, NULL);
    INC(live_modules);
    *m = n;
    UNLOCK();
    return OK;
}
CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals) {
    ENTER("cuModuleLoadDataEx");
    return module_load(m, image);
}
CUresult cuModuleLoadData(void **m, const void *image) {
    ENTER("cuModuleLoadData");
    return module_load(m, image);
}
static CUresult get_module(const char *fn, void *h, struct module **out) {
    *out = NULL;
    struct module *m = reg_get(h, K_MODULE);
    if (!m || !m->h.alive) return bad_handle(fn, h, "module", INVALID_HANDLE);
    *out = m;
    return OK;
}
CUresult cuModuleUnload(void *h) {
    ENTER("cuModuleUnload");
    NEED_CTX();
    LOCK();
    struct module *m;
    CUresult r = get_module("cuModuleUnload", h, &m);
    if (!r) {
        m->h.alive = 0;
        for (int i = 0; i < NK; i++) m->f[i].h.alive = 0;
        if (m->global && m->global->live) kill_alloc(m->global);
        DEC(live_modules);
    }
    UNLOCK();
    return r;
}
CUresult cuModuleGetFunction(struct func **f, void *h, const char *name) {
    ENTER("cuModuleGetFunction");
    NEED_CTX();
    LOCK();
    struct module *m;
    CUresult r = get_module("cuModuleGetFunction", h, &m);
    if (!r) {
        r = NOT_FOUND;
        for (int i = 0; i < NK; i++)
            if (strcmp(kdefs[i].name, name) == 0) { *f = &m->f[i]; r = OK; }
    }
    UNLOCK();
    return r;
}
CUresult cuModuleGetGlobal_v2(CUdeviceptr *d, size_t *bytes, void *h, const char *name) {
    ENTER("cuModuleGetGlobal");
    NEED_CTX();
    LOCK();
    struct module *m;
    CUresult r = get_module("cuModuleGetGlobal", h, &m);
    if (!r && strcmp(name, "fake_global") != 0) r = NOT_FOUND;
    if (!r && !m->global) {
        CUdeviceptr p;
        r = alloc_in(m->h.ctx, 256, A_GLOBAL, &p, &m->global);
    }
    if (!r) {
        if (d) *d = m->global->base;
        if (bytes) *bytes = m->global->size;
    }
    UNLOCK();
    return r;
}
CUresult cuFuncGetParamInfo(void *h, size_t i, size_t *off, size_t *size) {
    ENTER("cuFuncGetParamInfo");
    LOCK();
    struct func *f;
    CUresult r = get_func("cuFuncGetParamInfo", h, &f);
    UNLOCK();
    if (r) return r;
    if ((int)i >= f->k->nparams) return INVALID_VALUE;
    if (off) *off = i * 8;
    if (size) *size = f->k->sizes[i];
    return OK;
}
static CUresult func_attr(struct func *f, int *v, int attr) {
    switch (attr) {
    case 0: *v = 1024; break;        /* MAX_THREADS_PER_BLOCK */
    case 1: case 2: case 3: *v = 0; break;
    case 4: *v = 16; break;          /* NUM_REGS */
    case 5: case 6: *v = 90; break;  /* PTX and binary version */
    case 8: *v = f->maxdyn; break;   /* MAX_DYNAMIC_SHARED_SIZE_BYTES */
    case 9: *v = f->carveout; break; /* PREFERRED_SHARED_MEMORY_CARVEOUT */
    default: *v = 0;
    }
    return OK;
}
static CUresult func_set_attr(struct func *f, int attr, int v) {
    if (attr == 8) { if (v < 0 || v > 227 * 1024) return INVALID_VALUE; f->maxdyn = v; return OK; }
    if (attr == 9) { f->carveout = v; return OK; }
    return INVALID_VALUE;
}
CUresult cuFuncGetAttribute(int *v, int attr, void *h) {
    ENTER("cuFuncGetAttribute");
    LOCK();
    struct func *f;
    CUresult r = get_func("cuFuncGetAttribute", h, &f);
    if (!r) r = func_attr(f, v, attr);
    UNLOCK();
    return r;
}
CUresult cuFuncSetAttribute(void *h, int attr, int v) {
    ENTER("cuFuncSetAttribute");
    LOCK();
    struct func *f;
    CUresult r = get_func("cuFuncSetAttribute", h, &f);
    if (!r) r = func_set_attr(f, attr, v);
    UNLOCK();
    return r;
}
CUresult cuFuncGetName(const char **name, void *h) {
    ENTER("cuFuncGetName");
    LOCK();
    struct func *f;
    CUresult r = get_func("cuFuncGetName", h, &f);
    if (!r) *name = f->k->name;
    UNLOCK();
    return r;
}
CUresult cuFuncGetModule(void **m, void *h) {
    ENTER("cuFuncGetModule");
    LOCK();
    struct func *f;
    CUresult r = get_func("cuFuncGetModule", h, &f);
    if (!r) *m = f->mod;
    UNLOCK();
    return r;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *h, int block, size_t dyn) {
    ENTER("cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (block <= 0) return INVALID_VALUE;
    LOCK();
    struct func *f;
    CUresult r = get_func("cuOccupancyMaxActiveBlocksPerMultiprocessor", h, &f);
    UNLOCK();
    if (r) return r;
    int b = 2048 / block;
    *n = b > 32 ? 32 : b;
    return OK;
}
CUresult cuOccupancyMaxPotentialBlockSize(int *grid, int *block, void *h, void *b2d, size_t dyn, int limit) {
    ENTER("cuOccupancyMaxPotentialBlockSize");
    LOCK();
    struct func *f;
    CUresult r = get_func("cuOccupancyMaxPotentialBlockSize", h, &f);
    UNLOCK();
    if (r) return r;
    *block = limit > 0 && limit < 1024 ? limit : 1024;
    *grid = 132 * (2048 / *block > 32 ? 32 : 2048 / *block);
    return OK;
}

CUresult cuLibraryLoadData(void **lib, const void *code, void *jo, void **jv, unsigned nj, void *lo, void **lv,
                           unsigned nl) {
    ENTER("cuLibraryLoadData");
    if (!lib || !code) return INVALID_VALUE;
    if (strncmp(code, "FAKE", 4) != 0) return INVALID_PTX;
    LOCK();
    struct library *l = new_obj(sizeof *l, K_LIBRARY, NULL);
    struct func *k = calloc(NK, sizeof *k);
    if (!k) abort();
    init_funcs(k, K_KERNEL, NULL, NULL, l);
    for (int i = 0; i < NK; i++) l->k[i] = &k[i];
    INC(live_libraries);
    *lib = l;
    UNLOCK();
    return OK;
}
static CUresult get_library(const char *fn, void *h, struct library **out) {
    *out = NULL;
    struct library *l = reg_get(h, K_LIBRARY);
    if (!l || !l->h.alive) return bad_handle(fn, h, "library", INVALID_HANDLE);
    *out = l;
    return OK;
}
CUresult cuLibraryUnload(void *h) {
    ENTER("cuLibraryUnload");
    LOCK();
    struct library *l;
    CUresult r = get_library("cuLibraryUnload", h, &l);
    if (!r) {
        l->h.alive = 0;
        for (int i = 0; i < NK; i++) l->k[i]->h.alive = 0;
        DEC(live_libraries);
    }
    UNLOCK();
    return r;
}
CUresult cuLibraryGetKernel(void **k, void *h, const char *name) {
    ENTER("cuLibraryGetKernel");
    LOCK();
    struct library *l;
    CUresult r = get_library("cuLibraryGetKernel", h, &l);
    if (!r) {
        r = NOT_FOUND;
        for (int i = 0; i < NK; i++)
            if (strcmp(kdefs[i].name, name) == 0) { *k = l->k[i]; r = OK; }
    }
    UNLOCK();
    return r;
}
CUresult cuLibraryGetKernelCount(unsigned *n, void *h) {
    ENTER("cuLibraryGetKernelCount");
    LOCK();
    struct library *l;
    CUresult r = get_library("cuLibraryGetKernelCount", h, &l);
    if (!r) *n = NK;
    UNLOCK();
    return r;
}
CUresult cuLibraryEnumerateKernels(void **ks, unsigned n, void *h) {
    ENTER("cuLibraryEnumerateKernels");
    LOCK();
    struct library *l;
    CUresult r = get_library("cuLibraryEnumerateKernels", h, &l);
    if (!r && n < (unsigned)NK) r = INVALID_VALUE;
    for (int i = 0; !r && i < NK; i++) ks[i] = l->k[i];
    UNLOCK();
    return r;
}
static CUresult get_kernel(const char *fn, void *h, struct func **out) {
    *out = NULL;
    struct func *f = reg_get(h, K_KERNEL);
    if (!f || !f->h.alive) return bad_handle(fn, h, "library kernel", INVALID_HANDLE);
    *out = f;
    return OK;
}
CUresult cuKernelGetParamInfo(void *h, size_t i, size_t *off, size_t *size) {
    ENTER("cuKernelGetParamInfo");
    NEED_CTX(); /* as the real driver's */
    LOCK();
    struct func *f;
    CUresult r = get_kernel("cuKernelGetParamInfo", h, &f);
    UNLOCK();
    if (r) return r;
    if ((int)i >= f->k->nparams) return INVALID_VALUE;
    if (off) *off = i * 8;
    if (size) *size = f->k->sizes[i];
    return OK;
}
CUresult cuKernelGetFunction(void **fn, void *h) {
    ENTER("cuKernelGetFunction");
    NEED_CTX();
    LOCK();
    struct func *f;
    CUresult r = get_kernel("cuKernelGetFunction", h, &f);
    if (!r) *fn = f; /* launches take a CUkernel as a CUfunction */
    UNLOCK();
    return r;
}
CUresult cuKernelGetLibrary(void **lib, void *h) {
    ENTER("cuKernelGetLibrary");
    LOCK();
    struct func *f;
    CUresult r = get_kernel("cuKernelGetLibrary", h, &f);
    if (!r) *lib = f->lib;
    UNLOCK();
    return r;
}
CUresult cuKernelGetName(const char **name, void *h) {
    ENTER("cuKernelGetName");
    LOCK();
    struct func *f;
    CUresult r = get_kernel("cuKernelGetName", h, &f);
    if (!r) *name = f->k->name;
    UNLOCK();
    return r;
}
CUresult cuKernelGetAttribute(int *v, int attr, void *h, int dev) {
    ENTER("cuKernelGetAttribute");
    if (dev != 0) return INVALID_DEVICE;
    LOCK();
    struct func *f;
    CUresult r = get_kernel("cuKernelGetAttribute", h, &f);
    if (!r) r = func_attr(f, v, attr);
    UNLOCK();
    return r;
}
CUresult cuKernelSetAttribute(int attr, int v, void *h, int dev) {
    ENTER("cuKernelSetAttribute");
    if (dev != 0) return INVALID_DEVICE;
    LOCK();
    struct func *f;
    CUresult r = get_kernel("cuKernelSetAttribute", h, &f);
    if (!r) r = func_set_attr(f, attr, v);
    UNLOCK();
    return r;
}

/* FAKE_EVICT_KB, when set, makes each launch write that many KiB of memory
   of its own, evicting the caller's data from the CPU caches as libcuda's
   launch does; FAKE_EVICT_CODE=1 (x86-64) makes it also run 64 KiB of
   code, evicting the caller's code from the instruction cache: for
   studying the cost of the code around a launch. */
static char *evict_buf;
static size_t evict_len;
static int evict_code_on;
static pthread_once_t evict_once = PTHREAD_ONCE_INIT;
static void evict_init(void) {
    const char *e = getenv("FAKE_EVICT_KB");
    if (e && atol(e) > 0) { evict_len = (size_t)atol(e) << 10; evict_buf = malloc(evict_len); }
    e = getenv("FAKE_EVICT_CODE");
    evict_code_on = e && atoi(e) > 0;
}
static void evict_code(void) {
#if defined(__x86_64__)
    /* 8192 eight-byte NOPs: 64 KiB of straight-line code. */
    __asm__ volatile(".rept 8192\n\t.byte 0x0f,0x1f,0x84,0x00,0x00,0x00,0x00,0x00\n\t.endr" ::: "memory");
#endif
}
static void evict(void) {
    pthread_once(&evict_once, evict_init);
    for (size_t i = 0; i < evict_len; i += 64) evict_buf[i]++;
    if (evict_code_on) evict_code();
}

static CUresult launch(const char *fn, void *fh, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned shmem, void *hs, void **params, void **extra) {
    struct stream *s;
    CUresult r = get_stream(fn, hs, &s);
    if (r) return r;
    struct func *f;
    if ((r = get_func(fn, fh, &f))) return r;
    if (f->h.kind == K_FUNC && f->h.ctx != s->h.ctx)
        return bad_handle(fn, fh, "function of another context", INVALID_HANDLE);
    if (!gx || !gy || !gz || !bx || !by || !bz) return INVALID_VALUE;
    if ((unsigned long long)bx * by * bz > 1024 || bz > 64) return INVALID_VALUE;
    if (sticky) return sticky;
    if (s->cap) {
        kernel_params_t kp = {fh, gx, gy, gz, bx, by, bz, shmem, params, extra, NULL, s->h.ctx};
        struct nparams np;
        if ((r = prep_kernel(fn, &kp, &np, s->h.ctx))) return r;
        return capture_add(s, &np, NULL);
    }
    struct op o;
    op_init(&o, OP_KERNEL, fn);
    struct kcall *k = &o.u.k;
    k->f = f; k->fh = fh; k->ctx = s->h.ctx;
    k->grid[0] = gx; k->grid[1] = gy; k->grid[2] = gz;
    k->block[0] = bx; k->block[1] = by; k->block[2] = bz;
    k->shmem = shmem;
    if ((r = kcall_args(fn, k, params, extra))) return r;
    return run_or_queue(s, &o);
}
/* fake_set_launch_call_delay_us: cuLaunchKernel checks its stream, then
   sleeps this long outside the global lock (counted in
   fake_launch_calls_in_delay), then launches, checking the stream again:
   a stream destroyed while a launch call is still inside the driver is a
   bad use, as it would be in libcuda. */
static long launch_call_delay_us, launch_calls_in_delay;
void fake_set_launch_call_delay_us(long us) { __atomic_store_n(&launch_call_delay_us, us, __ATOMIC_SEQ_CST); }
long fake_launch_calls_in_delay(void) { return __atomic_load_n(&launch_calls_in_delay, __ATOMIC_SEQ_CST); }
static CUresult call_delay(const char *fn, void *hs, long *delay_us, long *in_delay) {
    long us = __atomic_load_n(delay_us, __ATOMIC_SEQ_CST);
    if (!us) return OK;
    struct stream *st;
    LOCK();
    CUresult r = get_stream(fn, hs, &st);
    UNLOCK();
    if (r) return r;
    delay_wait(delay_us, in_delay);
    return OK;
}
static CUresult launch_call_delay(const char *fn, void *hs) {
    return call_delay(fn, hs, &launch_call_delay_us, &launch_calls_in_delay);
}
/* fake_set_record_call_delay_us: the same for cuEventRecord. */
static long record_call_delay_us, record_calls_in_delay;
void fake_set_record_call_delay_us(long us) { __atomic_store_n(&record_call_delay_us, us, __ATOMIC_SEQ_CST); }
long fake_record_calls_in_delay(void) { return __atomic_load_n(&record_calls_in_delay, __ATOMIC_SEQ_CST); }
static CUresult record_call_delay(const char *fn, void *hs) {
    return call_delay(fn, hs, &record_call_delay_us, &record_calls_in_delay);
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void *s, void **params, void **extra) {
    ENTER("cuLaunchKernel");
    NOT_STALE();
    CUresult d_ = launch_call_delay("cuLaunchKernel", s);
    if (d_) return d_;
    evict();
    LOCKED(launch("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
}
CUresult cuLaunchKernelEx(const launch_config_t *c, void *f, void **params, void **extra) {
    ENTER("cuLaunchKernelEx");
    NOT_STALE();
    if (!c) return INVALID_VALUE;
    evict();
    LOCKED(launch("cuLaunchKernelEx", f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                  c->blockDimZ, c->sharedMemBytes, c->hStream, params, extra));
}

/* ============================================================
 * Graphs
 * ============================================================ */

CUresult cuGraphCreate(void **g, unsigned flags) {
    ENTER("cuGraphCreate");
    if (!g || flags) return INVALID_VALUE;
    LOCK();
    *g = new_graph();
    INC(live_graphs);
    UNLOCK();
    return OK;
}
CUresult cuGraphDestroy(void *h) {
    ENTER("cuGraphDestroy");
    LOCK();
    struct graph *g;
    CUresult r = get_graph("cuGraphDestroy", h, &g);
    if (!r && g->embedded) r = INVALID_VALUE; /* a child node's graph goes with its node */
    if (!r) graph_kill(g);
    UNLOCK();
    return r;
}

/* check_deps validates the graph and the dependencies of a new node. */
static CUresult check_deps(const char *fn, void **out, void *hg, void **deps, size_t n, struct graph **g) {
    CUresult r = get_graph(fn, hg, g);
    if (r) return r;
    if (!out || (n && !deps)) return INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        struct node *d;
        if ((r = get_node(fn, deps[i], &d))) return r;
        if (d->g != *g) return INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i]) return INVALID_VALUE;
    }
    return OK;
}
static void finish_add(struct graph *g, struct nparams *p, void **deps, const edge_data_t *ed, size_t n, void **out) {
    struct node *x = graph_new_node(g, p);
    edge_data_t zero;
    memset(&zero, 0, sizeof zero);
    for (size_t i = 0; i < n; i++) add_edge(deps[i], x, ed ? ed[i] : zero);
    *out = x;
}

/* node_range checks a pointer a node names: live memory, or graph memory
   (valid in graph order whether or not it is allocated now). */
static CUresult node_range(const char *fn, CUdeviceptr p, size_t n) {
    struct alloc *a = find_alloc((uintptr_t)p);
    if (a && a->kind == A_GRAPH && n <= a->size && p - a->base <= a->size - n) return OK;
    return check_range(fn, p, n, 1, NULL, NULL);
}

static CUresult prep_kernel(const char *fn, const kernel_params_t *kp, struct nparams *p, struct ctx *defctx) {
    if (!kp) return INVALID_VALUE;
    void *fh = kp->func ? kp->func : kp->kern;
    struct func *f;
    CUresult r = get_func(fn, fh, &f);
    if (r) return r;
    if (!kp->gridDimX || !kp->gridDimY || !kp->gridDimZ || !kp->blockDimX || !kp->blockDimY || !kp->blockDimZ)
        return INVALID_VALUE;
    if ((unsigned long long)kp->blockDimX * kp->blockDimY * kp->blockDimZ > 1024) return INVALID_VALUE;
    struct ctx *c = defctx;
    if (kp->ctx) {
        c = get_ctx(kp->ctx);
        if (!c || !c->h.alive) return bad_handle(fn, kp->ctx, "context", INVALID_CONTEXT);
    }
    if (f->h.kind == K_FUNC) c = f->h.ctx; /* CUDA ignores the ctx field when func is set */
    memset(p, 0, sizeof *p);
    p->type = NT_KERNEL;
    struct kcall *k = &p->u.k;
    k->f = f; k->fh = fh; k->ctx = c;
    k->grid[0] = kp->gridDimX; k->grid[1] = kp->gridDimY; k->grid[2] = kp->gridDimZ;
    k->block[0] = kp->blockDimX; k->block[1] = kp->blockDimY; k->block[2] = kp->blockDimZ;
    k->shmem = kp->sharedMemBytes;
    if ((r = kcall_args(fn, k, kp->kernelParams, kp->extra))) return r;
    p->kern = kp->kern;
    p->ctx = c;
    /* a pointer argument must name memory that exists when the node is made */
    int id = f->k->id, cnt = (int)(uint32_t)k->a[2];
    if (id == KD_ADD4 || id == KD_PACK) r = node_range(fn, k->a[0], 4);
    else if (id == KD_FILL && cnt > 0) r = node_range(fn, k->a[0], (size_t)cnt * 4);
    else if (id == KD_COPYI && cnt > 0) {
        r = node_range(fn, k->a[0], (size_t)cnt * 4);
        if (!r) r = node_range(fn, k->a[1], (size_t)cnt * 4);
    }
    return r;
}
static CUresult node_ctx(const char *fn, void *h, struct ctx **c) {
    *c = current;
    if (!h) return OK;
    *c = get_ctx(h);
    if (!*c || !(*c)->h.alive) return bad_handle(fn, h, "context", INVALID_CONTEXT);
    return OK;
}
static CUresult prep_memcpy(const char *fn, const memcpy3d_t *c, void *hctx, struct nparams *p) {
    if (!c) return INVALID_VALUE;
    if (!c->WidthInBytes || !c->Height || !c->Depth) return INVALID_VALUE;
    int st = c->srcMemoryType, dt = c->dstMemoryType;
    if ((st != MT_HOST && st != MT_DEVICE && st != MT_UNIFIED) || (dt != MT_HOST && dt != MT_DEVICE && dt != MT_UNIFIED))
        return INVALID_VALUE;
    memset(p, 0, sizeof *p);
    CUresult r = node_ctx(fn, hctx, &p->ctx);
    if (r) return r;
    size_t sp = c->srcPitch ? c->srcPitch : c->WidthInBytes, dp = c->dstPitch ? c->dstPitch : c->WidthInBytes;
    size_t sh = c->srcHeight ? c->srcHeight : c->Height, dh = c->dstHeight ? c->dstHeight : c->Height;
    size_t sx = c->srcXInBytes + c->srcY * sp + c->srcZ * sp * sh, dx = c->dstXInBytes + c->dstY * dp + c->dstZ * dp * dh;
    size_t sl = (c->Depth - 1) * sp * sh + (c->Height - 1) * sp + c->WidthInBytes;
    size_t dl = (c->Depth - 1) * dp * dh + (c->Height - 1) * dp + c->WidthInBytes;
    if (st != MT_HOST || in_arena((uintptr_t)c->srcHost)) {
        uintptr_t b = st == MT_HOST ? (uintptr_t)c->srcHost : c->srcDevice;
        if ((r = node_range(fn, b + sx, sl))) return r;
    } else if (!c->srcHost) return INVALID_VALUE;
    if (dt != MT_HOST || in_arena((uintptr_t)c->dstHost)) {
        uintptr_t b = dt == MT_HOST ? (uintptr_t)c->dstHost : c->dstDevice;
        if ((r = node_range(fn, b + dx, dl))) return r;
    } else if (!c->dstHost) return INVALID_VALUE;
    p->type = NT_MEMCPY;
    p->u.c = *c;
    return OK;
}
static CUresult prep_memset(const char *fn, const memset_params_t *m, void *hctx, struct nparams *p) {
    if (!m) return INVALID_VALUE;
    size_t es = m->elementSize;
    if ((es != 1 && es != 2 && es != 4) || !m->width || !m->height || m->dst % es) return INVALID_VALUE;
    if (m->height > 1 && m->pitch < m->width * es) return INVALID_VALUE;
    memset(p, 0, sizeof *p);
    CUresult r = node_ctx(fn, hctx, &p->ctx);
    if (r) return r;
    size_t pitch = m->height > 1 ? m->pitch : m->width * es;
    if ((r = node_range(fn, m->dst, (m->height - 1) * pitch + m->width * es))) return r;
    p->type = NT_MEMSET;
    p->u.m = *m;
    p->u.m.pitch = pitch;
    return OK;
}
static CUresult prep_host(const host_params_t *h, struct nparams *p) {
    if (!h || !h->fn) return INVALID_VALUE;
    memset(p, 0, sizeof *p);
    p->type = NT_HOST;
    p->u.h = *h;
    return OK;
}
static CUresult prep_event(const char *fn, int type, void *he, struct nparams *p) {
    struct event *e;
    CUresult r = get_event(fn, he, &e);
    if (r) return r;
    memset(p, 0, sizeof *p);
    p->type = type;
    p->u.e = e;
    return OK;
}
static void mark_memnodes(struct graph *g) {
    for (; g; g = g->owner ? g->owner->g : NULL) g->memnodes = 1;
}
static CUresult prep_child(const char *fn, struct graph *g, void *hc, int move, struct nparams *p) {
    struct graph *c;
    CUresult r = get_graph(fn, hc, &c);
    if (r) return r;
    if (c->embedded) return INVALID_VALUE;
    for (struct graph *up = g; up; up = up->owner ? up->owner->g : NULL)
        if (up == c) return INVALID_VALUE; /* a graph cannot contain itself */
    if (c->memnodes && !move) return INVALID_VALUE; /* only by moving */
    memset(p, 0, sizeof *p);
    p->type = NT_GRAPH;
    if (move) {
        c->embedded = 1;
        DEC(live_graphs); /* the handle now names the node's graph */
        p->u.child = c;
        if (c->memnodes) mark_memnodes(g);
    } else p->u.child = clone_graph(c, 1);
    return OK;
}
static CUresult prep_alloc(struct graph *g, mem_alloc_params_t *mp, struct nparams *p, struct ctx *c) {
    if (!mp || !mp->bytesize) return INVALID_VALUE;
    if (mp->poolProps.allocType != 1 || mp->poolProps.location.type != 1 || mp->poolProps.location.id != 0)
        return INVALID_VALUE;
    if (mp->bytesize > ((size_t)1 << 40)) return OUT_OF_MEMORY;
    struct alloc *a = new_alloc(mp->bytesize, A_GRAPH, c);
    if (!a) return OUT_OF_MEMORY;
    memset(p, 0, sizeof *p);
    p->type = NT_MEM_ALLOC;
    p->u.ma.a = a;
    p->u.ma.props = mp->poolProps;
    mp->dptr = a->base;
    mark_memnodes(g);
    return OK;
}
static CUresult prep_free(const char *fn, struct graph *g, CUdeviceptr d, struct nparams *p) {
    struct alloc *a = find_alloc((uintptr_t)d);
    if (!a || a->base != d) return bad_ptr(fn, d, 0, "not the base of a graph allocation");
    if (a->kind != A_GRAPH) return INVALID_VALUE; /* only graph memory is freed by a free node */
    if (a->graph_freed) return INVALID_VALUE;    /* already freed by a free node */
    a->graph_freed = 1;
    memset(p, 0, sizeof *p);
    p->type = NT_MEM_FREE;
    p->u.free = d;
    mark_memnodes(g);
    return OK;
}

#define ADD_PROLOGUE(name) \
    ENTER(name);           \
    GRAPH_CTX();           \
    LOCK();                \
    struct graph *g;       \
    struct nparams p;      \
    CUresult r = check_deps(name, out, hg, deps, n, &g)
#define ADD_EPILOGUE(ed)                    \
    if (!r) finish_add(g, &p, deps, ed, n, out); \
    UNLOCK();                               \
    return r

CUresult cuGraphAddKernelNode_v2(void **out, void *hg, void **deps, size_t n, const kernel_params_t *kp) {
    ADD_PROLOGUE("cuGraphAddKernelNode");
    if (!r) r = prep_kernel("cuGraphAddKernelNode", kp, &p, current);
    ADD_EPILOGUE(NULL);
}
CUresult cuGraphAddMemcpyNode(void **out, void *hg, void **deps, size_t n, const memcpy3d_t *c, void *ctx) {
    ADD_PROLOGUE("cuGraphAddMemcpyNode");
    if (!r) r = prep_memcpy("cuGraphAddMemcpyNode", c, ctx, &p);
    ADD_EPILOGUE(NULL);
}
CUresult cuGraphAddMemsetNode(void **out, void *hg, void **deps, size_t n, const memset_params_t *m, void *ctx) {
    ADD_PROLOGUE("cuGraphAddMemsetNode");
    if (!r) r = prep_memset("cuGraphAddMemsetNode", m, ctx, &p);
    ADD_EPILOGUE(NULL);
}
CUresult cuGraphAddHostNode(void **out, void *hg, void **deps, size_t n, const host_params_t *h) {
    ADD_PROLOGUE("cuGraphAddHostNode");
    if (!r) r = prep_host(h, &p);
    ADD_EPILOGUE(NULL);
}
CUresult cuGraphAddEmptyNode(void **out, void *hg, void **deps, size_t n) {
    ADD_PROLOGUE("cuGraphAddEmptyNode");
    memset(&p, 0, sizeof p);
    p.type = NT_EMPTY;
    ADD_EPILOGUE(NULL);
}
CUresult cuGraphAddChildGraphNode(void **out, void *hg, void **deps, size_t n, void *child) {
    ADD_PROLOGUE("cuGraphAddChildGraphNode");
    if (!r) r = prep_child("cuGraphAddChildGraphNode", g, child, 0, &p);
    ADD_EPILOGUE(NULL);
}
CUresult cuGraphAddEventRecordNode(void **out, void *hg, void **deps, size_t n, void *e) {
    ADD_PROLOGUE("cuGraphAddEventRecordNode");
    if (!r) r = prep_event("cuGraphAddEventRecordNode", NT_EVENT_RECORD, e, &p);
    ADD_EPILOGUE(NULL);
}
CUresult cuGraphAddEventWaitNode(void **out, void *hg, void **deps, size_t n, void *e) {
    ADD_PROLOGUE("cuGraphAddEventWaitNode");
    if (!r) r = prep_event("cuGraphAddEventWaitNode", NT_WAIT_EVENT, e, &p);
    ADD_EPILOGUE(NULL);
}
CUresult cuGraphAddMemAllocNode(void **out, void *hg, void **deps, size_t n, mem_alloc_params_t *mp) {
    ADD_PROLOGUE("cuGraphAddMemAllocNode");
    if (!r) r = prep_alloc(g, mp, &p, current);
    ADD_EPILOGUE(NULL);
}
CUresult cuGraphAddMemFreeNode(void **out, void *hg, void **deps, size_t n, CUdeviceptr d) {
    ADD_PROLOGUE("cuGraphAddMemFreeNode");
    if (!r) r = prep_free("cuGraphAddMemFreeNode", g, d, &p);
    ADD_EPILOGUE(NULL);
}
static CUresult prep_generic(const char *fn, struct graph *g, node_params_t *np, struct nparams *p) {
    if (!np) return INVALID_VALUE;
    switch (np->type) {
    case NT_KERNEL: return prep_kernel(fn, &np->u.kernel, p, current);
    case NT_MEMCPY: return prep_memcpy(fn, &np->u.memcpy.copyParams, np->u.memcpy.copyCtx, p);
    case NT_MEMSET: return prep_memset(fn, &np->u.memset.p, np->u.memset.ctx, p);
    case NT_HOST: return prep_host(&np->u.host, p);
    case NT_GRAPH:
        if (np->u.graph.ownership != 0 && np->u.graph.ownership != 1) return INVALID_VALUE;
        return prep_child(fn, g, np->u.graph.graph, np->u.graph.ownership == 1, p);
    case NT_EMPTY: memset(p, 0, sizeof *p); p->type = NT_EMPTY; return OK;
    case NT_WAIT_EVENT: case NT_EVENT_RECORD: return prep_event(fn, np->type, np->u.event.event, p);
    case NT_MEM_ALLOC: return prep_alloc(g, &np->u.alloc, p, current);
    case NT_MEM_FREE: return prep_free(fn, g, np->u.free.dptr, p);
    case 8: case 9: case 12: case 13: return NOT_SUPPORTED; /* semaphores, batch memops, conditionals */
    default: return INVALID_VALUE;
    }
}
CUresult cuGraphAddNode_v2(void **out, void *hg, void **deps, const edge_data_t *ed, size_t n, node_params_t *np) {
    ADD_PROLOGUE("cuGraphAddNode");
    for (size_t i = 0; !r && ed && i < n; i++)
        if (ed[i].type > 1) r = INVALID_VALUE;
    if (!r) r = prep_generic("cuGraphAddNode", g, np, &p);
    ADD_EPILOGUE(ed);
}
CUresult cuGraphAddNode(void **out, void *hg, void **deps, size_t n, node_params_t *np) {
    ADD_PROLOGUE("cuGraphAddNode");
    if (!r) r = prep_generic("cuGraphAddNode", g, np, &p);
    ADD_EPILOGUE(NULL);
}

CUresult cuGraphDestroyNode(void *h) {
    ENTER("cuGraphDestroyNode");
    LOCK();
    struct node *n;
    CUresult r = get_node("cuGraphDestroyNode", h, &n);
    if (!r && n->g->memnodes) r = INVALID_VALUE; /* graphs with memory nodes keep their nodes */
    if (!r) {
        struct graph *g = n->g;
        node_kill(n);
        for (int i = 0; i < g->n; i++)
            if (g->nodes[i] == n) { memmove(&g->nodes[i], &g->nodes[i + 1], (g->n - i - 1) * sizeof *g->nodes); g->n--; break; }
    }
    UNLOCK();
    return r;
}

static CUresult edges_change(const char *fn, void *hg, void **from, void **to, const edge_data_t *ed, size_t n, int add) {
    struct graph *g;
    CUresult r = get_graph(fn, hg, &g);
    if (r) return r;
    if (n && (!from || !to)) return INVALID_VALUE;
    if (!add && g->memnodes) return INVALID_VALUE; /* edges of graphs with memory nodes stay */
    edge_data_t zero;
    memset(&zero, 0, sizeof zero);
    size_t done = 0;
    for (; done < n; done++) {
        struct node *a, *b;
        if ((r = get_node(fn, from[done], &a)) || (r = get_node(fn, to[done], &b))) break;
        if (a->g != g || b->g != g || a == b) { r = INVALID_VALUE; break; }
        if (ed && ed[done].type > 1) { r = INVALID_VALUE; break; }
        if (add) {
            if (has_edge(a, b) || reaches(b, a, 0)) { r = INVALID_VALUE; break; } /* duplicate or cycle */
            add_edge(a, b, ed ? ed[done] : zero);
        } else {
            if (!has_edge(a, b)) { r = INVALID_VALUE; break; }
            edge_del(a->out, &a->nout, b);
            edge_del(b->in, &b->nin, a);
        }
    }
    if (r && add) /* all or nothing */
        for (size_t i = 0; i < done; i++) {
            struct node *a = from[i], *b = to[i];
            edge_del(a->out, &a->nout, b);
            edge_del(b->in, &b->nin, a);
        }
    return r;
}
CUresult cuGraphAddDependencies_v2(void *g, void **from, void **to, const edge_data_t *ed, size_t n) {
    ENTER("cuGraphAddDependencies");
    LOCKED(edges_change("cuGraphAddDependencies", g, from, to, ed, n, 1));
}
CUresult cuGraphAddDependencies(void *g, void **from, void **to, size_t n) {
    ENTER("cuGraphAddDependencies");
    LOCKED(edges_change("cuGraphAddDependencies", g, from, to, NULL, n, 1));
}
CUresult cuGraphRemoveDependencies_v2(void *g, void **from, void **to, const edge_data_t *ed, size_t n) {
    ENTER("cuGraphRemoveDependencies");
    LOCKED(edges_change("cuGraphRemoveDependencies", g, from, to, ed, n, 0));
}
CUresult cuGraphRemoveDependencies(void *g, void **from, void **to, size_t n) {
    ENTER("cuGraphRemoveDependencies");
    LOCKED(edges_change("cuGraphRemoveDependencies", g, from, to, NULL, n, 0));
}

/* list answers a "how many / give me up to *num" query. */
static CUresult list(void **v, size_t cnt, void **out, size_t *num) {
    if (!num) return INVALID_VALUE;
    if (!out) { *num = cnt; return OK; }
    size_t i = 0;
    for (; i < cnt && i < *num; i++) out[i] = v[i];
    for (size_t j = i; j < *num; j++) out[j] = NULL;
    *num = i;
    return OK;
}
CUresult cuGraphGetNodes(void *hg, void **nodes, size_t *num) {
    ENTER("cuGraphGetNodes");
    LOCK();
    struct graph *g;
    CUresult r = get_graph("cuGraphGetNodes", hg, &g);
    if (!r) r = list((void **)g->nodes, g->n, nodes, num);
    UNLOCK();
    return r;
}
CUresult cuGraphGetRootNodes(void *hg, void **nodes, size_t *num) {
    ENTER("cuGraphGetRootNodes");
    LOCK();
    struct graph *g;
    CUresult r = get_graph("cuGraphGetRootNodes", hg, &g);
    if (!r) {
        void **v = malloc((g->n + 1) * sizeof *v);
        if (!v) abort();
        size_t c = 0;
        for (int i = 0; i < g->n; i++)
            if (!g->nodes[i]->nin) v[c++] = g->nodes[i];
        r = list(v, c, nodes, num);
        free(v);
    }
    UNLOCK();
    return r;
}
static CUresult get_edges(void *hg, void **from, void **to, edge_data_t *ed, size_t *num) {
    struct graph *g;
    CUresult r = get_graph("cuGraphGetEdges", hg, &g);
    if (r) return r;
    if (!num || (ed && (!from || !to)) || (!from != !to)) return INVALID_VALUE;
    size_t c = 0;
    for (int i = 0; i < g->n; i++) c += g->nodes[i]->nout;
    if (!from) { *num = c; return OK; }
    size_t k = 0;
    for (int i = 0; i < g->n && k < *num; i++)
        for (int j = 0; j < g->nodes[i]->nout && k < *num; j++, k++) {
            struct edge *e = &g->nodes[i]->out[j];
            if (!ed && (e->d.from_port || e->d.to_port || e->d.type)) return LOSSY_QUERY;
            from[k] = g->nodes[i];
            to[k] = e->n;
            if (ed) ed[k] = e->d;
        }
    for (size_t j = k; j < *num; j++) {
        from[j] = to[j] = NULL;
        if (ed) memset(&ed[j], 0, sizeof ed[j]);
    }
    *num = k;
    return OK;
}
CUresult cuGraphGetEdges_v2(void *g, void **from, void **to, edge_data_t *ed, size_t *num) {
    ENTER("cuGraphGetEdges");
    LOCKED(get_edges(g, from, to, ed, num));
}
CUresult cuGraphGetEdges(void *g, void **from, void **to, size_t *num) {
    ENTER("cuGraphGetEdges");
    LOCKED(get_edges(g, from, to, NULL, num));
}
static CUresult node_edges(const char *fn, void *h, void **out, edge_data_t *ed, size_t *num, int in) {
    struct node *n;
    CUresult r = get_node(fn, h, &n);
    if (r) return r;
    if (!num || (ed && !out)) return INVALID_VALUE;
    struct edge *v = in ? n->in : n->out;
    size_t c = in ? n->nin : n->nout;
    if (!out) { *num = c; return OK; }
    size_t k = 0;
    for (; k < c && k < *num; k++) {
        if (!ed && (v[k].d.from_port || v[k].d.to_port || v[k].d.type)) return LOSSY_QUERY;
        out[k] = v[k].n;
        if (ed) ed[k] = v[k].d;
    }
    for (size_t j = k; j < *num; j++) {
        out[j] = NULL;
        if (ed) memset(&ed[j], 0, sizeof ed[j]);
    }
    *num = k;
    return OK;
}
CUresult cuGraphNodeGetDependencies_v2(void *h, void **deps, edge_data_t *ed, size_t *num) {
    ENTER("cuGraphNodeGetDependencies");
    LOCKED(node_edges("cuGraphNodeGetDependencies", h, deps, ed, num, 1));
}
CUresult cuGraphNodeGetDependencies(void *h, void **deps, size_t *num) {
    ENTER("cuGraphNodeGetDependencies");
    LOCKED(node_edges("cuGraphNodeGetDependencies", h, deps, NULL, num, 1));
}
CUresult cuGraphNodeGetDependentNodes_v2(void *h, void **deps, edge_data_t *ed, size_t *num) {
    ENTER("cuGraphNodeGetDependentNodes");
    LOCKED(node_edges("cuGraphNodeGetDependentNodes", h, deps, ed, num, 0));
}
CUresult cuGraphNodeGetDependentNodes(void *h, void **deps, size_t *num) {
    ENTER("cuGraphNodeGetDependentNodes");
    LOCKED(node_edges("cuGraphNodeGetDependentNodes", h, deps, NULL, num, 0));
}
CUresult cuGraphNodeGetType(void *h, int *type) {
    ENTER("cuGraphNodeGetType");
    LOCK();
    struct node *n;
    CUresult r = get_node("cuGraphNodeGetType", h, &n);
    if (!r && !type) r = INVALID_VALUE;
    if (!r) *type = n->p.type;
    UNLOCK();
    return r;
}

/* node parameters, read back and changed */
static CUresult typed_node(const char *fn, void *h, int type, struct node **n) {
    CUresult r = get_node(fn, h, n);
    if (!r && (*n)->p.type != type) r = INVALID_VALUE;
    return r;
}
static void kernel_out(const struct nparams *p, void **argp, kernel_params_t *kp) {
    const struct kcall *k = &p->u.k;
    memset(kp, 0, sizeof *kp);
    kp->func = k->fh == p->kern ? NULL : k->fh;
    kp->kern = p->kern;
    kp->gridDimX = k->grid[0]; kp->gridDimY = k->grid[1]; kp->gridDimZ = k->grid[2];
    kp->blockDimX = k->block[0]; kp->blockDimY = k->block[1]; kp->blockDimZ = k->block[2];
    kp->sharedMemBytes = k->shmem;
    kp->kernelParams = argp;
    kp->ctx = p->ctx;
}
CUresult cuGraphKernelNodeGetParams_v2(void *h, kernel_params_t *kp) {
    ENTER("cuGraphKernelNodeGetParams");
    LOCK();
    struct node *n;
    CUresult r = typed_node("cuGraphKernelNodeGetParams", h, NT_KERNEL, &n);
    if (!r && !kp) r = INVALID_VALUE;
    if (!r) kernel_out(&n->p, n->argp, kp);
    UNLOCK();
    return r;
}
/* set_params replaces a node's parameters with ones of the same kind. */
static CUresult set_params(struct node *n, struct nparams *p) {
    if (p->type != n->p.type) return INVALID_VALUE;
    n->p = *p;
    if (p->type == NT_KERNEL) set_argp(n);
    return OK;
}
CUresult cuGraphKernelNodeSetParams_v2(void *h, const kernel_params_t *kp) {
    ENTER("cuGraphKernelNodeSetParams");
    LOCK();
    struct node *n;
    struct nparams p;
    CUresult r = typed_node("cuGraphKernelNodeSetParams", h, NT_KERNEL, &n);
    if (!r) r = prep_kernel("cuGraphKernelNodeSetParams", kp, &p, current);
    if (!r) r = set_params(n, &p);
    UNLOCK();
    return r;
}
CUresult cuGraphMemcpyNodeGetParams(void *h, memcpy3d_t *c) {
    ENTER("cuGraphMemcpyNodeGetParams");
    LOCK();
    struct node *n;
    CUresult r = typed_node("cuGraphMemcpyNodeGetParams", h, NT_MEMCPY, &n);
    if (!r && !c) r = INVALID_VALUE;
    if (!r) *c = n->p.u.c;
    UNLOCK();
    return r;
}
CUresult cuGraphMemcpyNodeSetParams(void *h, const memcpy3d_t *c) {
    ENTER("cuGraphMemcpyNodeSetParams");
    LOCK();
    struct node *n;
    struct nparams p;
    CUresult r = typed_node("cuGraphMemcpyNodeSetParams", h, NT_MEMCPY, &n);
    if (!r) r = prep_memcpy("cuGraphMemcpyNodeSetParams", c, n->p.ctx, &p);
    if (!r) r = set_params(n, &p);
    UNLOCK();
    return r;
}
CUresult cuGraphMemsetNodeGetParams(void *h, memset_params_t *m) {
    ENTER("cuGraphMemsetNodeGetParams");
    LOCK();
    struct node *n;
    CUresult r = typed_node("cuGraphMemsetNodeGetParams", h, NT_MEMSET, &n);
    if (!r && !m) r = INVALID_VALUE;
    if (!r) *m = n->p.u.m;
    UNLOCK();
    return r;
}
CUresult cuGraphMemsetNodeSetParams(void *h, const memset_params_t *m) {
    ENTER("cuGraphMemsetNodeSetParams");
    LOCK();
    struct node *n;
    struct nparams p;
    CUresult r = typed_node("cuGraphMemsetNodeSetParams", h, NT_MEMSET, &n);
    if (!r) r = prep_memset("cuGraphMemsetNodeSetParams", m, n->p.ctx, &p);
    if (!r) r = set_params(n, &p);
    UNLOCK();
    return r;
}
CUresult cuGraphHostNodeGetParams(void *h, host_params_t *hp) {
    ENTER("cuGraphHostNodeGetParams");
    LOCK();
    struct node *n;
    CUresult r = typed_node("cuGraphHostNodeGetParams", h, NT_HOST, &n);
    if (!r && !hp) r = INVALID_VALUE;
    if (!r) *hp = n->p.u.h;
    UNLOCK();
    return r;
}
CUresult cuGraphHostNodeSetParams(void *h, const host_params_t *hp) {
    ENTER("cuGraphHostNodeSetParams");
    LOCK();
    struct node *n;
    struct nparams p;
    CUresult r = typed_node("cuGraphHostNodeSetParams", h, NT_HOST, &n);
    if (!r) r = prep_host(hp, &p);
    if (!r) r = set_params(n, &p);
    UNLOCK();
    return r;
}
CUresult cuGraphChildGraphNodeGetGraph(void *h, void **g) {
    ENTER("cuGraphChildGraphNodeGetGraph");
    LOCK();
    struct node *n;
    CUresult r = typed_node("cuGraphChildGraphNodeGetGraph", h, NT_GRAPH, &n);
    if (!r && !g) r = INVALID_VALUE;
    if (!r) *g = n->p.u.child;
    UNLOCK();
    return r;
}
static CUresult event_node_get(const char *fn, void *h, int type, void **e) {
    struct node *n;
    CUresult r = typed_node(fn, h, type, &n);
    if (!r && !e) r = INVALID_VALUE;
    if (!r) *e = n->p.u.e;
    return r;
}
static CUresult event_node_set(const char *fn, void *h, int type, void *e) {
    struct node *n;
    struct nparams p;
    CUresult r = typed_node(fn, h, type, &n);
    if (!r) r = prep_event(fn, type, e, &p);
    if (!r) r = set_params(n, &p);
    return r;
}
CUresult cuGraphEventRecordNodeGetEvent(void *h, void **e) { ENTER("cuGraphEventRecordNodeGetEvent"); LOCKED(event_node_get("cuGraphEventRecordNodeGetEvent", h, NT_EVENT_RECORD, e)); }
CUresult cuGraphEventRecordNodeSetEvent(void *h, void *e) { ENTER("cuGraphEventRecordNodeSetEvent"); LOCKED(event_node_set("cuGraphEventRecordNodeSetEvent", h, NT_EVENT_RECORD, e)); }
CUresult cuGraphEventWaitNodeGetEvent(void *h, void **e) { ENTER("cuGraphEventWaitNodeGetEvent"); LOCKED(event_node_get("cuGraphEventWaitNodeGetEvent", h, NT_WAIT_EVENT, e)); }
CUresult cuGraphEventWaitNodeSetEvent(void *h, void *e) { ENTER("cuGraphEventWaitNodeSetEvent"); LOCKED(event_node_set("cuGraphEventWaitNodeSetEvent", h, NT_WAIT_EVENT, e)); }
CUresult cuGraphMemAllocNodeGetParams(void *h, mem_alloc_params_t *mp) {
    ENTER("cuGraphMemAllocNodeGetParams");
    LOCK();
    struct node *n;
    CUresult r = typed_node("cuGraphMemAllocNodeGetParams", h, NT_MEM_ALLOC, &n);
    if (!r && !mp) r = INVALID_VALUE;
    if (!r) {
        memset(mp, 0, sizeof *mp);
        mp->poolProps = n->p.u.ma.props;
        mp->bytesize = n->p.u.ma.a->size;
        mp->dptr = n->p.u.ma.a->base;
    }
    UNLOCK();
    return r;
}
CUresult cuGraphMemFreeNodeGetParams(void *h, CUdeviceptr *d) {
    ENTER("cuGraphMemFreeNodeGetParams");
    LOCK();
    struct node *n;
    CUresult r = typed_node("cuGraphMemFreeNodeGetParams", h, NT_MEM_FREE, &n);
    if (!r && !d) r = INVALID_VALUE;
    if (!r) *d = n->p.u.free;
    UNLOCK();
    return r;
}
/* prep_set turns generic parameters into a kernel, memcpy, memset, host or
   event node's new parameters. */
static CUresult prep_set(const char *fn, node_params_t *np, struct nparams *p) {
    if (!np) return INVALID_VALUE;
    switch (np->type) {
    case NT_KERNEL: case NT_MEMCPY: case NT_MEMSET: case NT_HOST: case NT_WAIT_EVENT: case NT_EVENT_RECORD:
        return prep_generic(fn, NULL, np, p);
    default: return NOT_SUPPORTED;
    }
}
CUresult cuGraphNodeSetParams(void *h, node_params_t *np) {
    ENTER("cuGraphNodeSetParams");
    LOCK();
    struct node *n;
    struct nparams p;
    CUresult r = get_node("cuGraphNodeSetParams", h, &n);
    if (!r) r = prep_set("cuGraphNodeSetParams", np, &p);
    if (!r) r = set_params(n, &p);
    UNLOCK();
    return r;
}

CUresult cuGraphClone(void **out, void *hg) {
    ENTER("cuGraphClone");
    LOCK();
    struct graph *g;
    CUresult r = get_graph("cuGraphClone", hg, &g);
    if (!r && !out) r = INVALID_VALUE;
    if (!r && g->memnodes) r = NOT_SUPPORTED; /* graphs with memory nodes cannot be cloned */
    if (!r) *out = clone_graph(g, 0);
    UNLOCK();
    return r;
}
CUresult cuGraphNodeFindInClone(void **out, void *orig, void *hc) {
    ENTER("cuGraphNodeFindInClone");
    LOCK();
    struct graph *c;
    struct node *o;
    CUresult r = get_graph("cuGraphNodeFindInClone", hc, &c);
    if (!r) r = get_node("cuGraphNodeFindInClone", orig, &o);
    if (!r && !out) r = INVALID_VALUE;
    if (!r) {
        r = INVALID_VALUE;
        for (int i = 0; i < c->n; i++)
            if (c->nodes[i]->orig == o) { *out = c->nodes[i]; r = OK; break; }
    }
    UNLOCK();
    return r;
}

/* executables */
static CUresult get_exec(const char *fn, void *h, struct exec **out) {
    *out = NULL;
    struct exec *x = reg_get(h, K_EXEC);
    if (!x || !x->h.alive) return bad_handle(fn, h, "graph exec", INVALID_HANDLE);
    use_mark(&x->use, "graph exec", x, 0);
    *out = x;
    return OK;
}
static CUresult instantiate(const char *fn, void **out, void *hg, unsigned long long flags, void *upload, int *result) {
    struct graph *g;
    if (result) *result = 1; /* CUDA_GRAPH_INSTANTIATE_ERROR until it works */
    CUresult r = get_graph(fn, hg, &g);
    if (r) return r;
    if (!out || (flags & ~15ull)) return INVALID_VALUE;
    if (g->memnodes && g->nexecs) return INVALID_VALUE; /* one executable at a time */
    if (flags & 2) { /* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD */
        struct stream *s;
        if ((r = get_stream(fn, upload, &s))) return r;
    }
    struct plan *pl = make_plan(g);
    if (!pl) {
        if (result) *result = 2; /* CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE */
        return INVALID_VALUE;
    }
    if ((flags & 4) && mgraph_contexts(pl) > 1) { /* CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH */
        plan_unref(pl);
        if (result) *result = 4; /* CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED */
        return INVALID_VALUE;
    }
    struct exec *x = new_obj(sizeof *x, K_EXEC, current);
    x->pl = pl;
    x->flags = flags;
    x->src = g;
    if (g->memnodes) { x->memsrc = g; g->nexecs++; }
    INC(live_execs);
    *out = x;
    if (result) *result = 0;
    return OK;
}
CUresult cuGraphInstantiateWithFlags(void **out, void *g, unsigned long long flags) {
    ENTER("cuGraphInstantiateWithFlags");
    GRAPH_CTX();
    LOCKED(instantiate("cuGraphInstantiateWithFlags", out, g, flags, NULL, NULL));
}
CUresult cuGraphInstantiateWithParams(void **out, void *g, instantiate_params_t *ip) {
    ENTER("cuGraphInstantiateWithParams");
    GRAPH_CTX();
    if (!ip) return INVALID_VALUE;
    ip->hErrNode_out = NULL;
    LOCKED(instantiate("cuGraphInstantiateWithParams", out, g, ip->flags, ip->hUploadStream, &ip->result_out));
}
CUresult cuGraphInstantiate_v2(void **out, void *g, void **errnode, char *log, size_t logsize) {
    ENTER("cuGraphInstantiate");
    GRAPH_CTX();
    if (errnode) *errnode = NULL;
    if (log && logsize) log[0] = 0;
    LOCKED(instantiate("cuGraphInstantiate", out, g, 0, NULL, NULL));
}
CUresult cuGraphExecDestroy(void *h) {
    ENTER("cuGraphExecDestroy");
    LOCK();
    struct exec *x;
    CUresult r = get_exec("cuGraphExecDestroy", h, &x);
    if (!r && x->src->h.alive) use_graph(x->src, 0); /* the driver touches the source graph too */
    if (!r) {
        x->h.alive = 0;
        DEC(live_execs);
        if (x->memsrc) x->memsrc->nexecs--;
        plan_unref(x->pl); /* launches in flight hold their own references */
        x->pl = NULL;
    }
    UNLOCK();
    return r;
}
CUresult cuGraphExecGetFlags(void *h, unsigned long long *flags) {
    ENTER("cuGraphExecGetFlags");
    LOCK();
    struct exec *x;
    CUresult r = get_exec("cuGraphExecGetFlags", h, &x);
    if (!r) *flags = x->flags;
    UNLOCK();
    return r;
}
/* foreign_ctx_launch counts a launch or upload, on a thread with no current
   context, of an executable with a kernel, memcpy or memset node in another
   context than the stream's (lock held). The call still proceeds: counted
   only. Unmeasured, and conservative: the real driver crashed once inside
   such a launch (SIGSEGV at 0x68, the graph stress on an H200, driver 580),
   as it does for node adds without a context (DESIGN fact 1). */
static void foreign_ctx_launch(const char *fn, const struct exec *x, const struct stream *s) {
    if (have_ctx() || !x->pl) return;
    for (int i = 0; i < x->pl->n; i++) {
        const struct nparams *p = &x->pl->x[i].p;
        if (p->type != NT_KERNEL && p->type != NT_MEMCPY && p->type != NT_MEMSET) continue;
        if (p->ctx && p->ctx != s->h.ctx) {
            INC(no_ctx_graph_calls);
            note_bad("no current context", fn, "an executable with nodes in several contexts");
            return;
        }
    }
}
static CUresult graph_launch(void *hx, void *hs) {
    const char *fn = "cuGraphLaunch";
    struct stream *s;
    struct exec *x;
    CUresult r = get_exec(fn, hx, &x);
    if (!r) r = get_stream(fn, hs, &s);
    if (r) return r;
    if (sticky) return sticky;
    foreign_ctx_launch(fn, x, s);
    if (s->cap) { /* capturing a graph launch is not modelled */
        capture_invalidate(s->cap);
        return CAPTURE_UNSUPPORTED;
    }
    struct plan *pl = x->pl;
    int autofree = (x->flags & 1) != 0; /* CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
    for (int i = 0; i < pl->n; i++) {
        if (pl->x[i].p.type != NT_MEM_ALLOC) continue;
        struct alloc *a = pl->x[i].p.u.ma.a;
        int freed_here = 0;
        for (int j = 0; j < pl->n; j++)
            if (pl->x[j].p.type == NT_MEM_FREE && pl->x[j].p.u.free == a->base) freed_here = 1;
        if (!freed_here && !autofree && (a->live || a->alloc_pending)) return INVALID_VALUE;
    }
    struct op *o = new_op(OP_GRAPH, fn);
    o->u.g.x = x;
    o->u.g.pl = pl;
    o->u.g.autofree = autofree;
    o->u.g.gens = calloc(pl->n + 1, sizeof *o->u.g.gens);
    if (!o->u.g.gens) abort();
    for (int i = 0; i < pl->n; i++) {
        struct xnode *n = &pl->x[i];
        if (n->p.type == NT_EVENT_RECORD) o->u.g.gens[i] = ++n->p.u.e->rec_gen;
        else if (n->p.type == NT_WAIT_EVENT) o->u.g.gens[i] = n->p.u.e->rec_gen;
        else if (n->p.type == NT_MEM_ALLOC) n->p.u.ma.a->alloc_pending = 1;
    }
    pl->refs++;
    x->inflight++;
    if ((r = enqueue(s, o))) {
        graph_done(o);
        free(o);
    }
    return r;
}
CUresult cuGraphLaunch(void *x, void *s) {
    ENTER("cuGraphLaunch");
    NOT_STALE();
    LOCKED(graph_launch(x, s));
}
CUresult cuGraphUpload(void *hx, void *hs) {
    ENTER("cuGraphUpload");
    NOT_STALE();
    LOCK();
    struct exec *x;
    struct stream *s;
    CUresult r = get_exec("cuGraphUpload", hx, &x);
    if (!r) r = get_stream("cuGraphUpload", hs, &s);
    if (!r) r = sticky;
    if (!r) foreign_ctx_launch("cuGraphUpload", x, s);
    UNLOCK();
    return r;
}
static CUresult exec_update(void *hx, void *hg, update_result_t *info) {
    struct exec *x;
    struct graph *g;
    CUresult r = get_exec("cuGraphExecUpdate", hx, &x);
    if (!r) r = get_graph("cuGraphExecUpdate", hg, &g);
    if (r) return r;
    if (!info) return INVALID_VALUE;
    memset(info, 0, sizeof *info);
    struct plan *pl = make_plan(g);
    if (!pl) { info->result = 1; return EXEC_UPDATE_FAILURE; }
    struct plan *old = x->pl;
    int res = 0;
    if (pl->n != old->n || g->memnodes || x->memsrc) res = 2; /* TOPOLOGY_CHANGED; memory nodes are not updatable */
    for (int i = 0; !res && i < pl->n; i++) {
        if (pl->x[i].p.type != old->x[i].p.type) { res = 3; info->errorNode = pl->x[i].src; }
        else if (pl->x[i].p.type == NT_KERNEL && pl->x[i].p.u.k.f->h.ctx != old->x[i].p.u.k.f->h.ctx) {
            res = 7; /* UNSUPPORTED_FUNCTION_CHANGE */
            info->errorNode = pl->x[i].src;
        }
    }
    if (res) {
        info->result = res;
        plan_unref(pl);
        return EXEC_UPDATE_FAILURE;
    }
    for (int i = 0; i < pl->n; i++) pl->x[i].src = old->x[i].src; /* nodes keep naming the original graph's */
    x->pl = pl;
    plan_unref(old);
    return OK;
}
CUresult cuGraphExecUpdate_v2(void *x, void *g, update_result_t *info) {
    ENTER("cuGraphExecUpdate");
    LOCKED(exec_update(x, g, info));
}
/* exec_set gives one node of an executable new parameters, in a copy of
   its plan so that launches in flight keep the old ones. */
static CUresult exec_set(const char *fn, void *hx, void *hn, struct nparams *p) {
    struct exec *x;
    struct node *n;
    CUresult r = get_exec(fn, hx, &x);
    if (!r) r = find_node(fn, hn, &n);
    if (r) return r;
    int i = 0;
    while (i < x->pl->n && x->pl->x[i].src != n) i++;
    if (i == x->pl->n || x->pl->x[i].p.type != p->type) return INVALID_VALUE;
    if (p->type == NT_KERNEL && p->u.k.f->h.ctx != x->pl->x[i].p.u.k.f->h.ctx) return INVALID_VALUE;
    struct plan *c = plan_copy(x->pl);
    c->x[i].p = *p;
    plan_unref(x->pl);
    x->pl = c;
    return OK;
}
CUresult cuGraphExecKernelNodeSetParams_v2(void *x, void *n, const kernel_params_t *kp) {
    ENTER("cuGraphExecKernelNodeSetParams");
    LOCK();
    struct nparams p;
    CUresult r = prep_kernel("cuGraphExecKernelNodeSetParams", kp, &p, current);
    if (!r) r = exec_set("cuGraphExecKernelNodeSetParams", x, n, &p);
    UNLOCK();
    return r;
}
CUresult cuGraphExecMemcpyNodeSetParams(void *x, void *n, const memcpy3d_t *c, void *ctx) {
    ENTER("cuGraphExecMemcpyNodeSetParams");
    LOCK();
    struct nparams p;
    CUresult r = prep_memcpy("cuGraphExecMemcpyNodeSetParams", c, ctx, &p);
    if (!r) r = exec_set("cuGraphExecMemcpyNodeSetParams", x, n, &p);
    UNLOCK();
    return r;
}
CUresult cuGraphExecMemsetNodeSetParams(void *x, void *n, const memset_params_t *m, void *ctx) {
    ENTER("cuGraphExecMemsetNodeSetParams");
    LOCK();
    struct nparams p;
    CUresult r = prep_memset("cuGraphExecMemsetNodeSetParams", m, ctx, &p);
    if (!r) r = exec_set("cuGraphExecMemsetNodeSetParams", x, n, &p);
    UNLOCK();
    return r;
}
CUresult cuGraphExecHostNodeSetParams(void *x, void *n, const host_params_t *hp) {
    ENTER("cuGraphExecHostNodeSetParams");
    LOCK();
    struct nparams p;
    CUresult r = prep_host(hp, &p);
    if (!r) r = exec_set("cuGraphExecHostNodeSetParams", x, n, &p);
    UNLOCK();
    return r;
}
CUresult cuGraphExecEventRecordNodeSetEvent(void *x, void *n, void *e) {
    ENTER("cuGraphExecEventRecordNodeSetEvent");
    LOCK();
    struct nparams p;
    CUresult r = prep_event("cuGraphExecEventRecordNodeSetEvent", NT_EVENT_RECORD, e, &p);
    if (!r) r = exec_set("cuGraphExecEventRecordNodeSetEvent", x, n, &p);
    UNLOCK();
    return r;
}
CUresult cuGraphExecEventWaitNodeSetEvent(void *x, void *n, void *e) {
    ENTER("cuGraphExecEventWaitNodeSetEvent");
    LOCK();
    struct nparams p;
    CUresult r = prep_event("cuGraphExecEventWaitNodeSetEvent", NT_WAIT_EVENT, e, &p);
    if (!r) r = exec_set("cuGraphExecEventWaitNodeSetEvent", x, n, &p);
    UNLOCK();
    return r;
}
CUresult cuGraphExecNodeSetParams(void *x, void *n, node_params_t *np) {
    ENTER("cuGraphExecNodeSetParams");
    LOCK();
    struct nparams p;
    CUresult r = prep_set("cuGraphExecNodeSetParams", np, &p);
    if (!r) r = exec_set("cuGraphExecNodeSetParams", x, n, &p);
    UNLOCK();
    return r;
}

/* DOT output */
static const char *type_name[] = {"KERNEL", "MEMCPY", "MEMSET", "HOST", "GRAPH", "EMPTY", "WAIT_EVENT",
                                  "EVENT_RECORD", "EXT_SEMAS_SIGNAL", "EXT_SEMAS_WAIT", "MEM_ALLOC", "MEM_FREE"};
static void dot_graph(FILE *f, struct graph *g, int verbose_, int *cluster) {
    fprintf(f, "subgraph cluster_%d {\nlabel=\"graph %p\";\n", (*cluster)++, (void *)g);
    for (int i = 0; i < g->n; i++) {
        struct node *n = g->nodes[i];
        fprintf(f, "\"%p\" [label=\"%s", (void *)n, type_name[n->p.type]);
        if (n->p.type == NT_KERNEL) {
            fprintf(f, "\\n%s", n->p.u.k.f->k->name);
            if (verbose_)
                fprintf(f, "\\n<<<(%u,%u,%u),(%u,%u,%u),%u>>>", n->p.u.k.grid[0], n->p.u.k.grid[1], n->p.u.k.grid[2],
                        n->p.u.k.block[0], n->p.u.k.block[1], n->p.u.k.block[2], n->p.u.k.shmem);
        } else if (n->p.type == NT_MEMSET && verbose_) {
            fprintf(f, "\\ndst 0x%llx value %u size %u", n->p.u.m.dst, n->p.u.m.value, n->p.u.m.elementSize);
        } else if (n->p.type == NT_MEMCPY && verbose_) {
            fprintf(f, "\\n%zu bytes", n->p.u.c.WidthInBytes * n->p.u.c.Height * n->p.u.c.Depth);
        } else if (n->p.type == NT_MEM_ALLOC) {
            fprintf(f, "\\n0x%llx %zu bytes", (CUdeviceptr)n->p.u.ma.a->base, n->p.u.ma.a->size);
        }
        fprintf(f, "\"];\n");
        if (n->p.type == NT_GRAPH) dot_graph(f, n->p.u.child, verbose_, cluster);
    }
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i]->nout; j++)
            fprintf(f, "\"%p\" -> \"%p\";\n", (void *)g->nodes[i], (void *)g->nodes[i]->out[j].n);
    fprintf(f, "}\n");
}
CUresult cuGraphDebugDotPrint(void *hg, const char *path, unsigned flags) {
    ENTER("cuGraphDebugDotPrint");
    LOCK();
    struct graph *g;
    CUresult r = get_graph("cuGraphDebugDotPrint", hg, &g);
    if (!r && !path) r = INVALID_VALUE;
    if (!r) {
        FILE *f = fopen(path, "w");
        if (!f) r = OPERATING_SYSTEM;
        else {
            int cluster = 0;
            fprintf(f, "digraph fakecuda {\n");
            dot_graph(f, g, flags & 1, &cluster);
            fprintf(f, "}\n");
            if (fclose(f)) r = OPERATING_SYSTEM;
        }
    }
    UNLOCK();
    return r;
}

/* user objects */
static CUresult get_uobj(const char *fn, void *h, struct uobj **out) {
    *out = NULL;
    struct uobj *o = reg_get(h, K_UOBJ);
    if (!o || !o->h.alive) return bad_handle(fn, h, "user object", INVALID_HANDLE);
    *out = o;
    return OK;
}
CUresult cuUserObjectCreate(void **out, void *ptr, hostfn destroy, unsigned refs, unsigned flags) {
    ENTER("cuUserObjectCreate");
    if (!out || !destroy || !refs || flags != 1) return INVALID_VALUE; /* CU_USER_OBJECT_NO_DESTRUCTOR_SYNC */
    LOCK();
    struct uobj *o = new_obj(sizeof *o, K_UOBJ, NULL);
    o->ptr = ptr;
    o->destroy = destroy;
    o->refs = refs;
    INC(live_uobjs);
    *out = o;
    UNLOCK();
    return OK;
}
CUresult cuUserObjectRetain(void *h, unsigned n) {
    ENTER("cuUserObjectRetain");
    LOCK();
    struct uobj *o;
    CUresult r = get_uobj("cuUserObjectRetain", h, &o);
    if (!r && !n) r = INVALID_VALUE;
    if (!r) o->refs += n;
    UNLOCK();
    return r;
}
CUresult cuUserObjectRelease(void *h, unsigned n) {
    ENTER("cuUserObjectRelease");
    LOCK();
    struct uobj *o;
    CUresult r = get_uobj("cuUserObjectRelease", h, &o);
    if (!r && !n) r = INVALID_VALUE;
    if (!r && n > o->refs) r = bad_handle("cuUserObjectRelease", h, "user object (released more than retained)", INVALID_VALUE);
    if (!r) uobj_release(o, n);
    UNLOCK();
    return r;
}
CUresult cuGraphRetainUserObject(void *hg, void *h, unsigned n, unsigned flags) {
    ENTER("cuGraphRetainUserObject");
    LOCK();
    struct graph *g;
    struct uobj *o;
    CUresult r = get_graph("cuGraphRetainUserObject", hg, &g);
    if (!r) r = get_uobj("cuGraphRetainUserObject", h, &o);
    if (!r && (!n || (flags & ~1u))) r = INVALID_VALUE;
    if (!r && (flags & 1) && n > o->refs) r = bad_handle("cuGraphRetainUserObject", h, "user object (moving references not held)", INVALID_VALUE);
    if (!r) {
        if (!(flags & 1)) o->refs += n; /* CU_GRAPH_USER_OBJECT_MOVE takes the caller's */
        uoset_add(&g->uo, o, n);
    }
    UNLOCK();
    return r;
}
CUresult cuGraphReleaseUserObject(void *hg, void *h, unsigned n) {
    ENTER("cuGraphReleaseUserObject");
    LOCK();
    struct graph *g;
    CUresult r = get_graph("cuGraphReleaseUserObject", hg, &g);
    if (!r && !n) r = INVALID_VALUE;
    if (!r) {
        int i = 0;
        while (i < g->uo.n && g->uo.v[i].o != h) i++;
        if (i == g->uo.n || g->uo.v[i].n < (long)n) r = INVALID_VALUE; /* the graph holds fewer */
        else {
            struct uobj *o = g->uo.v[i].o;
            if ((g->uo.v[i].n -= n) == 0) g->uo.v[i] = g->uo.v[--g->uo.n];
            uobj_release(o, n);
        }
    }
    UNLOCK();
    return r;
}
CUresult cuDeviceGraphMemTrim(int dev) { ENTER("cuDeviceGraphMemTrim"); return dev ? INVALID_DEVICE : OK; }

/* node enabling, child-graph updates, conditional handles */
static CUresult exec_node_at(const char *fn, void *hx, void *hn, struct exec **x, int *at) {
    struct node *n;
    CUresult r = get_exec(fn, hx, x);
    if (!r) r = find_node(fn, hn, &n);
    if (r) return r;
    for (*at = 0; *at < (*x)->pl->n; (*at)++)
        if ((*x)->pl->x[*at].src == n) return OK;
    return INVALID_VALUE;
}
CUresult cuGraphNodeSetEnabled(void *hx, void *hn, unsigned enabled) {
    ENTER("cuGraphNodeSetEnabled");
    LOCK();
    struct exec *x;
    int i;
    CUresult r = exec_node_at("cuGraphNodeSetEnabled", hx, hn, &x, &i);
    if (!r) {
        int t = x->pl->x[i].p.type;
        if (t != NT_KERNEL && t != NT_MEMCPY && t != NT_MEMSET) r = INVALID_VALUE;
    }
    if (!r && x->pl->x[i].disabled != !enabled) {
        struct plan *c = plan_copy(x->pl);
        c->x[i].disabled = !enabled;
        plan_unref(x->pl);
        x->pl = c;
    }
    UNLOCK();
    return r;
}
CUresult cuGraphNodeGetEnabled(void *hx, void *hn, unsigned *enabled) {
    ENTER("cuGraphNodeGetEnabled");
    LOCK();
    struct exec *x;
    int i;
    CUresult r = exec_node_at("cuGraphNodeGetEnabled", hx, hn, &x, &i);
    if (!r && !enabled) r = INVALID_VALUE;
    if (!r) *enabled = !x->pl->x[i].disabled;
    UNLOCK();
    return r;
}
/* cuGraphExecChildGraphNodeSetParams: the new child must have the shape of
   the one instantiated; its nodes' parameters replace those in the
   executable, and the executable takes references to its user objects
   (those of the old child are kept until the executable goes). */
CUresult cuGraphExecChildGraphNodeSetParams(void *hx, void *hn, void *hc) {
    const char *fn = "cuGraphExecChildGraphNodeSetParams";
    ENTER(fn);
    LOCK();
    struct exec *x;
    struct node *n;
    struct graph *child;
    CUresult r = get_exec(fn, hx, &x);
    if (!r) r = find_node(fn, hn, &n);
    if (!r) r = get_graph(fn, hc, &child);
    if (!r && (n->p.type != NT_GRAPH || child->memnodes)) r = INVALID_VALUE;
    struct plan *np = r ? NULL : make_plan(child);
    if (!r && !np) r = INVALID_VALUE;
    if (!r) {
        int k = 0;
        for (int i = 0; i < x->pl->n && !r; i++) {
            if (x->pl->x[i].via != n) continue;
            if (k >= np->n || np->x[k].p.type != x->pl->x[i].p.type) r = INVALID_VALUE;
            k++;
        }
        if (!r && k != np->n) r = INVALID_VALUE; /* the topology changed */
        if (!r) {
            struct plan *c = plan_copy(x->pl);
            k = 0;
            for (int i = 0; i < c->n; i++)
                if (c->x[i].via == n) c->x[i].p = np->x[k++].p;
            uoset_copy(&c->uo, &np->uo);
            plan_unref(x->pl);
            x->pl = c;
        }
    }
    if (np) plan_unref(np);
    UNLOCK();
    return r;
}
CUresult cuGraphConditionalHandleCreate(unsigned long long *h, void *g, void *ctx, unsigned dflt, unsigned flags) {
    ENTER("cuGraphConditionalHandleCreate");
    LOCK();
    struct graph *gr = reg_get(g, K_GRAPH);
    if (gr && gr->h.alive) use_graph(gr, 0); /* a use of the graph, even though it fails */
    UNLOCK();
    return NOT_SUPPORTED; /* conditional nodes are not modelled */
}

/* ============================================================
 * Stream capture
 * ============================================================ */

static CUresult begin_capture(const char *fn, void *hs, void *hg, void **deps, size_t n, int mode) {
    struct stream *s;
    CUresult r = get_stream(fn, hs, &s);
    if (r) return r;
    if (mode < CM_GLOBAL || mode > CM_RELAXED) return INVALID_VALUE;
    if (s->special == 1) return CAPTURE_UNSUPPORTED; /* the legacy stream cannot be captured */
    if (s->cap) return ILLEGAL_STATE;
    struct graph *g = NULL;
    if (hg) {
        /* The begin is capture work on g: the driver orders it with the work
           captured after it (a mark as "capturing"), not with other calls. */
        g = reg_get(hg, K_GRAPH);
        if (!g || !g->h.alive) return bad_handle(fn, hg, "graph", INVALID_HANDLE);
        use_graph(g, 1);
        if (n && !deps) return INVALID_VALUE;
        for (size_t i = 0; i < n; i++) {
            struct node *d;
            if ((r = get_node(fn, deps[i], &d))) return r;
            if (d->g != g) return INVALID_VALUE;
        }
    }
    struct capture *c = calloc(1, sizeof *c); /* kept: events may still name it */
    if (!c) abort();
    c->status = 1;
    c->mode = mode;
    c->id = next_id++;
    c->thread = pthread_self();
    c->origin = s;
    c->ctx = s->h.ctx;
    if (g) c->g = g;
    else {
        c->g = new_graph();
        c->owns_graph = 1;
        INC(live_graphs);
    }
    c->next = captures;
    captures = c;
    s->cap = c;
    sdeps_set(s, (struct node *const *)deps, g ? (int)n : 0);
    return OK;
}
CUresult cuStreamBeginCapture_v2(void *hs, int mode) {
    ENTER("cuStreamBeginCapture");
    LOCKED(begin_capture("cuStreamBeginCapture", hs, NULL, NULL, 0, mode));
}
CUresult cuStreamBeginCaptureToGraph(void *hs, void *hg, void **deps, const edge_data_t *ed, size_t n, int mode) {
    ENTER("cuStreamBeginCaptureToGraph");
    if (!hg) return INVALID_VALUE;
    LOCKED(begin_capture("cuStreamBeginCaptureToGraph", hs, hg, deps, n, mode));
}
/* joined: a node captured on a forked stream is joined when the stream of
   origin's dependencies include it or come after it. */
static int joined(struct node *d, struct stream *origin) {
    for (int i = 0; i < origin->ncdeps; i++)
        if (reaches(d, origin->cdeps[i], 0)) return 1;
    return 0;
}
static CUresult end_capture(void *hs, void **out) {
    struct stream *s;
    CUresult r = get_stream("cuStreamEndCapture", hs, &s);
    if (r) return r;
    if (!out) return INVALID_VALUE;
    struct capture *c = s->cap;
    if (!c) return ILLEGAL_STATE;
    if (c->origin != s) return CAPTURE_UNMATCHED;
    if (c->mode != CM_RELAXED && !pthread_equal(c->thread, pthread_self())) return CAPTURE_WRONG_THREAD;
    for (struct stream *x = active_streams; x && c->status == 1; x = x->anext)
        if (x != s && x->cap == c)
            for (int i = 0; i < x->ncdeps; i++)
                if (x->cdeps[i]->h.alive && !joined(x->cdeps[i], s)) { capture_invalidate(c); r = CAPTURE_UNJOINED; break; }
    if (!r && c->status != 1) r = CAPTURE_INVALIDATED;
    capture_finish(c);
    if (r) {
        *out = NULL;
        if (c->owns_graph) graph_kill(c->g);
        return r;
    }
    *out = c->g;
    return OK;
}
CUresult cuStreamEndCapture(void *hs, void **out) {
    ENTER("cuStreamEndCapture");
    LOCK();
    struct stream *st = reg_get(hs, K_STREAM);
    struct graph *g = st && st->h.alive && st->cap ? st->cap->g : NULL; /* its marker outlives it */
    CUresult r = end_capture(hs, out);
    UNLOCK();
    /* The driver serialises captured work with the end of its capture: a
       call whose work was captured is over before the end returns, even a
       failed end (its mark, held through the graph-call delay, is gone). */
    for (int caps = g != NULL; caps;) {
        pthread_mutex_lock(&use_mu);
        caps = g->use.caps;
        pthread_mutex_unlock(&use_mu);
        if (caps) sleep_us(5);
    }
    return r;
}
static CUresult capture_info(void *hs, int *status, unsigned long long *id, void **graph, void ***deps,
                             const edge_data_t **ed, size_t *n) {
    struct stream *s;
    CUresult r = get_stream("cuStreamGetCaptureInfo", hs, &s);
    if (r) return r;
    if (!status) return INVALID_VALUE;
    struct capture *c = s->cap;
    *status = c ? c->status : 0;
    if (!c) return OK;
    if (id) *id = c->id;
    if (c->status != 1) return OK;
    if (graph) *graph = c->g;
    if (deps) /* valid until the next call on the stream; captured edges carry default data */ *deps = s->ncdeps ? (void **)s->cdeps : NULL;
    if (ed) *ed = s->ncdeps ? s->cedges : NULL;
    if (n) *n = s->ncdeps;
    return OK;
}
CUresult cuStreamGetCaptureInfo_v3(void *hs, int *status, unsigned long long *id, void **graph, void ***deps,
                                   const edge_data_t **ed, size_t *n) {
    ENTER("cuStreamGetCaptureInfo");
    LOCKED(capture_info(hs, status, id, graph, deps, ed, n));
}
CUresult cuStreamGetCaptureInfo_v2(void *hs, int *status, unsigned long long *id, void **graph, void ***deps, size_t *n) {
    ENTER("cuStreamGetCaptureInfo");
    LOCKED(capture_info(hs, status, id, graph, deps, NULL, n));
}
CUresult cuStreamGetCaptureInfo(void *hs, int *status, unsigned long long *id) {
    ENTER("cuStreamGetCaptureInfo");
    LOCKED(capture_info(hs, status, id, NULL, NULL, NULL, NULL));
}
static CUresult update_capture_deps(void *hs, void **deps, size_t n, unsigned flags) {
    struct stream *s;
    CUresult r = get_stream("cuStreamUpdateCaptureDependencies", hs, &s);
    if (r) return r;
    if (!s->cap || s->cap->status != 1) return ILLEGAL_STATE;
    if (flags > 1 || (n && !deps)) return INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        struct node *d;
        if ((r = find_node("cuStreamUpdateCaptureDependencies", deps[i], &d))) return r;
        if (d->g != s->cap->g) return INVALID_VALUE;
    }
    if (flags == 1) sdeps_set(s, (struct node *const *)deps, (int)n); /* CU_STREAM_SET_CAPTURE_DEPENDENCIES */
    else
        for (size_t i = 0; i < n; i++) sdeps_add(s, deps[i]);
    return OK;
}
CUresult cuStreamUpdateCaptureDependencies_v2(void *hs, void **deps, const edge_data_t *ed, size_t n, unsigned flags) {
    ENTER("cuStreamUpdateCaptureDependencies");
    LOCKED(update_capture_deps(hs, deps, n, flags));
}
CUresult cuStreamUpdateCaptureDependencies(void *hs, void **deps, size_t n, unsigned flags) {
    ENTER("cuStreamUpdateCaptureDependencies");
    LOCKED(update_capture_deps(hs, deps, n, flags));
}
CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
    ENTER("cuThreadExchangeStreamCaptureMode");
    if (!mode || *mode < CM_GLOBAL || *mode > CM_RELAXED) return INVALID_VALUE;
    int old = thread_capture_mode;
    thread_capture_mode = *mode;
    *mode = old;
    return OK;
}

/* ============================================================
 * cuGetProcAddress_v2: the entry points with more than one ABI, by the
 * oldest version each serves. Everything else is left to dlsym of the
 * versioned export name, as purecuda falls back to.
 * ============================================================ */

struct gpa_ent { const char *name; int ver; void *fn; };
static const struct gpa_ent gpa_tab[] = {
    {"cuCtxSynchronize", 2000, (void *)cuCtxSynchronize},
    {"cuCtxSynchronize", 13000, (void *)cuCtxSynchronize_v2},
    {"cuCtxCreate", 3020, (void *)cuCtxCreate_v2},
    {"cuCtxCreate", 11040, (void *)cuCtxCreate_v3},
    {"cuCtxCreate", 12050, (void *)cuCtxCreate_v4},
    {"cuCtxGetDevice", 2000, (void *)cuCtxGetDevice},
    {"cuCtxGetDevice", 13000, (void *)cuCtxGetDevice_v2},
    {"cuStreamGetCtx", 9020, (void *)cuStreamGetCtx},
    {"cuStreamGetCtx", 12050, (void *)cuStreamGetCtx_v2},
    {"cuEventElapsedTime", 2000, (void *)cuEventElapsedTime},
    {"cuEventElapsedTime", 12080, (void *)cuEventElapsedTime_v2},
    {"cuGraphAddNode", 12020, (void *)cuGraphAddNode},
    {"cuGraphAddNode", 12030, (void *)cuGraphAddNode_v2},
    {"cuGraphAddDependencies", 10000, (void *)cuGraphAddDependencies},
    {"cuGraphAddDependencies", 12030, (void *)cuGraphAddDependencies_v2},
    {"cuGraphRemoveDependencies", 10000, (void *)cuGraphRemoveDependencies},
    {"cuGraphRemoveDependencies", 12030, (void *)cuGraphRemoveDependencies_v2},
    {"cuGraphGetEdges", 10000, (void *)cuGraphGetEdges},
    {"cuGraphGetEdges", 12030, (void *)cuGraphGetEdges_v2},
    {"cuGraphNodeGetDependencies", 10000, (void *)cuGraphNodeGetDependencies},
    {"cuGraphNodeGetDependencies", 12030, (void *)cuGraphNodeGetDependencies_v2},
    {"cuGraphNodeGetDependentNodes", 10000, (void *)cuGraphNodeGetDependentNodes},
    {"cuGraphNodeGetDependentNodes", 12030, (void *)cuGraphNodeGetDependentNodes_v2},
    {"cuGraphInstantiate", 11000, (void *)cuGraphInstantiate_v2},
    {"cuStreamGetCaptureInfo", 10010, (void *)cuStreamGetCaptureInfo},
    {"cuStreamGetCaptureInfo", 11030, (void *)cuStreamGetCaptureInfo_v2},
    {"cuStreamGetCaptureInfo", 12030, (void *)cuStreamGetCaptureInfo_v3},
    {"cuStreamUpdateCaptureDependencies", 11030, (void *)cuStreamUpdateCaptureDependencies},
    {"cuStreamUpdateCaptureDependencies", 12030, (void *)cuStreamUpdateCaptureDependencies_v2},
};

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, unsigned long long flags, int *status) {
    if (!sym || !pfn) return INVALID_VALUE;
    if (version > 13000) return INVALID_VALUE; /* above the driver's own, as driver 580 answers */
    *pfn = NULL;
    int known = 0, best = -1;
    for (int i = 0; i < (int)(sizeof gpa_tab / sizeof gpa_tab[0]); i++) {
        if (strcmp(gpa_tab[i].name, sym) != 0) continue;
        known = 1;
        if (gpa_tab[i].ver <= version && (best < 0 || gpa_tab[i].ver > gpa_tab[best].ver)) best = i;
    }
    if (best >= 0) { *pfn = gpa_tab[best].fn; if (status) *status = 0; }
    else if (status) *status = known ? 2 : 1; /* VERSION_NOT_SUFFICIENT : SYMBOL_NOT_FOUND */
    return OK;
}

/* ============================================================
 * Pool access and interprocess sharing (pool-ipc)
 *
 * One device, so cuMemPoolSetAccess can name only device 0, the owner of
 * every pool, whose read-write access cannot change (INVALID_VALUE) or
 * another ordinal (INVALID_DEVICE); cuMemPoolGetAccess reads read-write
 * for device 0. A pool's memory is its device's: a fake kernel in any
 * context may use it (check_range).
 *
 * Sharing between processes is modelled within one process:
 *  - a pool created with handleTypes POSIX_FILE_DESCRIPTOR (1) exports to
 *    a real file descriptor (a memfd) whose inode maps back to the pool,
 *    whatever number it has after a dup or an SCM_RIGHTS pass; importing
 *    it makes a new pool handle (counted in fake_live_pools) that allocates
 *    nothing;
 *  - cuMemPoolExportPointer writes 64 bytes naming the allocation (its
 *    base and id); cuMemPoolImportPointer from a pool imported from the
 *    allocation's pool returns the same address and counts an import
 *    (fake_live_pool_imports); cuMemFree of it ends one import, and leaves
 *    the memory to the exporter. An exporter's free while imports are
 *    outstanding is a bad pointer use (CUDA: importers free first);
 *  - cuIpcGetEventHandle needs an event created with INTERPROCESS and
 *    DISABLE_TIMING (else INVALID_VALUE); cuIpcOpenEventHandle returns
 *    the same event with one more reference (fake_live_ipc_event_opens):
 *    each cuEventDestroy drops one, the last destroys it.
 * ============================================================ */

#include <sys/stat.h>
#include <sys/syscall.h>

struct ipc_pool {
    struct pool *p;
    int exportable;          /* created with POSIX fd handles */
    struct pool *from;       /* imported: the exporter's pool */
    int elsewhere;           /* imported as a pool of another device (fake_set_import_elsewhere) */
};
static int import_elsewhere; /* fake_set_import_elsewhere */
struct ipc_export { struct pool *p; dev_t dev; ino_t ino; }; /* a memfd the pool was exported to */
static struct ipc_export *ipc_exports;
static size_t nipc_exports, cipc_exports;
static struct ipc_pool *ipc_pools;
static size_t nipc_pools, cipc_pools;
struct ipc_import { struct alloc *a; long n; };
static struct ipc_import *ipc_imports;
static size_t nipc_imports, cipc_imports;
struct ipc_event { struct event *e; long opens; };
static struct ipc_event *ipc_events;
static size_t nipc_events, cipc_events;
static long live_pool_imports, live_ipc_event_opens;

#define IPC_GROW(arr, n, cap)                                                  \
    do {                                                                       \
        if ((n) == (cap)) {                                                    \
            (cap) = (cap) ? (cap) * 2 : 16;                                    \
            (arr) = realloc((arr), (cap) * sizeof *(arr));                     \
            if (!(arr)) abort();                                               \
        }                                                                      \
    } while (0)

static struct ipc_pool *ipc_pool_of(struct pool *p) {
    for (size_t i = 0; i < nipc_pools; i++)
        if (ipc_pools[i].p == p) return &ipc_pools[i];
    return NULL;
}
static struct ipc_pool *ipc_pool_add(struct pool *p) {
    IPC_GROW(ipc_pools, nipc_pools, cipc_pools);
    struct ipc_pool *x = &ipc_pools[nipc_pools++];
    memset(x, 0, sizeof *x);
    x->p = p;
    return x;
}
static void ipc_pool_created(struct pool *p, int handle_types) {
    if (handle_types & 1) ipc_pool_add(p)->exportable = 1;
}
static struct ipc_import *ipc_import_of(struct alloc *a) {
    for (size_t i = 0; i < nipc_imports; i++)
        if (ipc_imports[i].a == a) return &ipc_imports[i];
    return NULL;
}
static int ipc_free_import(struct alloc *a) {
    struct ipc_import *im = ipc_import_of(a);
    if (!im || im->n == 0) return 0;
    im->n--;
    DEC(live_pool_imports);
    return 1;
}
static void ipc_exporter_free(const char *fn, struct alloc *a) {
    struct ipc_import *im = ipc_import_of(a);
    if (im && im->n > 0) bad_ptr(fn, a->base, 0, "freed in the exporting process while an importer still has it");
}
static int ipc_event_unref(struct event *e) {
    for (size_t i = 0; i < nipc_events; i++)
        if (ipc_events[i].e == e && ipc_events[i].opens > 0) {
            ipc_events[i].opens--;
            DEC(live_ipc_event_opens);
            return 1;
        }
    return 0;
}

typedef struct { int type, id; } mem_location_t;
typedef struct { mem_location_t location; int flags; } access_desc_t;
_Static_assert(sizeof(access_desc_t) == 12, "CUmemAccessDesc");

CUresult cuMemPoolSetAccess(void *pool, const access_desc_t *map, size_t count) {
    ENTER("cuMemPoolSetAccess");
    LOCK();
    struct pool *p;
    CUresult r = get_pool("cuMemPoolSetAccess", pool, &p);
    if (!r && count && !map) r = INVALID_VALUE;
    for (size_t i = 0; !r && i < count; i++) {
        if (map[i].location.type != 1) r = INVALID_VALUE;
        else if (map[i].location.id != 0) r = INVALID_DEVICE;
        else if (map[i].flags != 3) r = INVALID_VALUE; /* the owner keeps read-write */
    }
    UNLOCK();
    return r;
}
CUresult cuMemPoolGetAccess(int *flags, void *pool, const mem_location_t *loc) {
    ENTER("cuMemPoolGetAccess");
    if (!flags || !loc) return INVALID_VALUE;
    LOCK();
    struct pool *p;
    CUresult r = get_pool("cuMemPoolGetAccess", pool, &p);
    if (!r && loc->type != 1) r = INVALID_VALUE;
    else if (!r && loc->id != 0) r = INVALID_DEVICE;
    if (!r) {
        struct ipc_pool *x = ipc_pool_of(p);
        *flags = x && x->elsewhere ? 0 : 3; /* a pool of another device: no access until granted */
    }
    UNLOCK();
    return r;
}
CUresult cuMemPoolExportToShareableHandle(void *out, void *pool, int type, unsigned long long flags) {
    ENTER("cuMemPoolExportToShareableHandle");
    if (!out || flags) return INVALID_VALUE;
    LOCK();
    struct pool *p;
    CUresult r = get_pool("cuMemPoolExportToShareableHandle", pool, &p);
    struct ipc_pool *x = r ? NULL : ipc_pool_of(p);
    if (!r && (!x || !x->exportable || type != 1)) r = INVALID_VALUE;
    if (!r) {
        int fd = (int)syscall(SYS_memfd_create, "fakecuda-pool", 0u); /* without MFD_CLOEXEC: libcuda may make it so */
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            if (fd >= 0) close(fd);
            r = OUT_OF_MEMORY;
        } else {
            IPC_GROW(ipc_exports, nipc_exports, cipc_exports);
            ipc_exports[nipc_exports++] = (struct ipc_export){p, st.st_dev, st.st_ino};
            *(int *)out = fd;
        }
    }
    UNLOCK();
    return r;
}
CUresult cuMemPoolImportFromShareableHandle(void **out, void *handle, int type, unsigned long long flags) {
    ENTER("cuMemPoolImportFromShareableHandle");
    if (!out || flags || type != 1) return INVALID_VALUE;
    int fd = (int)(intptr_t)handle;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return INVALID_VALUE;
    LOCK();
    struct pool *from = NULL;
    for (size_t i = 0; i < nipc_exports; i++)
        if (ipc_exports[i].ino == st.st_ino && ipc_exports[i].dev == st.st_dev) from = ipc_exports[i].p;
    CUresult r = OK;
    if (!from) r = INVALID_VALUE;
    else {
        struct pool *p = new_obj(sizeof *p, K_POOL, NULL);
        p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
        pool_list_add(p);
        struct ipc_pool *x = ipc_pool_add(p);
        x->from = from;
        x->elsewhere = import_elsewhere;
        INC(live_pools);
        *out = p;
    }
    UNLOCK();
    return r;
}

typedef struct { char magic[8]; uint64_t base, id, size; unsigned char rest[32]; } ptr_export_t;
_Static_assert(sizeof(ptr_export_t) == 64, "CUmemPoolPtrExportData");

CUresult cuMemPoolExportPointer(ptr_export_t *out, CUdeviceptr ptr) {
    ENTER("cuMemPoolExportPointer");
    if (!out) return INVALID_VALUE;
    LOCK();
    CUresult r = OK;
    struct alloc *a = find_alloc((uintptr_t)ptr);
    struct ipc_pool *x = a && a->pool ? ipc_pool_of(a->pool) : NULL;
    if (!a || !a->live || a->base != ptr) r = bad_ptr("cuMemPoolExportPointer", ptr, 0, "not the base of a live allocation");
    else if (!x || !x->exportable) r = INVALID_VALUE;
    else {
        memset(out, 0, sizeof *out);
        memcpy(out->magic, "FAKEPTR", 8);
        out->base = a->base;
        out->id = a->id;
        out->size = a->size;
    }
    UNLOCK();
    return r;
}
CUresult cuMemPoolImportPointer(CUdeviceptr *out, void *pool, const ptr_export_t *data) {
    ENTER("cuMemPoolImportPointer");
    if (!out || !data) return INVALID_VALUE;
    LOCK();
    struct pool *p;
    CUresult r = get_pool("cuMemPoolImportPointer", pool, &p);
    struct ipc_pool *x = r ? NULL : ipc_pool_of(p);
    if (!r && (!x || !x->from)) r = INVALID_VALUE; /* not an imported pool */
    if (!r && memcmp(data->magic, "FAKEPTR", 8) != 0) r = INVALID_VALUE;
    struct alloc *a = r ? NULL : find_alloc((uintptr_t)data->base);
    if (!r && (!a || !a->live || a->free_pending || a->base != data->base || a->id != data->id || a->pool != x->from))
        r = INVALID_VALUE;
    if (!r) {
        struct ipc_import *im = ipc_import_of(a);
        if (!im) {
            IPC_GROW(ipc_imports, nipc_imports, cipc_imports);
            im = &ipc_imports[nipc_imports++];
            im->a = a;
            im->n = 0;
        }
        im->n++;
        INC(live_pool_imports);
        *out = a->base;
    }
    UNLOCK();
    return r;
}

typedef struct { char magic[8]; struct event *e; unsigned char rest[48]; } ipc_event_handle_t;
_Static_assert(sizeof(ipc_event_handle_t) == 64, "CUipcEventHandle");

CUresult cuIpcGetEventHandle(ipc_event_handle_t *out, void *h) {
    ENTER("cuIpcGetEventHandle");
    if (!out) return INVALID_VALUE;
    LOCK();
    struct event *e;
    CUresult r = get_event("cuIpcGetEventHandle", h, &e);
    if (!r && (e->flags & 6) != 6) r = INVALID_VALUE; /* INTERPROCESS | DISABLE_TIMING */
    if (!r) {
        memset(out, 0, sizeof *out);
        memcpy(out->magic, "FAKEEVT", 8);
        out->e = e;
    }
    UNLOCK();
    return r;
}
CUresult cuIpcOpenEventHandle(struct event **out, ipc_event_handle_t h) {
    ENTER("cuIpcOpenEventHandle");
    NEED_CTX();
    if (!out || memcmp(h.magic, "FAKEEVT", 8) != 0) return INVALID_VALUE;
    LOCK();
    struct event *e;
    CUresult r = get_event("cuIpcOpenEventHandle", h.e, &e);
    if (!r && (e->flags & 6) != 6) r = INVALID_VALUE;
    if (!r) {
        struct ipc_event *x = NULL;
        for (size_t i = 0; i < nipc_events; i++)
            if (ipc_events[i].e == e) x = &ipc_events[i];
        if (!x) {
            IPC_GROW(ipc_events, nipc_events, cipc_events);
            x = &ipc_events[nipc_events++];
            x->e = e;
            x->opens = 0;
        }
        x->opens++;
        INC(live_ipc_event_opens);
        *out = e;
    }
    UNLOCK();
    return r;
}

/* fake_set_import_elsewhere(1) makes the pools imported from now on stand
   for pools of another device than the importer's: cuMemPoolGetAccess reads
   no access for device 0 on them (CUDA: an imported pool is accessible from
   its own device only, whatever the exporter granted). 0 turns it off. */
void fake_set_import_elsewhere(long on) { LOCK(); import_elsewhere = on != 0; UNLOCK(); }
long fake_live_pool_imports(void) { return ATOMIC_GET(live_pool_imports); }
long fake_live_ipc_event_opens(void) { return ATOMIC_GET(live_ipc_event_opens); }

/* ---- nodes in several contexts (package graph's multi-device graphs) ----
   A graph's kernel, memcpy and memset nodes each run in a context of their
   own: a kernel node in its CUfunction's (CUDA ignores the params' ctx
   then) or, for a CUkernel, the params' ctx (the current context when
   NULL); a memcpy or memset node in the ctx argument of its add (the
   current one when NULL). The node records it (nparams.ctx). When the node
   runs, a destroyed context is a bad handle use and the node does nothing;
   otherwise the run is counted for its context (fake_graph_node_runs). An
   event is recorded only on a stream of its own context, as CUDA requires
   (CUDA_ERROR_INVALID_HANDLE otherwise). Instantiating for device launch
   a graph whose nodes run in several contexts fails as CUDA's does. */

enum { MGRAPH_SLOTS = 64 };
static struct { const struct ctx *c; long runs; } mgraph_runs[MGRAPH_SLOTS];

/* mgraph_node_runs checks the context of node p as it runs (lock held): it
   returns 1, after counting a bad use, when the node must not run. */
static int mgraph_node_runs(const char *fn, const struct nparams *p) {
    if (p->type != NT_KERNEL && p->type != NT_MEMCPY && p->type != NT_MEMSET) return 0;
    const struct ctx *c = p->ctx;
    if (!c) return 0;
    if (!c->h.alive) {
        bad_handle(fn, c, "context the node runs in", INVALID_CONTEXT);
        return 1;
    }
    for (int i = 0; i < MGRAPH_SLOTS; i++) {
        if (mgraph_runs[i].c == c || !mgraph_runs[i].c) {
            mgraph_runs[i].c = c;
            mgraph_runs[i].runs++;
            break;
        }
    }
    return 0;
}

/* mgraph_contexts counts the distinct contexts the plan's nodes run in. */
static int mgraph_contexts(const struct plan *pl) {
    const struct ctx *first = NULL;
    for (int i = 0; i < pl->n; i++) {
        const struct nparams *p = &pl->x[i].p;
        if ((p->type != NT_KERNEL && p->type != NT_MEMCPY && p->type != NT_MEMSET) || !p->ctx) continue;
        if (!first) first = p->ctx;
        else if (p->ctx != first) return 2;
    }
    return first ? 1 : 0;
}

static CUresult mgraph_record_check(const char *fn, const struct hdr *e, const struct hdr *s) {
    if (e->ctx && s->ctx && e->ctx != s->ctx) {
        INC(bad_handle_uses);
        note_bad("bad handle", fn, "an event recorded on a stream of another context");
        return INVALID_HANDLE;
    }
    return OK;
}

/* fake_graph_node_runs is how many kernel, memcpy and memset nodes of
   launched graphs ran in context hctx (a CUcontext) since the last reset;
   fake_graph_node_runs_reset clears the counts. */
long fake_graph_node_runs(void *hctx) {
    long n = 0;
    LOCK();
    for (int i = 0; i < MGRAPH_SLOTS; i++)
        if (mgraph_runs[i].c && (const void *)mgraph_runs[i].c == hctx) n = mgraph_runs[i].runs;
    UNLOCK();
    return n;
}
void fake_graph_node_runs_reset(void) {
    LOCK();
    memset(mgraph_runs, 0, sizeof mgraph_runs);
    UNLOCK();
}
