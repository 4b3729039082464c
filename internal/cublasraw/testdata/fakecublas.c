/* fakecublas.c: a stand-in for libcublas.so and libcublasLt.so, for the
 * CPU tests of internal/cublasraw and the cuBLAS packages built on it. It
 * is compiled with gcc by internal/faketest (with fakecublas_blas.c and
 * fakecublaslt.c, into one library that PURECUDA_LIBCUBLAS and
 * PURECUDA_LIBCUBLASLT both name) and works on fakecuda
 * (tests/fakedriver/testdata/fakecuda.c), reached through
 * PURECUDA_LIBCUDA. MODEL.md beside it says what it models; in short:
 *  - handles remember the CUDA context current at cublasCreate, a stream
 *    (the legacy stream by default), a pointer mode, math and atomics
 *    modes and a workspace;
 *  - every routine checks its arguments as cuBLAS does, checks its device
 *    memory against fakecuda's allocations (fake_check_device), and queues
 *    itself on the handle's stream as a fakecuda host function, which
 *    checks everything again and computes the exact result when it runs
 *    (inside a capture it becomes a host node and runs at every launch);
 *  - misuse that would crash or corrupt under the real library is counted
 *    (fake_cublas_bad_uses, fake_cublas_last_bad). */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecublas.h"

pthread_mutex_t fcb_mu = PTHREAD_MUTEX_INITIALIZER;
static long bad_uses, ops_run, live_handles;
static char last_bad[512];
static char fail_fn[128];
static int fail_armed;
static cublasStatus_t fail_status;

/* fcb_bad counts a bad use by fn (mu not held). */
void fcb_bad(const char *fn, const char *fmt, ...) {
	char what[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&fcb_mu);
	bad_uses++;
	snprintf(last_bad, sizeof last_bad, "%s: %s", fn, what);
	pthread_mutex_unlock(&fcb_mu);
	if (getenv("FAKE_VERBOSE")) fprintf(stderr, "fakecublas: bad use: %s: %s\n", fn, what);
}

/* fcb_failed reports whether the call fn is the one fake_cublas_fail_next
   armed, and disarms it. */
int fcb_failed(const char *fn, cublasStatus_t *st) {
	int hit = 0;
	pthread_mutex_lock(&fcb_mu);
	if (fail_armed && (!fail_fn[0] || !strcmp(fail_fn, fn))) {
		hit = 1;
		fail_armed = 0;
		*st = fail_status;
	}
	pthread_mutex_unlock(&fcb_mu);
	return hit;
}
#define FAIL(name)                                          \
	do {                                                    \
		cublasStatus_t st_;                                 \
		if (fcb_failed(name, &st_)) return st_;             \
	} while (0)

/* ---- fakecuda, reached through PURECUDA_LIBCUDA ---- */

typedef void (*hostfn)(void *);
static int (*launchHostFunc)(void *stream, hostfn fn, void *data);
static int (*checkDevice)(const char *fn, unsigned long long p, size_t n);
static int (*streamIsCapturing)(void *stream, int *status);
static int (*streamSynchronize)(void *stream);
static int (*ctxSynchronize)(void);
static int (*ctxGetCurrent)(void **ctx);

int fcb_cuda(void) {
	if (__atomic_load_n(&launchHostFunc, __ATOMIC_ACQUIRE)) return 1;
	const char *path = getenv("PURECUDA_LIBCUDA");
	void *h = path ? dlopen(path, RTLD_NOW) : NULL;
	if (!h) return 0;
	checkDevice = (int (*)(const char *, unsigned long long, size_t))dlsym(h, "fake_check_device");
	streamIsCapturing = (int (*)(void *, int *))dlsym(h, "cuStreamIsCapturing");
	streamSynchronize = (int (*)(void *))dlsym(h, "cuStreamSynchronize");
	ctxSynchronize = (int (*)(void))dlsym(h, "cuCtxSynchronize");
	ctxGetCurrent = (int (*)(void **))dlsym(h, "cuCtxGetCurrent");
	if (!checkDevice || !streamIsCapturing || !streamSynchronize || !ctxSynchronize || !ctxGetCurrent) return 0;
	__atomic_store_n(&launchHostFunc, (int (*)(void *, hostfn, void *))dlsym(h, "cuLaunchHostFunc"), __ATOMIC_RELEASE);
	return launchHostFunc != NULL;
}

/* fcb_check checks that [p, p+n) lies in one live fakecuda allocation:
   fakecuda counts a bad pointer use if not, and so does fakecublas.
   1: bad. */
int fcb_check(const char *fn, uintptr_t p, size_t n) {
	if (!n) return 0;
	if (!checkDevice(fn, p, n)) return 0;
	fcb_bad(fn, "bad device pointer: [0x%llx, +%zu) is not in one live allocation", (unsigned long long)p, n);
	return 1;
}

/* ---- handles ---- */

static void *current_ctx(void) {
	void *c = NULL;
	if (ctxGetCurrent(&c) != 0) c = NULL;
	return c;
}

/* fcb_handle checks a handle for a call: NULL is CUBLAS_STATUS_NOT_INITIALIZED,
   as cuBLAS; a destroyed or unknown one is a bad use (cuBLAS would read
   freed memory). */
cublasStatus_t fcb_handle(const char *fn, cublasHandle_t h) {
	if (!h) return ST_NOT_INITIALIZED;
	pthread_mutex_lock(&fcb_mu);
	int ok = h->magic == 0xB1A5 && h->alive;
	pthread_mutex_unlock(&fcb_mu);
	if (!ok) {
		fcb_bad(fn, "destroyed or unknown handle %p", (void *)h);
		return ST_NOT_INITIALIZED;
	}
	return ST_OK;
}

/* ctxcheck counts a call that launches or synchronises work on a thread
   whose current context is not the handle's: cuBLAS works on the current
   device, so its kernels would run in another context (or, with none
   current, in device 0's primary context that the runtime makes current). */
static void ctxcheck(const char *fn, cublasHandle_t h) {
	void *cur = current_ctx();
	if (h->ctx && cur != h->ctx) fcb_bad(fn, "the handle's context %p is not current (current: %p)", h->ctx, cur);
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *out) {
	FAIL("cublasCreate_v2");
	if (!out) return ST_INVALID_VALUE;
	if (!fcb_cuda()) return ST_NOT_INITIALIZED;
	void *cur = current_ctx();
	if (!cur) fcb_bad("cublasCreate_v2", "no current context (the runtime would make device 0's primary context current)");
	cublasHandle_t h = calloc(1, sizeof *h);
	h->magic = 0xB1A5;
	h->alive = 1;
	h->ctx = cur;
	pthread_mutex_lock(&fcb_mu);
	live_handles++;
	pthread_mutex_unlock(&fcb_mu);
	*out = h;
	return ST_OK;
}

/* cublasDestroy_v2 synchronises the device first, as cuBLAS documents
   (cudaDeviceSynchronize), so work queued with the handle has run; the
   handle struct is kept (dead), so that later uses are detected. */
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
	FAIL("cublasDestroy_v2");
	cublasStatus_t r = fcb_handle("cublasDestroy_v2", h);
	if (r) return r;
	ctxcheck("cublasDestroy_v2", h);
	(void)ctxSynchronize();
	pthread_mutex_lock(&fcb_mu);
	h->alive = 0;
	live_handles--;
	pthread_mutex_unlock(&fcb_mu);
	return ST_OK;
}

#define HANDLE(name)                                      \
	FAIL(name);                                           \
	do {                                                  \
		cublasStatus_t r_ = fcb_handle(name, h);          \
		if (r_) return r_;                                \
	} while (0)

/* cublasSetStream_v2 also resets the workspace to the default, as cuBLAS
   documents. */
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, void *stream) {
	HANDLE("cublasSetStream_v2");
	pthread_mutex_lock(&fcb_mu);
	h->stream = stream;
	h->ws = 0;
	h->wssize = 0;
	pthread_mutex_unlock(&fcb_mu);
	return ST_OK;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t h, void **stream) {
	HANDLE("cublasGetStream_v2");
	if (!stream) return ST_INVALID_VALUE;
	pthread_mutex_lock(&fcb_mu);
	*stream = h->stream;
	pthread_mutex_unlock(&fcb_mu);
	return ST_OK;
}

/* cublasSetWorkspace_v2: the address must be 256-byte aligned (else
   CUBLAS_STATUS_INVALID_VALUE, as cuBLAS); NULL (any size) goes back to
   the default workspace. The range must be live device memory (a bad use
   otherwise, refused with CUBLAS_STATUS_INVALID_VALUE). */
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t size) {
	HANDLE("cublasSetWorkspace_v2");
	uintptr_t p = (uintptr_t)ws;
	if (p % 256) return ST_INVALID_VALUE;
	if (p && fcb_check("cublasSetWorkspace_v2", p, size)) return ST_INVALID_VALUE;
	pthread_mutex_lock(&fcb_mu);
	h->ws = p;
	h->wssize = p ? size : 0;
	pthread_mutex_unlock(&fcb_mu);
	return ST_OK;
}

#define MODE(set, get, field, valid)                                      \
	cublasStatus_t set(cublasHandle_t h, int mode) {                      \
		HANDLE(#set);                                                     \
		if (!(valid)) return ST_INVALID_VALUE;                            \
		pthread_mutex_lock(&fcb_mu);                                      \
		h->field = mode;                                                  \
		pthread_mutex_unlock(&fcb_mu);                                    \
		return ST_OK;                                                     \
	}                                                                     \
	cublasStatus_t get(cublasHandle_t h, int *mode) {                     \
		HANDLE(#get);                                                     \
		if (!mode) return ST_INVALID_VALUE;                               \
		pthread_mutex_lock(&fcb_mu);                                      \
		*mode = h->field;                                                 \
		pthread_mutex_unlock(&fcb_mu);                                    \
		return ST_OK;                                                     \
	}
MODE(cublasSetPointerMode_v2, cublasGetPointerMode_v2, pmode, mode == 0 || mode == 1)
MODE(cublasSetAtomicsMode, cublasGetAtomicsMode, atomics, mode == 0 || mode == 1)
/* cublasMath_t: a mode (0..3) or'ed with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (16). */
MODE(cublasSetMathMode, cublasGetMathMode, math, (mode & 0xf) <= 3 && (mode & ~0x1f) == 0 && (mode & 0x10) == (mode & ~0xf))

/* ---- version, status ---- */

static int version(void) {
	const char *v = getenv("FAKE_CUBLAS_VERSION");
	return v ? atoi(v) : 130100;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *v) {
	(void)h; /* cuBLAS answers without the handle */
	FAIL("cublasGetVersion_v2");
	if (!v) return ST_INVALID_VALUE;
	*v = version();
	return ST_OK;
}

/* cublasGetProperty: MAJOR_VERSION 0, MINOR_VERSION 1, PATCH_LEVEL 2. */
cublasStatus_t cublasGetProperty(int type, int *value) {
	FAIL("cublasGetProperty");
	if (!value) return ST_INVALID_VALUE;
	int v = version();
	switch (type) {
	case 0: *value = v / 10000; return ST_OK;
	case 1: *value = v / 100 % 100; return ST_OK;
	case 2: *value = v % 100; return ST_OK;
	}
	return ST_INVALID_VALUE;
}

size_t cublasGetCudartVersion(void) { return 13000; }

static const struct { int s; const char *name, *text; } statuses[] = {
	{ST_OK, "CUBLAS_STATUS_SUCCESS", "success"},
	{ST_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
	{ST_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
	{ST_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE", "an invalid numeric value was used as an argument"},
	{ST_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH", "an absent device architectural feature is required"},
	{ST_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
	{ST_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
	{ST_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
	{ST_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
	{ST_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR", "error detected trying to check the license"},
};

const char *cublasGetStatusName(cublasStatus_t s) {
	for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
		if (statuses[i].s == (int)s) return statuses[i].name;
	return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t s) {
	for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
		if (statuses[i].s == (int)s) return statuses[i].text;
	return "unknown error";
}

/* ---- controls ---- */

long fake_cublas_bad_uses(void) { pthread_mutex_lock(&fcb_mu); long n = bad_uses; pthread_mutex_unlock(&fcb_mu); return n; }
long fake_cublas_live_handles(void) { pthread_mutex_lock(&fcb_mu); long n = live_handles; pthread_mutex_unlock(&fcb_mu); return n; }
long fake_cublas_ops_run(void) { pthread_mutex_lock(&fcb_mu); long n = ops_run; pthread_mutex_unlock(&fcb_mu); return n; }
void fake_cublas_last_bad(char *out, long n) {
	pthread_mutex_lock(&fcb_mu);
	snprintf(out, (size_t)n, "%s", last_bad);
	pthread_mutex_unlock(&fcb_mu);
}
/* fake_cublas_reset zeroes the bad uses, their description and the
   operations run, and disarms fake_cublas_fail_next. */
void fake_cublas_reset(void) {
	pthread_mutex_lock(&fcb_mu);
	bad_uses = ops_run = 0;
	last_bad[0] = 0;
	fail_armed = 0;
	pthread_mutex_unlock(&fcb_mu);
}
/* fake_cublas_fail_next makes the next call of fn (its export name,
   "cublasSgemm_v2", "cublasLtMatmul"; NULL or "": any call) return status
   and do nothing. */
void fake_cublas_fail_next(const char *fn, int status) {
	pthread_mutex_lock(&fcb_mu);
	snprintf(fail_fn, sizeof fail_fn, "%s", fn ? fn : "");
	fail_status = status;
	fail_armed = 1;
	pthread_mutex_unlock(&fcb_mu);
}

/* ---- the queue ---- */

struct task *fcb_task(const char *fn, cublasHandle_t h, int t) {
	struct task *k = calloc(1, sizeof *k);
	k->fn = fn;
	k->h = h;
	k->t = k->stype = t;
	if (h) {
		pthread_mutex_lock(&fcb_mu);
		k->pmode = h->pmode;
		k->ws = h->ws;
		k->wssize = h->wssize;
		pthread_mutex_unlock(&fcb_mu);
	}
	return k;
}

void fcb_range(struct task *t, uintptr_t p, size_t n) {
	if (n && t->nr < MAXR) t->r[t->nr++] = (struct range){p, n};
}

/* fcb_scalars takes alpha (and beta, if two) as the pointer mode says:
   host, read now; device, read when the operation runs (checked now and
   then). NULL is CUBLAS_STATUS_INVALID_VALUE. */
cublasStatus_t fcb_scalars(struct task *t, const void *alpha, const void *beta, int two, int stype) {
	if (!alpha || (two && !beta)) return ST_INVALID_VALUE;
	t->stype = stype;
	if (t->pmode == 0) {
		t->alpha = fcb_get(stype, (uintptr_t)alpha, 0);
		if (two) t->beta = fcb_get(stype, (uintptr_t)beta, 0);
		return ST_OK;
	}
	t->dalpha = (uintptr_t)alpha;
	if (two) t->dbeta = (uintptr_t)beta;
	return ST_OK;
}

cplx fcb_alpha(struct task *t) { return t->dalpha ? fcb_get(t->stype, t->dalpha, 0) : t->alpha; }
cplx fcb_beta(struct task *t) { return t->dbeta ? fcb_get(t->stype, t->dbeta, 0) : t->beta; }

/* checks checks every device address of t; 1: one is bad. */
static int checks(struct task *t) {
	int bad = 0;
	size_t es = fcb_size(t->stype);
	for (int i = 0; i < t->nr; i++) bad |= fcb_check(t->fn, t->r[i].p, t->r[i].n);
	if (t->dalpha) bad |= fcb_check(t->fn, t->dalpha, es);
	if (t->dbeta) bad |= fcb_check(t->fn, t->dbeta, es);
	if (t->ws && fcb_check(t->fn, t->ws, t->wssize)) {
		fcb_bad(t->fn, "the handle's workspace is not live device memory");
		bad = 1;
	}
	return bad;
}

/* run is the host function fakecuda calls: it checks the handle and every
   address again, then computes. A captured task runs at each launch and
   is kept; any other is freed. */
static void run(void *p) {
	struct task *t = p;
	pthread_mutex_lock(&fcb_mu);
	ops_run++;
	int alive = t->h->alive;
	pthread_mutex_unlock(&fcb_mu);
	if (!alive) fcb_bad(t->fn, "an operation ran after its handle was destroyed (its workspace and state are gone)");
	else if (!checks(t)) t->exec(t);
	if (!t->captured) free(t);
}

/* fcb_submit checks t and queues it on stream; with hostsync (a result in
   host memory) it then waits for the stream, as cuBLAS does. A bad
   address is refused with CUBLAS_STATUS_EXECUTION_FAILED (the real
   kernel would fault); so is a host-mode result inside a capture, which
   cuBLAS cannot give without synchronising the stream (the attempt
   invalidates the capture, as the real library's does). */
cublasStatus_t fcb_submit(struct task *t, void *stream, int hostsync) {
	if (checks(t)) {
		free(t);
		return ST_EXECUTION_FAILED;
	}
	int status = 0;
	if (streamIsCapturing(stream, &status) != 0) status = 0;
	if (hostsync && status) {
		fcb_bad(t->fn, "a result in host memory (pointer mode host) inside a stream capture");
		(void)streamSynchronize(stream);
		free(t);
		return ST_EXECUTION_FAILED;
	}
	t->captured = status != 0;
	if (launchHostFunc(stream, run, t) != 0) {
		free(t);
		return ST_EXECUTION_FAILED;
	}
	if (hostsync && streamSynchronize(stream) != 0) return ST_EXECUTION_FAILED;
	return ST_OK;
}

/* fcb_begin checks a routine's handle and context and makes its task. */
struct task *fcb_begin(const char *fn, cublasHandle_t h, int t, cublasStatus_t *st, void **stream) {
	cublasStatus_t f;
	if (fcb_failed(fn, &f)) {
		*st = f;
		return NULL;
	}
	if ((*st = fcb_handle(fn, h))) return NULL;
	ctxcheck(fn, h);
	pthread_mutex_lock(&fcb_mu);
	*stream = h->stream;
	pthread_mutex_unlock(&fcb_mu);
	return fcb_task(fn, h, t);
}

/* fake_cublas_fail_next_clear disarms fake_cublas_fail_next. */
void fake_cublas_fail_next_clear(void) {
	pthread_mutex_lock(&fcb_mu);
	fail_armed = 0;
	pthread_mutex_unlock(&fcb_mu);
}
