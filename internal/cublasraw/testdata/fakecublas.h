/* fakecublas.h: what the parts of fakecublas share (fakecublas.c: handles,
 * the queue, controls; fakecublas_blas.c: the BLAS routines;
 * fakecublaslt.c: cuBLASLt). MODEL.md beside it says what is modelled. */
#include <complex.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
	ST_OK = 0, ST_NOT_INITIALIZED = 1, ST_ALLOC_FAILED = 3, ST_INVALID_VALUE = 7,
	ST_ARCH_MISMATCH = 8, ST_MAPPING_ERROR = 11, ST_EXECUTION_FAILED = 13,
	ST_INTERNAL_ERROR = 14, ST_NOT_SUPPORTED = 15, ST_LICENSE_ERROR = 16
} cublasStatus_t;

/* Element types: cudaDataType values of the four the fake computes, and
   those cuBLASLt reads and writes besides (16-bit floats, FP8). */
enum { T_S = 0, T_D = 1, T_H = 2, T_C = 4, T_Z = 5, T_BF = 14, T_E4 = 28, T_E5 = 29 };
enum { OP_N = 0, OP_T = 1, OP_C = 2 };

typedef double _Complex cplx;

struct cublasContext {
	int magic; /* 0xB1A5 */
	int alive;
	void *ctx;    /* the CUDA context current at cublasCreate */
	void *stream; /* NULL: the legacy stream */
	int pmode, math, atomics;
	uintptr_t ws; /* user workspace (cublasSetWorkspace), 0: the default */
	size_t wssize;
};
typedef struct cublasContext *cublasHandle_t;

/* One range of device memory an operation reads or writes. */
struct range { uintptr_t p; size_t n; };

#define MAXR 12

/* A queued operation. exec computes it (no lock held) once every range
   and the workspace passed the checks. */
struct task {
	const char *fn;
	cublasHandle_t h;
	void (*exec)(struct task *);
	int t;                         /* element type */
	int pmode;                     /* the pointer mode at the call */
	cplx alpha, beta;              /* host mode: read at the call */
	uintptr_t dalpha, dbeta;       /* device mode: read when it runs */
	int stype;                     /* scalar type of alpha, beta */
	int nr;                        /* ranges to check */
	struct range r[MAXR];
	uintptr_t ws; size_t wssize;   /* the workspace at the call */
	int ptrarrays;                 /* batched: r[0..2] are pointer arrays */
	int captured;
	/* parameters */
	int opa, opb, side, uplo, diag;
	long m, n, k, lda, ldb, ldc, ldd, incx, incy, batch;
	long long sa, sb, sc, sd;
	uintptr_t a, b, c, d, x, y, res; /* res: a reduction's result */
	int reskind;                      /* 0 element of t, 1 real of t, 2 int */
	uintptr_t hostres;                /* host mode: where the result goes */
	int epilogue;                     /* cublasLtMatmul: its epilogue (1: none) */
	uintptr_t bias;                   /* and its bias vector (or bias gradient) */
	int ta, tb;                       /* cublasLtMatmul: A's and B's element types (t: C's and D's) */
	uintptr_t aux; long auxld;        /* the epilogue's auxiliary matrix (a ReLU mask or GELU's input) */
	uintptr_t ascale, bscale;         /* FP8: A's and B's scales (float) */
	int tc;                           /* cublasLtMatmul: C's type (t's but for an FP8 D) */
	uintptr_t dscale, amax;           /* an FP8 D: its scale (float) and amax (float, written) */
};

/* fakecublas.c */
extern pthread_mutex_t fcb_mu;
int fcb_cuda(void);
void fcb_bad(const char *fn, const char *fmt, ...);
int fcb_failed(const char *fn, cublasStatus_t *st);
cublasStatus_t fcb_handle(const char *fn, cublasHandle_t h);
int fcb_check(const char *fn, uintptr_t p, size_t n);
cublasStatus_t fcb_submit(struct task *t, void *stream, int hostsync);
struct task *fcb_task(const char *fn, cublasHandle_t h, int t);
void fcb_range(struct task *t, uintptr_t p, size_t n);
cublasStatus_t fcb_scalars(struct task *t, const void *alpha, const void *beta, int two, int stype);

/* element access, in fakecublas_blas.c */
size_t fcb_size(int t);
cplx fcb_get(int t, uintptr_t base, long i);
void fcb_put(int t, uintptr_t base, long i, cplx v);
size_t fcb_mat(int t, long rows, long cols, long ld);
size_t fcb_vec(int t, long n, long inc);
void fcb_gemm_one(struct task *t, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, int ct, cplx al, cplx be);
cplx fcb_alpha(struct task *t);
cplx fcb_beta(struct task *t);
struct task *fcb_begin(const char *fn, cublasHandle_t h, int t, cublasStatus_t *st, void **stream);
