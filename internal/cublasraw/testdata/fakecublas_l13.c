/* fakecublas_l13.c: fakecublas's level-1 routines and the triangular
 * solves and rank-k update (see fakecublas.c and MODEL.md). Level 1
 * follows reference BLAS: n <= 0 returns at once (a reduction's result is
 * then 0), and so does incx <= 0 for scal, nrm2, asum and iamax; any
 * other increment is allowed. A reduction's result in host pointer mode
 * is written before the call returns (the call waits for the stream). */
#include <math.h>
#include <stdlib.h>

#include "fakecublas.h"

static long vi(long len, long inc, long i) { return inc > 0 ? i * inc : (len - 1 - i) * -inc; }
static long max1(long v) { return v > 1 ? v : 1; }
static int realtype(int t) { return t == T_C ? T_S : t == T_Z ? T_D : t; }
static cublasStatus_t refuse(struct task *t, cublasStatus_t st) {
	free(t);
	return st;
}
#define BEGIN(fn, T)                                           \
	cublasStatus_t st;                                         \
	void *s;                                                   \
	struct task *t = fcb_begin(fn, h, T, &st, &s);             \
	if (!t) return st
#define X(i) fcb_get(t->t, t->x, vi(t->n, t->incx, i))
#define Y(i) fcb_get(t->t, t->y, vi(t->n, t->incy, i))

/* ---- level 1 ---- */

enum { L_AXPY, L_SCAL, L_COPY, L_SWAP, L_DOT, L_DOTC, L_NRM2, L_ASUM, L_IAMAX };

static void l1_exec(struct task *t) {
	long n = t->n;
	int kind = t->opa;
	cplx al = kind == L_AXPY || kind == L_SCAL ? fcb_alpha(t) : 0, r = 0;
	double best = -1;
	for (long i = 0; i < n; i++) {
		switch (kind) {
		case L_AXPY: fcb_put(t->t, t->y, vi(n, t->incy, i), Y(i) + al * X(i)); break;
		case L_SCAL: fcb_put(t->t, t->x, vi(n, t->incx, i), al * X(i)); break;
		case L_COPY: fcb_put(t->t, t->y, vi(n, t->incy, i), X(i)); break;
		case L_SWAP: {
			cplx a = X(i), b = Y(i);
			fcb_put(t->t, t->x, vi(n, t->incx, i), b);
			fcb_put(t->t, t->y, vi(n, t->incy, i), a);
			break;
		}
		case L_DOT: r += X(i) * Y(i); break;
		case L_DOTC: r += conj(X(i)) * Y(i); break;
		case L_NRM2: r += creal(X(i) * conj(X(i))); break;
		case L_ASUM: r += fabs(creal(X(i))) + fabs(cimag(X(i))); break;
		case L_IAMAX: {
			double v = fabs(creal(X(i))) + fabs(cimag(X(i)));
			if (v > best) best = v, r = i + 1; /* 1-based, the first of equals */
			break;
		}
		}
	}
	if (kind == L_NRM2) r = sqrt(creal(r));
	if (kind < L_DOT) return;
	uintptr_t out = t->pmode ? t->res : t->hostres;
	if (t->reskind == 2) *(int *)out = (int)creal(r);
	else fcb_put(t->reskind ? realtype(t->t) : t->t, out, 0, r);
}

static cublasStatus_t l1(const char *fn, int T, int kind, cublasHandle_t h, int n, const void *alpha, const void *x,
                         int incx, void *y, int incy, void *result) {
	BEGIN(fn, T);
	int reduce = kind >= L_DOT;
	if (kind == L_AXPY || kind == L_SCAL) {
		if ((st = fcb_scalars(t, alpha, NULL, 0, T))) return refuse(t, st);
	}
	if (reduce && !result) return refuse(t, ST_INVALID_VALUE);
	int noinc = (kind == L_SCAL || kind == L_NRM2 || kind == L_ASUM || kind == L_IAMAX) && incx <= 0;
	if (n <= 0 || noinc) {
		if (!reduce) return refuse(t, ST_OK);
		n = 0; /* the result is 0, written in stream order */
	}
	t->exec = l1_exec;
	t->opa = kind, t->n = n, t->incx = incx, t->incy = incy, t->x = (uintptr_t)x, t->y = (uintptr_t)y;
	fcb_range(t, t->x, fcb_vec(T, n, incx));
	if (kind == L_AXPY || kind == L_COPY || kind == L_SWAP || kind == L_DOT || kind == L_DOTC)
		fcb_range(t, t->y, fcb_vec(T, n, incy));
	if (!reduce) return fcb_submit(t, s, 0);
	t->reskind = kind == L_IAMAX ? 2 : kind == L_NRM2 || kind == L_ASUM ? 1 : 0;
	if (t->pmode) {
		t->res = (uintptr_t)result;
		fcb_range(t, t->res, t->reskind == 2 ? 4 : fcb_size(t->reskind ? realtype(T) : T));
	} else {
		t->hostres = (uintptr_t)result;
	}
	return fcb_submit(t, s, !t->pmode);
}

#define AXPY(X, T)                                                                                            \
	cublasStatus_t cublas##X##axpy_v2(cublasHandle_t h, int n, const void *alpha, const void *x, int incx,   \
	                                  void *y, int incy) {                                                  \
		return l1("cublas" #X "axpy_v2", T, L_AXPY, h, n, alpha, x, incx, y, incy, NULL);                  \
	}                                                                                                         \
	cublasStatus_t cublas##X##scal_v2(cublasHandle_t h, int n, const void *alpha, void *x, int incx) {       \
		return l1("cublas" #X "scal_v2", T, L_SCAL, h, n, alpha, x, incx, NULL, 0, NULL);                  \
	}                                                                                                         \
	cublasStatus_t cublas##X##copy_v2(cublasHandle_t h, int n, const void *x, int incx, void *y, int incy) { \
		return l1("cublas" #X "copy_v2", T, L_COPY, h, n, NULL, x, incx, y, incy, NULL);                   \
	}                                                                                                         \
	cublasStatus_t cublas##X##swap_v2(cublasHandle_t h, int n, void *x, int incx, void *y, int incy) {       \
		return l1("cublas" #X "swap_v2", T, L_SWAP, h, n, NULL, x, incx, y, incy, NULL);                   \
	}
AXPY(S, T_S) AXPY(D, T_D) AXPY(C, T_C) AXPY(Z, T_Z)

#define RED(name, T, kind)                                                                     \
	cublasStatus_t name(cublasHandle_t h, int n, const void *x, int incx, void *result) {      \
		return l1(#name, T, kind, h, n, NULL, x, incx, NULL, 0, result);                      \
	}
RED(cublasSnrm2_v2, T_S, L_NRM2) RED(cublasDnrm2_v2, T_D, L_NRM2)
RED(cublasScnrm2_v2, T_C, L_NRM2) RED(cublasDznrm2_v2, T_Z, L_NRM2)
RED(cublasSasum_v2, T_S, L_ASUM) RED(cublasDasum_v2, T_D, L_ASUM)
RED(cublasScasum_v2, T_C, L_ASUM) RED(cublasDzasum_v2, T_Z, L_ASUM)
RED(cublasIsamax_v2, T_S, L_IAMAX) RED(cublasIdamax_v2, T_D, L_IAMAX)
RED(cublasIcamax_v2, T_C, L_IAMAX) RED(cublasIzamax_v2, T_Z, L_IAMAX)

#define DOT(name, T, kind)                                                                                 \
	cublasStatus_t name(cublasHandle_t h, int n, const void *x, int incx, const void *y, int incy,        \
	                    void *result) {                                                                    \
		return l1(#name, T, kind, h, n, NULL, x, incx, (void *)y, incy, result);                          \
	}
DOT(cublasSdot_v2, T_S, L_DOT) DOT(cublasDdot_v2, T_D, L_DOT)
DOT(cublasCdotu_v2, T_C, L_DOT) DOT(cublasZdotu_v2, T_Z, L_DOT)
DOT(cublasCdotc_v2, T_C, L_DOTC) DOT(cublasZdotc_v2, T_Z, L_DOTC)

/* ---- triangular solves, rank-k update ---- */

/* tri loads op(A) (n x n, triangular as uplo and op say, unit diagonal if
   diag) densely; lower reports whether op(A) is lower triangular. */
static cplx *tri(struct task *t, long n, int *lower) {
	cplx *a = calloc((size_t)(n * n) + 1, sizeof(cplx));
	*lower = (t->uplo == 0) == (t->opa == OP_N);
	for (long i = 0; i < n; i++)
		for (long j = 0; j < n; j++) {
			if (*lower ? j > i : j < i) continue;
			long r = t->opa == OP_N ? i : j, c = t->opa == OP_N ? j : i;
			cplx v = fcb_get(t->t, t->a, r + c * t->lda);
			a[i + j * n] = i == j && t->diag ? 1 : t->opa == OP_C ? conj(v) : v;
		}
	return a;
}

/* solve solves op(A) x = b in place (x has n elements at stride 1);
   right: x op(A) = b instead. */
static void solve(cplx *a, long n, int lower, int right, cplx *x) {
	int fwd = lower != right;
	for (long s = 0; s < n; s++) {
		long i = fwd ? s : n - 1 - s;
		cplx acc = x[i];
		for (long j = 0; j < n; j++) {
			if (j == i || (fwd ? j > i : j < i)) continue;
			acc -= (right ? a[j + i * n] : a[i + j * n]) * x[j];
		}
		x[i] = acc / a[i + i * n];
	}
}

static void trsv_exec(struct task *t) {
	int lower;
	cplx *a = tri(t, t->n, &lower), *x = malloc(sizeof(cplx) * (size_t)t->n + 1);
	for (long i = 0; i < t->n; i++) x[i] = X(i);
	solve(a, t->n, lower, 0, x);
	for (long i = 0; i < t->n; i++) fcb_put(t->t, t->x, vi(t->n, t->incx, i), x[i]);
	free(a);
	free(x);
}

static cublasStatus_t trsv(const char *fn, int T, cublasHandle_t h, int uplo, int trans, int diag, int n, const void *A,
                           int lda, void *x, int incx) {
	BEGIN(fn, T);
	if ((uplo != 0 && uplo != 1) || trans < 0 || trans > 2 || (diag != 0 && diag != 1) || n < 0 || lda < max1(n) || incx == 0)
		return refuse(t, ST_INVALID_VALUE);
	if (n == 0) return refuse(t, ST_OK);
	t->exec = trsv_exec;
	t->uplo = uplo, t->opa = trans, t->diag = diag, t->n = n, t->lda = lda, t->incx = incx;
	t->a = (uintptr_t)A, t->x = (uintptr_t)x;
	fcb_range(t, t->a, fcb_mat(T, n, n, lda));
	fcb_range(t, t->x, fcb_vec(T, n, incx));
	return fcb_submit(t, s, 0);
}
cublasStatus_t cublasStrsv_v2(cublasHandle_t h, int uplo, int trans, int diag, int n, const void *A, int lda, void *x, int incx) {
	return trsv("cublasStrsv_v2", T_S, h, uplo, trans, diag, n, A, lda, x, incx);
}
cublasStatus_t cublasDtrsv_v2(cublasHandle_t h, int uplo, int trans, int diag, int n, const void *A, int lda, void *x, int incx) {
	return trsv("cublasDtrsv_v2", T_D, h, uplo, trans, diag, n, A, lda, x, incx);
}

/* trsm: op(A) X = alpha B (side left) or X op(A) = alpha B (right), X
   over B. */
static void trsm_exec(struct task *t) {
	int lower, right = t->side == 1;
	long na = right ? t->n : t->m, cnt = right ? t->m : t->n;
	cplx al = fcb_alpha(t), *a = tri(t, na, &lower), *v = malloc(sizeof(cplx) * (size_t)na + 1);
	for (long c = 0; c < cnt; c++) { /* a column of B (left) or a row (right) */
		for (long i = 0; i < na; i++) v[i] = al * fcb_get(t->t, t->b, right ? c + i * t->ldb : i + c * t->ldb);
		solve(a, na, lower, right, v);
		for (long i = 0; i < na; i++) fcb_put(t->t, t->b, right ? c + i * t->ldb : i + c * t->ldb, v[i]);
	}
	free(a);
	free(v);
}

static cublasStatus_t trsm(const char *fn, int T, cublasHandle_t h, int side, int uplo, int trans, int diag, int m, int n,
                           const void *alpha, const void *A, int lda, void *B, int ldb) {
	BEGIN(fn, T);
	long na = side == 0 ? m : n;
	if ((side != 0 && side != 1) || (uplo != 0 && uplo != 1) || trans < 0 || trans > 2 || (diag != 0 && diag != 1) ||
	    m < 0 || n < 0 || lda < max1(na) || ldb < max1(m))
		return refuse(t, ST_INVALID_VALUE);
	if ((st = fcb_scalars(t, alpha, NULL, 0, T))) return refuse(t, st);
	if (m == 0 || n == 0) return refuse(t, ST_OK);
	t->exec = trsm_exec;
	t->side = side, t->uplo = uplo, t->opa = trans, t->diag = diag, t->m = m, t->n = n, t->lda = lda, t->ldb = ldb;
	t->a = (uintptr_t)A, t->b = (uintptr_t)B;
	fcb_range(t, t->a, fcb_mat(T, na, na, lda));
	fcb_range(t, t->b, fcb_mat(T, m, n, ldb));
	return fcb_submit(t, s, 0);
}
cublasStatus_t cublasStrsm_v2(cublasHandle_t h, int side, int uplo, int trans, int diag, int m, int n, const void *alpha,
                              const void *A, int lda, void *B, int ldb) {
	return trsm("cublasStrsm_v2", T_S, h, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb);
}
cublasStatus_t cublasDtrsm_v2(cublasHandle_t h, int side, int uplo, int trans, int diag, int m, int n, const void *alpha,
                              const void *A, int lda, void *B, int ldb) {
	return trsm("cublasDtrsm_v2", T_D, h, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb);
}

/* syrk: C = alpha op(A) op(A)^T + beta C on the uplo triangle of C only
   (op(A) is n x k; no conjugation). */
static void syrk_exec(struct task *t) {
	cplx al = fcb_alpha(t), be = fcb_beta(t);
	for (long j = 0; j < t->n; j++)
		for (long i = 0; i < t->n; i++) {
			if (t->uplo == 0 ? i < j : i > j) continue;
			cplx acc = 0;
			for (long l = 0; l < t->k; l++) {
				long ai = t->opa == OP_N ? i + l * t->lda : l + i * t->lda, aj = t->opa == OP_N ? j + l * t->lda : l + j * t->lda;
				acc += fcb_get(t->t, t->a, ai) * fcb_get(t->t, t->a, aj);
			}
			long e = i + j * t->ldc;
			fcb_put(t->t, t->c, e, al * acc + (be == 0 ? 0 : be * fcb_get(t->t, t->c, e)));
		}
}

static cublasStatus_t syrk(const char *fn, int T, cublasHandle_t h, int uplo, int trans, int n, int k, const void *alpha,
                           const void *A, int lda, const void *beta, void *C, int ldc) {
	BEGIN(fn, T);
	int cplxT = T == T_C || T == T_Z;
	long ar = trans == OP_N ? n : k, ac = trans == OP_N ? k : n;
	if ((uplo != 0 && uplo != 1) || trans < 0 || trans > (cplxT ? 1 : 2) || n < 0 || k < 0 || lda < max1(ar) || ldc < max1(n))
		return refuse(t, ST_INVALID_VALUE);
	if ((st = fcb_scalars(t, alpha, beta, 1, T))) return refuse(t, st);
	if (n == 0) return refuse(t, ST_OK);
	t->exec = syrk_exec;
	t->uplo = uplo, t->opa = trans, t->n = n, t->k = k, t->lda = lda, t->ldc = ldc;
	t->a = (uintptr_t)A, t->c = (uintptr_t)C;
	fcb_range(t, t->a, fcb_mat(T, ar, ac, lda));
	fcb_range(t, t->c, fcb_mat(T, n, n, ldc));
	return fcb_submit(t, s, 0);
}
cublasStatus_t cublasSsyrk_v2(cublasHandle_t h, int uplo, int trans, int n, int k, const void *alpha, const void *A,
                              int lda, const void *beta, void *C, int ldc) {
	return syrk("cublasSsyrk_v2", T_S, h, uplo, trans, n, k, alpha, A, lda, beta, C, ldc);
}
cublasStatus_t cublasDsyrk_v2(cublasHandle_t h, int uplo, int trans, int n, int k, const void *alpha, const void *A,
                              int lda, const void *beta, void *C, int ldc) {
	return syrk("cublasDsyrk_v2", T_D, h, uplo, trans, n, k, alpha, A, lda, beta, C, ldc);
}
