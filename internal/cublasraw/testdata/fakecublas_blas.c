/* fakecublas_blas.c: fakecublas's BLAS routines (see fakecublas.c and
 * MODEL.md). Each checks its arguments where cuBLAS returns
 * CUBLAS_STATUS_INVALID_VALUE, then queues a task whose exec computes the
 * result exactly (in double or double complex, stored to the element
 * type), column-major, with BLAS's conventions: beta == 0 means C (y) is
 * not read; a negative increment walks the vector from its end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fakecublas.h"

/* ---- elements ---- */

size_t fcb_size(int t) {
	switch (t) {
	case T_S: return 4;
	case T_D: case T_C: return 8;
	case T_H: case T_BF: return 2;
	case T_E4: case T_E5: return 1;
	}
	return 16;
}

/* mini decodes the bits v of a small float of eb exponent and mb mantissa
   bits; ieee: the top exponent is Inf/NaN, else (E4M3) only all ones is
   NaN. */
static double mini(unsigned v, int eb, int mb, int ieee) {
	int e = (int)(v >> mb) & ((1 << eb) - 1), m = (int)v & ((1 << mb) - 1), bias = (1 << (eb - 1)) - 1;
	double r;
	if (ieee && e == (1 << eb) - 1) r = m ? NAN : INFINITY;
	else if (!ieee && e == (1 << eb) - 1 && m == (1 << mb) - 1) r = NAN;
	else if (e == 0) r = ldexp(m, 1 - bias - mb);
	else r = ldexp(m + (1 << mb), e - bias - mb);
	return (v >> (eb + mb)) & 1 ? -r : r;
}

/* half_of rounds v to a half (nearest, ties to even). */
static uint16_t half_of(double v) {
	uint16_t s = signbit(v) ? 0x8000 : 0;
	v = fabs(v);
	if (isnan(v)) return 0x7e00;
	if (v >= 65520) return s | 0x7c00;
	int e;
	frexp(v, &e);
	int ex = e - 1 < -14 ? -14 : e - 1;
	double r = nearbyint(v / ldexp(1, ex - 10)) * ldexp(1, ex - 10);
	if (r == 0) return s;
	frexp(r, &e);
	ex = e - 1;
	if (ex < -14) return s | (uint16_t)(r / ldexp(1, -24));
	return s | (uint16_t)((ex + 15) << 10) | (uint16_t)(r / ldexp(1, ex - 10) - 1024);
}

/* bf16_of rounds v to a bfloat16 (nearest, ties to even). */
static uint16_t bf16_of(double v) {
	float f = (float)v;
	uint32_t b;
	memcpy(&b, &f, 4);
	if (isnan(f)) return (uint16_t)(b >> 16 | 0x40);
	b += 0x7fff + ((b >> 16) & 1);
	return (uint16_t)(b >> 16);
}

/* f8_of rounds v to the nearest value of an 8-bit float type (ties to the
   even bit pattern), saturating at the type's largest finite value, as
   cuBLASLt's FP8 outputs convert; NaN stays NaN. */
static uint8_t f8_of(int t, double v) {
	int e4 = t == T_E4, top = e4 ? 0x7e : 0x7b; /* the largest finite pattern */
	uint8_t s = signbit(v) ? 0x80 : 0;
	if (isnan(v)) return 0x7f;
	double a = fabs(v);
	int i = 0;
	while (i < top && mini((unsigned)i + 1, e4 ? 4 : 5, e4 ? 3 : 2, !e4) <= a) i++;
	/* i: the largest pattern whose value is at most a (or top) */
	if (i < top) {
		double lo = a - mini((unsigned)i, e4 ? 4 : 5, e4 ? 3 : 2, !e4), hi = mini((unsigned)i + 1, e4 ? 4 : 5, e4 ? 3 : 2, !e4) - a;
		if (hi < lo || (hi == lo && i % 2)) i++;
	}
	return s | (uint8_t)i;
}

cplx fcb_get(int t, uintptr_t base, long i) {
	switch (t) {
	case T_S: return ((float *)base)[i];
	case T_D: return ((double *)base)[i];
	case T_C: return ((float *)base)[2 * i] + I * ((float *)base)[2 * i + 1];
	case T_H: return mini(((uint16_t *)base)[i], 5, 10, 1);
	case T_BF: {
		uint32_t b = (uint32_t)((uint16_t *)base)[i] << 16;
		float f;
		memcpy(&f, &b, 4);
		return f;
	}
	case T_E4: return mini(((uint8_t *)base)[i], 4, 3, 0);
	case T_E5: return mini(((uint8_t *)base)[i], 5, 2, 1);
	default: return ((double *)base)[2 * i] + I * ((double *)base)[2 * i + 1];
	}
}

void fcb_put(int t, uintptr_t base, long i, cplx v) {
	switch (t) {
	case T_S: ((float *)base)[i] = (float)creal(v); break;
	case T_D: ((double *)base)[i] = creal(v); break;
	case T_C: ((float *)base)[2 * i] = (float)creal(v), ((float *)base)[2 * i + 1] = (float)cimag(v); break;
	case T_H: ((uint16_t *)base)[i] = half_of(creal(v)); break;
	case T_BF: ((uint16_t *)base)[i] = bf16_of(creal(v)); break;
	case T_E4: case T_E5: ((uint8_t *)base)[i] = f8_of(t, creal(v)); break; /* an FP8 D */
	default: ((double *)base)[2 * i] = creal(v), ((double *)base)[2 * i + 1] = cimag(v); break;
	}
}

/* The bytes a rows x cols matrix with leading dimension ld spans. */
size_t fcb_mat(int t, long rows, long cols, long ld) {
	return rows <= 0 || cols <= 0 ? 0 : (size_t)((cols - 1) * ld + rows) * fcb_size(t);
}

/* The bytes n elements spaced by inc span. */
size_t fcb_vec(int t, long n, long inc) {
	return n <= 0 ? 0 : (size_t)(1 + (n - 1) * labs(inc)) * fcb_size(t);
}

/* Element i of a vector of len elements spaced by inc (BLAS: a negative
   inc starts at the end). */
static long vi(long len, long inc, long i) { return inc > 0 ? i * inc : (len - 1 - i) * -inc; }

/* Element (i, j) of op(M). */
static cplx opget(int t, uintptr_t m, long ld, int op, long i, long j) {
	if (op == OP_N) return fcb_get(t, m, i + j * ld);
	cplx v = fcb_get(t, m, j + i * ld);
	return op == OP_C ? conj(v) : v;
}

static int validop(int op) { return op == OP_N || op == OP_T || op == OP_C; }
static long max1(long v) { return v > 1 ? v : 1; }
static cublasStatus_t refuse(struct task *t, cublasStatus_t st) {
	free(t);
	return st;
}

#define BEGIN(fn, T)                                           \
	cublasStatus_t st;                                         \
	void *s;                                                   \
	struct task *t = fcb_begin(fn, h, T, &st, &s);             \
	if (!t) return st

/* ---- gemm family ---- */

/* fcb_gemm_one: D = alpha op(A) op(B) + beta C, m x n, through a copy
   (C and D may be one matrix). */
void fcb_gemm_one(struct task *t, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, int ct, cplx al, cplx be) {
	long m = t->m, n = t->n;
	cplx *out = malloc(sizeof(cplx) * (size_t)(m * n) + 1);
	for (long j = 0; j < n; j++)
		for (long i = 0; i < m; i++) {
			cplx acc = 0;
			for (long l = 0; l < t->k; l++) acc += opget(ct, a, t->lda, t->opa, i, l) * opget(ct, b, t->ldb, t->opb, l, j);
			out[i + j * m] = al * acc + (be == 0 ? 0 : be * fcb_get(ct, c, i + j * t->ldc));
		}
	for (long j = 0; j < n; j++)
		for (long i = 0; i < m; i++) fcb_put(ct, d, i + j * t->ldd, out[i + j * m]);
	free(out);
}

static void gemm_exec(struct task *t) {
	long long es = (long long)fcb_size(t->t);
	cplx al = fcb_alpha(t), be = fcb_beta(t);
	size_t za = fcb_mat(t->t, t->opa == OP_N ? t->m : t->k, t->opa == OP_N ? t->k : t->m, t->lda);
	size_t zb = fcb_mat(t->t, t->opb == OP_N ? t->k : t->n, t->opb == OP_N ? t->n : t->k, t->ldb);
	size_t zc = fcb_mat(t->t, t->m, t->n, t->ldc);
	for (long i = 0; i < t->batch; i++) {
		uintptr_t a, b, c;
		if (t->ptrarrays) { /* read from device memory now, and checked */
			a = ((uintptr_t *)t->a)[i], b = ((uintptr_t *)t->b)[i], c = ((uintptr_t *)t->c)[i];
			if (fcb_check(t->fn, a, za) | fcb_check(t->fn, b, zb) | fcb_check(t->fn, c, zc)) continue;
		} else {
			a = t->a + i * t->sa * es, b = t->b + i * t->sb * es, c = t->c + i * t->sc * es;
		}
		fcb_gemm_one(t, a, b, c, c, t->t, al, be);
	}
}

/* strided adds the range of batch matrices of size bytes, stride elements apart. */
static void strided(struct task *t, uintptr_t p, long long stride, long batch, size_t size) {
	if (!size) return;
	long long last = (batch - 1) * stride * (long long)fcb_size(t->t);
	long long lo = last < 0 ? last : 0, hi = (last > 0 ? last : 0) + (long long)size;
	fcb_range(t, p + lo, (size_t)(hi - lo));
}

static cublasStatus_t gemm(const char *fn, int T, cublasHandle_t h, int ta, int tb, int m, int n, int k,
                           const void *alpha, const void *A, int lda, long long sa, const void *B, int ldb, long long sb,
                           const void *beta, void *C, int ldc, long long sc, int batch, int ptrarrays) {
	BEGIN(fn, T);
	long ar = ta == OP_N ? m : k, ac = ta == OP_N ? k : m, br = tb == OP_N ? k : n, bc = tb == OP_N ? n : k;
	if (!validop(ta) || !validop(tb) || m < 0 || n < 0 || k < 0 || batch < 0 || lda < max1(ar) || ldb < max1(br) || ldc < max1(m))
		return refuse(t, ST_INVALID_VALUE);
	if ((st = fcb_scalars(t, alpha, beta, 1, T))) return refuse(t, st);
	if (m == 0 || n == 0 || batch == 0) return refuse(t, ST_OK);
	t->exec = gemm_exec;
	t->opa = ta, t->opb = tb, t->m = m, t->n = n, t->k = k, t->lda = lda, t->ldb = ldb, t->ldc = t->ldd = ldc;
	t->a = (uintptr_t)A, t->b = (uintptr_t)B, t->c = (uintptr_t)C, t->sa = sa, t->sb = sb, t->sc = sc;
	t->batch = batch, t->ptrarrays = ptrarrays;
	if (ptrarrays) {
		fcb_range(t, t->a, (size_t)batch * 8);
		fcb_range(t, t->b, (size_t)batch * 8);
		fcb_range(t, t->c, (size_t)batch * 8);
	} else {
		strided(t, t->a, sa, batch, fcb_mat(T, ar, ac, lda));
		strided(t, t->b, sb, batch, fcb_mat(T, br, bc, ldb));
		strided(t, t->c, sc, batch, fcb_mat(T, m, n, ldc));
	}
	return fcb_submit(t, s, 0);
}

#define GEMM(X, T)                                                                                                    \
	cublasStatus_t cublas##X##gemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,      \
	                                  const void *A, int lda, const void *B, int ldb, const void *beta, void *C,    \
	                                  int ldc) {                                                                    \
		return gemm("cublas" #X "gemm_v2", T, h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1, 0); \
	}                                                                                                                 \
	cublasStatus_t cublas##X##gemmStridedBatched(cublasHandle_t h, int ta, int tb, int m, int n, int k,              \
	                                             const void *alpha, const void *A, int lda, long long sa,           \
	                                             const void *B, int ldb, long long sb, const void *beta, void *C,   \
	                                             int ldc, long long sc, int batch) {                                \
		return gemm("cublas" #X "gemmStridedBatched", T, h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, \
		            ldc, sc, batch, 0);                                                                               \
	}                                                                                                                 \
	cublasStatus_t cublas##X##gemmBatched(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,  \
	                                      const void *A, int lda, const void *B, int ldb, const void *beta, void *C, \
	                                      int ldc, int batch) {                                                     \
		return gemm("cublas" #X "gemmBatched", T, h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0,  \
		            batch, 1);                                                                                        \
	}
GEMM(S, T_S) GEMM(D, T_D) GEMM(C, T_C) GEMM(Z, T_Z)

/* The grouped GEMM (cuBLAS 12.5): each group a gemmBatched of its own,
   its alpha and beta from the groups' host arrays, the pointer arrays'
   entries taken group after group. */
#define GROUPED(X, T, ET)                                                                                             \
	cublasStatus_t cublas##X##gemmGroupedBatched(cublasHandle_t h, const int *ta, const int *tb, const int *m,        \
	                                             const int *n, const int *k, const void *alpha,                      \
	                                             const void *const A[], const int *lda, const void *const B[],        \
	                                             const int *ldb, const void *beta, void *const C[], const int *ldc,   \
	                                             int groups, const int *size) {                                       \
		if (groups < 0 || (groups > 0 && (!ta || !tb || !m || !n || !k || !alpha || !lda || !ldb || !beta || !ldc ||   \
		                                  !size)))                                                                      \
			return ST_INVALID_VALUE;                                                                                    \
		long off = 0;                                                                                                   \
		for (int g = 0; g < groups; g++) {                                                                              \
			cublasStatus_t st = gemm("cublas" #X "gemmGroupedBatched", T, h, ta[g], tb[g], m[g], n[g], k[g],           \
			                         (const ET *)alpha + g, A + off, lda[g], 0, B + off, ldb[g], 0,                    \
			                         (const ET *)beta + g, (void *)(C + off), ldc[g], 0, size[g], 1);                  \
			if (st) return st;                                                                                          \
			off += size[g];                                                                                             \
		}                                                                                                               \
		return ST_OK;                                                                                                   \
	}
GROUPED(S, T_S, float) GROUPED(D, T_D, double)

/* extype maps GemmEx's types to the element type the fake computes: A, B
   and C of one type, CUDA_R_32F or CUDA_C_32F with a 32F compute type,
   CUDA_R_64F or CUDA_C_64F with 64F. -1: CUBLAS_STATUS_NOT_SUPPORTED. */
static int extype(int at, int bt, int ct, int comp) {
	if (at != bt || at != ct) return -1;
	if ((at == T_S || at == T_C) && (comp == 68 || comp == 69 || comp == 74 || comp == 75 || comp == 77)) return at;
	if ((at == T_D || at == T_Z) && (comp == 70 || comp == 71)) return at;
	return -1;
}
static int validalgo(int a) { return (a >= -1 && a <= 23) || (a >= 99 && a <= 115) || a == 999; }

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,
                                          const void *A, int at, int lda, long long sa, const void *B, int bt, int ldb,
                                          long long sb, const void *beta, void *C, int ct, int ldc, long long sc,
                                          int batch, int comp, int algo) {
	int T = extype(at, bt, ct, comp);
	if (T < 0 || !validalgo(algo)) {
		cublasStatus_t f;
		if (fcb_failed("cublasGemmStridedBatchedEx", &f)) return f;
		if (fcb_handle("cublasGemmStridedBatchedEx", h)) return ST_NOT_INITIALIZED;
		return T < 0 ? ST_NOT_SUPPORTED : ST_INVALID_VALUE;
	}
	return gemm("cublasGemmStridedBatchedEx", T, h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch, 0);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
                            int at, int lda, const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc,
                            int comp, int algo) {
	int T = extype(at, bt, ct, comp);
	if (T < 0 || !validalgo(algo)) {
		cublasStatus_t f;
		if (fcb_failed("cublasGemmEx", &f)) return f;
		if (fcb_handle("cublasGemmEx", h)) return ST_NOT_INITIALIZED;
		return T < 0 ? ST_NOT_SUPPORTED : ST_INVALID_VALUE;
	}
	return gemm("cublasGemmEx", T, h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1, 0);
}

/* ---- level 2 ---- */

static void gemv_exec(struct task *t) {
	cplx al = fcb_alpha(t), be = fcb_beta(t);
	long lx = t->opa == OP_N ? t->n : t->m, ly = t->opa == OP_N ? t->m : t->n;
	cplx *out = malloc(sizeof(cplx) * (size_t)ly + 1);
	for (long i = 0; i < ly; i++) {
		cplx acc = 0;
		for (long j = 0; j < lx; j++) acc += opget(t->t, t->a, t->lda, t->opa, i, j) * fcb_get(t->t, t->x, vi(lx, t->incx, j));
		out[i] = al * acc + (be == 0 ? 0 : be * fcb_get(t->t, t->y, vi(ly, t->incy, i)));
	}
	for (long i = 0; i < ly; i++) fcb_put(t->t, t->y, vi(ly, t->incy, i), out[i]);
	free(out);
}

static cublasStatus_t gemv(const char *fn, int T, cublasHandle_t h, int trans, int m, int n, const void *alpha,
                           const void *A, int lda, const void *x, int incx, const void *beta, void *y, int incy) {
	BEGIN(fn, T);
	if (!validop(trans) || m < 0 || n < 0 || lda < max1(m) || incx == 0 || incy == 0) return refuse(t, ST_INVALID_VALUE);
	if ((st = fcb_scalars(t, alpha, beta, 1, T))) return refuse(t, st);
	if (m == 0 || n == 0) return refuse(t, ST_OK);
	long lx = trans == OP_N ? n : m, ly = trans == OP_N ? m : n;
	t->exec = gemv_exec;
	t->opa = trans, t->m = m, t->n = n, t->lda = lda, t->incx = incx, t->incy = incy;
	t->a = (uintptr_t)A, t->x = (uintptr_t)x, t->y = (uintptr_t)y;
	fcb_range(t, t->a, fcb_mat(T, m, n, lda));
	fcb_range(t, t->x, fcb_vec(T, lx, incx));
	fcb_range(t, t->y, fcb_vec(T, ly, incy));
	return fcb_submit(t, s, 0);
}
#define GEMV(X, T)                                                                                            \
	cublasStatus_t cublas##X##gemv_v2(cublasHandle_t h, int trans, int m, int n, const void *alpha,          \
	                                  const void *A, int lda, const void *x, int incx, const void *beta,     \
	                                  void *y, int incy) {                                                  \
		return gemv("cublas" #X "gemv_v2", T, h, trans, m, n, alpha, A, lda, x, incx, beta, y, incy); \
	}
GEMV(S, T_S) GEMV(D, T_D) GEMV(C, T_C) GEMV(Z, T_Z)

static void ger_exec(struct task *t) {
	cplx al = fcb_alpha(t);
	for (long j = 0; j < t->n; j++)
		for (long i = 0; i < t->m; i++) {
			long e = i + j * t->lda;
			fcb_put(t->t, t->a, e, fcb_get(t->t, t->a, e) + al * fcb_get(t->t, t->x, vi(t->m, t->incx, i)) * fcb_get(t->t, t->y, vi(t->n, t->incy, j)));
		}
}

static cublasStatus_t ger(const char *fn, int T, cublasHandle_t h, int m, int n, const void *alpha, const void *x,
                          int incx, const void *y, int incy, void *A, int lda) {
	BEGIN(fn, T);
	if (m < 0 || n < 0 || incx == 0 || incy == 0 || lda < max1(m)) return refuse(t, ST_INVALID_VALUE);
	if ((st = fcb_scalars(t, alpha, NULL, 0, T))) return refuse(t, st);
	if (m == 0 || n == 0) return refuse(t, ST_OK);
	t->exec = ger_exec;
	t->m = m, t->n = n, t->lda = lda, t->incx = incx, t->incy = incy;
	t->a = (uintptr_t)A, t->x = (uintptr_t)x, t->y = (uintptr_t)y;
	fcb_range(t, t->a, fcb_mat(T, m, n, lda));
	fcb_range(t, t->x, fcb_vec(T, m, incx));
	fcb_range(t, t->y, fcb_vec(T, n, incy));
	return fcb_submit(t, s, 0);
}
cublasStatus_t cublasSger_v2(cublasHandle_t h, int m, int n, const void *alpha, const void *x, int incx, const void *y,
                             int incy, void *A, int lda) {
	return ger("cublasSger_v2", T_S, h, m, n, alpha, x, incx, y, incy, A, lda);
}
cublasStatus_t cublasDger_v2(cublasHandle_t h, int m, int n, const void *alpha, const void *x, int incx, const void *y,
                             int incy, void *A, int lda) {
	return ger("cublasDger_v2", T_D, h, m, n, alpha, x, incx, y, incy, A, lda);
}
