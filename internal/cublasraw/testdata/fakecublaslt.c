/* fakecublaslt.c: fakecublas's cuBLASLt part (see fakecublas.c and
 * MODEL.md): handles, matmul descriptors, matrix layouts (column order),
 * preferences, a heuristic that offers one algorithm, and cublasLtMatmul
 * computing D = alpha op(A) op(B) + beta C exactly (strided batches too),
 * with the epilogues (forward, auxiliary and gradient ones), FP8
 * inputs with their scales and FP8 outputs with D's scale and amax,
 * queued on its stream like the cuBLAS
 * routines. Objects are kept when destroyed, so that a later use counts
 * as a bad use. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fakecublas.h"

enum { LT_HANDLE = 1, LT_DESC, LT_LAYOUT, LT_PREF };
#define LT_MAGIC 0x17AB
#define ALGO_MAGIC 0xFA4EA160ULL

struct ltobj {
	int magic, kind, alive;
	int compute, scale, pmode, transa, transb, epilogue; /* desc */
	uint64_t bias;                                       /* desc: BIAS_POINTER */
	uint64_t aux; int64_t auxld;                         /* desc: EPILOGUE_AUX_POINTER, _LD */
	uint64_t scales[4], amax;                            /* desc: A..D_SCALE_POINTER, AMAX_D_POINTER */
	int type, order, batch;                              /* layout */
	uint64_t rows, cols;
	int64_t ld, stride;
	uint64_t maxws; uint32_t minalign[4]; /* pref: MAX_WORKSPACE_BYTES, MIN_ALIGNMENT_A..D_BYTES (0: 256) */
};

static long live_handles, live_descs;

/* Lt operations use no handle state: their tasks name this one, always
   alive (a handle destroyed with matmuls queued is no bad use). */
static struct cublasContext lt_any = {0xB1A5, 1, NULL, NULL, 0, 0, 0, 0, 0};

static cublasStatus_t make(void **out, int kind) {
	if (!out) return ST_INVALID_VALUE;
	struct ltobj *o = calloc(1, sizeof *o);
	o->magic = LT_MAGIC, o->kind = kind, o->alive = 1;
	o->epilogue = 1, o->batch = 1;
	pthread_mutex_lock(&fcb_mu);
	if (kind == LT_HANDLE) live_handles++;
	else live_descs++;
	pthread_mutex_unlock(&fcb_mu);
	*out = o;
	return ST_OK;
}

/* get checks an object of kind for fn: NULL is nullst; a destroyed or
   unknown one a bad use (CUBLAS_STATUS_INVALID_VALUE). */
static cublasStatus_t get(const char *fn, void *p, int kind, cublasStatus_t nullst) {
	struct ltobj *o = p;
	if (!o) return nullst;
	pthread_mutex_lock(&fcb_mu);
	int ok = o->magic == LT_MAGIC && o->kind == kind && o->alive;
	pthread_mutex_unlock(&fcb_mu);
	if (ok) return ST_OK;
	fcb_bad(fn, "destroyed or unknown cuBLASLt object %p", p);
	return ST_INVALID_VALUE;
}

static cublasStatus_t destroy(const char *fn, void *p, int kind) {
	cublasStatus_t r = get(fn, p, kind, kind == LT_HANDLE ? ST_NOT_INITIALIZED : ST_OK);
	if (r || !p) return r;
	pthread_mutex_lock(&fcb_mu);
	((struct ltobj *)p)->alive = 0;
	if (kind == LT_HANDLE) live_handles--;
	else live_descs--;
	pthread_mutex_unlock(&fcb_mu);
	return ST_OK;
}

#define FAILLT(name)                                  \
	do {                                              \
		cublasStatus_t f_;                            \
		if (fcb_failed(name, &f_)) return f_;         \
	} while (0)

size_t cublasLtGetVersion(void) { return 130100; }
cublasStatus_t cublasLtCreate(void **h) {
	FAILLT("cublasLtCreate");
	return make(h, LT_HANDLE);
}
cublasStatus_t cublasLtDestroy(void *h) {
	FAILLT("cublasLtDestroy");
	return destroy("cublasLtDestroy", h, LT_HANDLE);
}
cublasStatus_t cublasLtMatmulDescCreate(void **d, int compute, int scale) {
	FAILLT("cublasLtMatmulDescCreate");
	cublasStatus_t r = make(d, LT_DESC);
	if (!r) ((struct ltobj *)*d)->compute = compute, ((struct ltobj *)*d)->scale = scale;
	return r;
}
cublasStatus_t cublasLtMatmulDescDestroy(void *d) {
	FAILLT("cublasLtMatmulDescDestroy");
	return destroy("cublasLtMatmulDescDestroy", d, LT_DESC);
}
cublasStatus_t cublasLtMatrixLayoutCreate(void **l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
	FAILLT("cublasLtMatrixLayoutCreate");
	cublasStatus_t r = make(l, LT_LAYOUT);
	if (!r) {
		struct ltobj *o = *l;
		o->type = type, o->rows = rows, o->cols = cols, o->ld = ld;
	}
	return r;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(void *l) {
	FAILLT("cublasLtMatrixLayoutDestroy");
	return destroy("cublasLtMatrixLayoutDestroy", l, LT_LAYOUT);
}
cublasStatus_t cublasLtMatmulPreferenceCreate(void **p) {
	FAILLT("cublasLtMatmulPreferenceCreate");
	return make(p, LT_PREF);
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(void *p) {
	FAILLT("cublasLtMatmulPreferenceDestroy");
	return destroy("cublasLtMatmulPreferenceDestroy", p, LT_PREF);
}

/* set stores an attribute of size want from buf into field (of size want). */
static cublasStatus_t set(void *field, size_t want, const void *buf, size_t size) {
	if (!buf || size != want) return ST_INVALID_VALUE;
	memcpy(field, buf, want);
	return ST_OK;
}

/* The descriptor attributes modelled: COMPUTE_TYPE, SCALE_TYPE,
   POINTER_MODE, TRANSA, TRANSB, EPILOGUE, BIAS_POINTER,
   EPILOGUE_AUX_POINTER, EPILOGUE_AUX_LD, A/B/C/D_SCALE_POINTER,
   AMAX_D_POINTER (kept, to be refused when not NULL: D is never FP8
   here); others NOT_SUPPORTED. */
cublasStatus_t cublasLtMatmulDescSetAttribute(void *d, int attr, const void *buf, size_t size) {
	FAILLT("cublasLtMatmulDescSetAttribute");
	cublasStatus_t r = get("cublasLtMatmulDescSetAttribute", d, LT_DESC, ST_INVALID_VALUE);
	if (r) return r;
	struct ltobj *o = d;
	switch (attr) {
	case 0: return set(&o->compute, 4, buf, size);
	case 1: return set(&o->scale, 4, buf, size);
	case 2: return set(&o->pmode, 4, buf, size);
	case 3: return set(&o->transa, 4, buf, size);
	case 4: return set(&o->transb, 4, buf, size);
	case 7: return set(&o->epilogue, 4, buf, size);
	case 8: return set(&o->bias, 8, buf, size);
	case 11: return set(&o->aux, 8, buf, size);
	case 12: return set(&o->auxld, 8, buf, size);
	case 17: case 18: case 19: case 20: return set(&o->scales[attr - 17], 8, buf, size);
	case 21: return set(&o->amax, 8, buf, size);
	}
	return ST_NOT_SUPPORTED;
}

/* Layout attributes: TYPE, ORDER, ROWS, COLS, LD, BATCH_COUNT,
   STRIDED_BATCH_OFFSET; others NOT_SUPPORTED. */
cublasStatus_t cublasLtMatrixLayoutSetAttribute(void *l, int attr, const void *buf, size_t size) {
	FAILLT("cublasLtMatrixLayoutSetAttribute");
	cublasStatus_t r = get("cublasLtMatrixLayoutSetAttribute", l, LT_LAYOUT, ST_INVALID_VALUE);
	if (r) return r;
	struct ltobj *o = l;
	switch (attr) {
	case 0: return set(&o->type, 4, buf, size);
	case 1: return set(&o->order, 4, buf, size);
	case 2: return set(&o->rows, 8, buf, size);
	case 3: return set(&o->cols, 8, buf, size);
	case 4: return set(&o->ld, 8, buf, size);
	case 5: return set(&o->batch, 4, buf, size);
	case 6: return set(&o->stride, 8, buf, size);
	}
	return ST_NOT_SUPPORTED;
}

/* Preference attributes: SEARCH_MODE (ignored), MAX_WORKSPACE_BYTES,
   MIN_ALIGNMENT_A/B/C/D_BYTES (what the algorithms chosen may assume of
   the matrices' addresses; 256 by default). */
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(void *p, int attr, const void *buf, size_t size) {
	FAILLT("cublasLtMatmulPreferenceSetAttribute");
	cublasStatus_t r = get("cublasLtMatmulPreferenceSetAttribute", p, LT_PREF, ST_INVALID_VALUE);
	if (r) return r;
	uint32_t mode;
	if (attr == 0) return set(&mode, 4, buf, size);
	if (attr == 1) return set(&((struct ltobj *)p)->maxws, 8, buf, size);
	if (attr >= 5 && attr <= 8) return set(&((struct ltobj *)p)->minalign[attr - 5], 4, buf, size);
	return ST_NOT_SUPPORTED;
}

/* The epilogues: bias (adds one), forward ReLU / GELU, their auxiliary
   forms (128: a mask or GELU's input stored), their gradients (reading
   it), the bias gradients. */
static int has_bias(int e) { return e == 4 || e == 6 || e == 36 || e == 134 || e == 164; }
static int bgrad(int e) { return e == 152 || e == 208 || e == 256 || e == 512; }
static int relu_mask(int e) { return e == 130 || e == 134 || e == 136 || e == 152; }
static int gelu_aux(int e) { return e == 160 || e == 164 || e == 192 || e == 208; }
static int isf8(int t) { return t == T_E4 || t == T_E5; }

/* shape checks a matmul's descriptor and layouts: D's element type, or
   -ST_NOT_SUPPORTED / -ST_INVALID_VALUE. */
static int shape(const char *fn, void *h, void *d, void *a, void *b, void *c, void *dd) {
	cublasStatus_t r;
	if ((r = get(fn, h, LT_HANDLE, ST_NOT_INITIALIZED))) return -(int)r;
	void *objs[] = {d, a, b, c, dd};
	for (int i = 0; i < 5; i++)
		if ((r = get(fn, objs[i], i ? LT_LAYOUT : LT_DESC, ST_INVALID_VALUE))) return -(int)r;
	struct ltobj *D = d, *A = a, *B = b, *C = c, *Dd = dd;
	int T = A->type, e = D->epilogue;
	if (D->transa < 0 || D->transa > 2 || D->transb < 0 || D->transb > 2) return -ST_INVALID_VALUE;
	uint64_t m = D->transa ? A->cols : A->rows, k = D->transa ? A->rows : A->cols;
	uint64_t kb = D->transb ? B->cols : B->rows, n = D->transb ? B->rows : B->cols;
	if (isf8(A->type) || isf8(B->type)) {
		/* FP8: E4M3 x E4M3 / E5M2, E5M2 x E4M3; C and D of one type, half,
		   bfloat16 or float, or D E4M3 (or E5M2 where A or B is) with C
		   half or bfloat16;
		   compute 32F, scale float; "TN"; sizes and leading dimensions of
		   16 bytes; the epilogues DEFAULT, RELU, GELU, and their bias forms
		   for a 16-bit D. */
		T = Dd->type;
		int out8 = isf8(T), ct = out8 ? C->type : T;
		int ok = isf8(A->type) && isf8(B->type) && !(A->type == T_E5 && B->type == T_E5) &&
		         ((!out8 && (T == T_H || T == T_BF || T == T_S) && C->type == T) ||
		          (out8 && (ct == T_H || ct == T_BF) && (T == T_E4 || A->type == T_E5 || B->type == T_E5))) &&
		         D->compute == 68 && D->scale == T_S &&
		         D->transa == OP_T && D->transb == OP_N && m % 16 == 0 && n % 16 == 0 && k % 16 == 0 &&
		         A->ld % 16 == 0 && B->ld % 16 == 0 && (C->ld * (int64_t)fcb_size(ct)) % 16 == 0 &&
		         (Dd->ld * (int64_t)fcb_size(T)) % 16 == 0 &&
		         (e == 1 || e == 2 || e == 32 || (T != T_S && !out8 && (e == 4 || e == 6 || e == 36)));
		if (!ok || (D->pmode != 0 && D->pmode != 1) || A->order || B->order || C->order || Dd->order || Dd->batch != 1)
			return -ST_NOT_SUPPORTED;
	} else {
		int okc = ((T == T_S || T == T_C) && (D->compute == 68 || D->compute == 69 || D->compute == 74 || D->compute == 75 || D->compute == 77)) ||
		          ((T == T_D || T == T_Z) && (D->compute == 70 || D->compute == 71)) ||
		          ((T == T_H || T == T_BF) && (D->compute == 68 || D->compute == 69));
		/* alpha and beta: of the type (float for half and bfloat16) */
		int st = T == T_H || T == T_BF ? T_S : T;
		/* Epilogues: DEFAULT for every type; the others for real ones (a
		   bias of D's type, one per row of D), those with an auxiliary
		   matrix or a bias gradient unbatched. */
		int real = T == T_S || T == T_D || T == T_H || T == T_BF;
		int oke = e == 1 || (real && (e == 2 || e == 4 || e == 6 || e == 32 || e == 36)) ||
		          (real && Dd->batch == 1 && (relu_mask(e) || gelu_aux(e) || bgrad(e)));
		if (B->type != T || C->type != T || Dd->type != T || !okc || D->scale != st || !oke ||
		    (D->pmode != 0 && D->pmode != 1) || A->order || B->order || C->order || Dd->order)
			return -ST_NOT_SUPPORTED;
	}
	struct ltobj *ls[] = {A, B, C, Dd};
	for (int i = 0; i < 4; i++)
		if (ls[i]->ld < (int64_t)(ls[i]->rows > 1 ? ls[i]->rows : 1) || ls[i]->batch < 1 || ls[i]->batch != Dd->batch)
			return -ST_INVALID_VALUE;
	if (k != kb || C->rows != m || C->cols != n || Dd->rows != m || Dd->cols != n) return -ST_INVALID_VALUE;
	return T;
}

static int algos = 1; /* candidates the heuristic returns (fake_cublaslt_set_algos) */

/* The alignments an algorithm assumes, kept in its opaque bytes after
   the magic: of A, B, C, D (the preference's minimums), and of the bias,
   the auxiliary matrix and the A and B scales (the alignment of the
   pointers the heuristic saw in the descriptor; NULL promises 256). */
enum { AL_A, AL_B, AL_C, AL_D, AL_BIAS, AL_AUX, AL_SA, AL_SB, AL_N };

static uint16_t align_of(uint64_t p) {
	uint64_t a = p & -p;
	return (uint16_t)(!p || a > 256 ? 256 : a);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(void *h, void *d, void *a, void *b, void *c, void *dd, void *pref,
                                              int requested, void *results, int *count) {
	FAILLT("cublasLtMatmulAlgoGetHeuristic");
	if (count) *count = 0;
	int T = shape("cublasLtMatmulAlgoGetHeuristic", h, d, a, b, c, dd);
	if (T < 0) return (cublasStatus_t)-T;
	if (((struct ltobj *)d)->amax && !isf8(((struct ltobj *)dd)->type)) return ST_INVALID_VALUE; /* D's amax is for an FP8 D */
	cublasStatus_t r = get("cublasLtMatmulAlgoGetHeuristic", pref, LT_PREF, ST_INVALID_VALUE);
	if (r) return r;
	if (requested <= 0 || !results || !count) return ST_INVALID_VALUE;
	/* cublasLtMatmulHeuristicResult_t: algo (64 bytes), workspaceSize,
	   state, wavesCount, reserved[4]: 96 bytes. */
	pthread_mutex_lock(&fcb_mu);
	int n = algos;
	pthread_mutex_unlock(&fcb_mu);
	if (n > requested) n = requested;
	struct ltobj *D = d, *P = pref;
	uint16_t al[AL_N];
	for (int i = 0; i < 4; i++) al[i] = P->minalign[i] ? (uint16_t)(P->minalign[i] < 256 ? P->minalign[i] : 256) : 256;
	al[AL_BIAS] = align_of(D->bias), al[AL_AUX] = align_of(D->aux);
	al[AL_SA] = align_of(D->scales[0]), al[AL_SB] = align_of(D->scales[1]);
	for (int i = 0; i < n; i++) {
		unsigned char *res = (unsigned char *)results + 96 * i;
		memset(res, 0, 96);
		uint64_t magic = ALGO_MAGIC;
		float waves = 1;
		memcpy(res, &magic, 8);
		memcpy(res + 8, al, sizeof al);
		memcpy(res + 76, &waves, 4);
	}
	*count = n;
	return ST_OK;
}

/* fake_cublaslt_set_algos sets how many candidates (each the one
   algorithm) the heuristic returns, at most the number requested: 1 at
   first; n < 1 goes back to 1. */
void fake_cublaslt_set_algos(long n) {
	pthread_mutex_lock(&fcb_mu);
	algos = n < 1 ? 1 : (int)n;
	pthread_mutex_unlock(&fcb_mu);
}

#define GELU_K 0.7978845608028654
#define GELU_C 0.044715

static double gelu(double v) { return 0.5 * v * (1 + tanh(GELU_K * (v + GELU_C * v * v * v))); }

/* dgelu is GELU's derivative at a. */
static double dgelu(double a) {
	double t = tanh(GELU_K * (a + GELU_C * a * a * a));
	return 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * GELU_K * (1 + 3 * GELU_C * a * a);
}

static float readf(uintptr_t p) { return p ? *(float *)p : 1; }

/* epi_one computes one real matmul with A and B of their own types (FP8
   too), the scales, the epilogue (bias, activation, auxiliary output or
   input, bias gradient) in double, and stores D once (through a copy: C
   and D may be one matrix). */
static void epi_one(struct task *t, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, double al, double be) {
	long m = t->m, n = t->n, ct = t->t, ld = t->auxld;
	int e = t->epilogue;
	double s = (double)readf(t->ascale) * readf(t->bscale);
	double *out = malloc(sizeof(double) * (size_t)(m * n) + 1);
	uint8_t *mask = (uint8_t *)t->aux;
	for (long j = 0; j < n; j++)
		for (long i = 0; i < m; i++) {
			double acc = 0;
			for (long l = 0; l < t->k; l++)
				acc += creal(fcb_get(t->ta, a, t->opa ? l + i * t->lda : i + l * t->lda)) *
				       creal(fcb_get(t->tb, b, t->opb ? j + l * t->ldb : l + j * t->ldb));
			double v = al * s * acc + (be == 0 ? 0 : be * creal(fcb_get(t->tc ? t->tc : ct, c, i + j * t->ldc)));
			long x = i + j * ld;
			if (has_bias(e)) v += creal(fcb_get(ct, t->bias, i));
			if (e == 2 || e == 6 || e == 130 || e == 134) { /* ReLU */
				if (e & 128) mask[x >> 3] = (uint8_t)(v >= 0 ? mask[x >> 3] | 1u << (x & 7) : mask[x >> 3] & ~(1u << (x & 7)));
				v = v > 0 ? v : 0;
			}
			if (e == 32 || e == 36 || e == 160 || e == 164) { /* GELU */
				if (e & 128) fcb_put(ct, t->aux, x, v);
				v = gelu(v);
			}
			if (relu_mask(e) && !(e & 2)) v = (mask[x >> 3] >> (x & 7)) & 1 ? v : 0; /* DReLU */
			if (gelu_aux(e) && !(e & 32)) v *= dgelu(creal(fcb_get(ct, t->aux, x))); /* DGELU */
			out[i + j * m] = v;
		}
	if (isf8(ct)) { /* an FP8 D: the amax of the result, then its scale */
		float amax = 0, ds = readf(t->dscale);
		for (long x = 0; x < m * n; x++) {
			if (fabs(out[x]) > amax) amax = (float)fabs(out[x]);
			out[x] *= ds;
		}
		if (t->amax) *(float *)t->amax = amax;
	}
	for (long j = 0; j < n; j++)
		for (long i = 0; i < m; i++) fcb_put(ct, d, i + j * t->ldd, out[i + j * m]);
	if (e == 152 || e == 208) /* the sums of D's gradient along its rows */
		for (long i = 0; i < m; i++) {
			double g = 0;
			for (long j = 0; j < n; j++) g += out[i + j * m];
			fcb_put(ct, t->bias, i, g);
		}
	if (e == 256) /* BGRADA: g[i] = sum_l op(A)[i, l] */
		for (long i = 0; i < m; i++) {
			double g = 0;
			for (long l = 0; l < t->k; l++) g += creal(fcb_get(t->ta, a, t->opa ? l + i * t->lda : i + l * t->lda));
			fcb_put(ct, t->bias, i, g);
		}
	if (e == 512) /* BGRADB: g[j] = sum_l op(B)[l, j] */
		for (long j = 0; j < n; j++) {
			double g = 0;
			for (long l = 0; l < t->k; l++) g += creal(fcb_get(t->tb, b, t->opb ? j + l * t->ldb : l + j * t->ldb));
			fcb_put(ct, t->bias, j, g);
		}
	free(out);
}

static void matmul_exec(struct task *t) {
	long long es = (long long)fcb_size(t->t), ea = (long long)fcb_size(t->ta), eb = (long long)fcb_size(t->tb);
	cplx al = fcb_alpha(t), be = fcb_beta(t);
	for (long i = 0; i < t->batch; i++) {
		uintptr_t a = t->a + i * t->sa * ea, b = t->b + i * t->sb * eb, c = t->c + i * t->sc * es, d = t->d + i * t->sd * es;
		if (t->epilogue == 1 && t->ta == t->t && !t->ascale && !t->bscale && !isf8(t->t))
			fcb_gemm_one(t, a, b, c, d, t->t, al, be);
		else
			epi_one(t, a, b, c, d, creal(al), creal(be));
	}
}

/* misaligned reports (a bad use: the kernel would fault with a misaligned
   address) the first pointer of the matmul less aligned than the
   heuristic's algorithm assumes. */
static int misaligned(const char *fn, const unsigned char *algo, const uintptr_t ptrs[AL_N]) {
	static const char *names[AL_N] = {"A", "B", "C", "D", "the bias", "the auxiliary matrix", "A's scale", "B's scale"};
	uint16_t al[AL_N];
	memcpy(al, algo + 8, sizeof al);
	for (int i = 0; i < AL_N; i++)
		if (ptrs[i] && al[i] && ptrs[i] % al[i]) {
			fcb_bad(fn, "misaligned address: %s at %#lx, the algorithm assumes %u-byte alignment", names[i], (unsigned long)ptrs[i], (unsigned)al[i]);
			return 1;
		}
	return 0;
}

static void lrange(struct task *t, uintptr_t p, struct ltobj *l) {
	size_t one = fcb_mat(l->type, (long)l->rows, (long)l->cols, (long)l->ld);
	if (!one) return;
	long long last = (l->batch - 1) * l->stride * (long long)fcb_size(l->type);
	long long lo = last < 0 ? last : 0, hi = (last > 0 ? last : 0) + (long long)one;
	fcb_range(t, p + lo, (size_t)(hi - lo));
}

cublasStatus_t cublasLtMatmul(void *h, void *d, const void *alpha, const void *A, void *a, const void *B, void *b,
                              const void *beta, const void *C, void *c, void *D, void *dd, const void *algo,
                              void *ws, size_t wssize, void *stream) {
	FAILLT("cublasLtMatmul");
	const char *fn = "cublasLtMatmul";
	if (!fcb_cuda()) return ST_NOT_INITIALIZED;
	int T = shape(fn, h, d, a, b, c, dd);
	if (T < 0) return (cublasStatus_t)-T;
	if (algo && *(const uint64_t *)algo != ALGO_MAGIC) return ST_INVALID_VALUE;
	struct ltobj *Dsc = d, *Al = a, *Bl = b, *Cl = c, *Dl = dd;
	int e = Dsc->epilogue, fp8 = isf8(Al->type);
	long m = (long)Dl->rows, ald = (long)Dsc->auxld;
	if ((has_bias(e) || bgrad(e)) && !Dsc->bias) return ST_INVALID_VALUE; /* a bias or its gradient needs its vector */
	if ((relu_mask(e) || gelu_aux(e)) && !Dsc->aux) return ST_INVALID_VALUE;
	if (relu_mask(e) && (ald % 128 || ald < m)) return ST_INVALID_VALUE;
	if (gelu_aux(e) && (ald % 8 || ald < m)) return ST_INVALID_VALUE;
	/* Scales for the types that have them: FP8 A and B, an FP8 D (and its
	   amax); C is never FP8 here, so its scale is refused. */
	int out8 = isf8(Dl->type);
	if ((!fp8 && (Dsc->scales[0] || Dsc->scales[1])) || Dsc->scales[2] || (!out8 && (Dsc->scales[3] || Dsc->amax))) return ST_INVALID_VALUE;
	if (!ws && wssize) return ST_INVALID_VALUE;
	if (C && C == D && Cl->type != Dl->type) return ST_INVALID_VALUE; /* in place needs one type (an FP8 D's C is NULL) */
	struct task *t = fcb_task(fn, &lt_any, T);
	t->pmode = Dsc->pmode;
	t->ws = (uintptr_t)ws, t->wssize = wssize;
	t->ta = Al->type, t->tb = Bl->type;
	cublasStatus_t r = fcb_scalars(t, alpha, beta, 1, Dsc->scale);
	if (r) {
		free(t);
		return r;
	}
	t->exec = matmul_exec;
	t->opa = Dsc->transa, t->opb = Dsc->transb;
	t->m = (long)Dl->rows, t->n = (long)Dl->cols, t->k = (long)(Dsc->transa ? Al->rows : Al->cols);
	t->lda = (long)Al->ld, t->ldb = (long)Bl->ld, t->ldc = (long)Cl->ld, t->ldd = (long)Dl->ld;
	t->sa = Al->stride, t->sb = Bl->stride, t->sc = Cl->stride, t->sd = Dl->stride, t->batch = Dl->batch;
	t->a = (uintptr_t)A, t->b = (uintptr_t)B, t->c = (uintptr_t)C, t->d = (uintptr_t)D;
	t->epilogue = e;
	t->bias = has_bias(e) || bgrad(e) ? (uintptr_t)Dsc->bias : 0;
	t->aux = relu_mask(e) || gelu_aux(e) ? (uintptr_t)Dsc->aux : 0, t->auxld = ald;
	t->ascale = (uintptr_t)Dsc->scales[0], t->bscale = (uintptr_t)Dsc->scales[1];
	t->tc = Cl->type, t->dscale = (uintptr_t)Dsc->scales[3], t->amax = (uintptr_t)Dsc->amax;
	if (t->m == 0 || t->n == 0) {
		free(t);
		return ST_OK;
	}
	uintptr_t used[AL_N] = {t->a, t->b, t->c, t->d, t->bias, t->aux, t->ascale, t->bscale};
	if (algo && misaligned(fn, algo, used)) {
		free(t);
		return ST_EXECUTION_FAILED;
	}
	lrange(t, t->a, Al);
	lrange(t, t->b, Bl);
	/* C is read unless beta is 0 (known at the call in host mode); an FP8
	   D's C (of another type, at D's address) is checked only then. */
	if (!out8 || t->pmode != 0 || creal(t->beta) != 0) lrange(t, t->c, Cl);
	lrange(t, t->d, Dl);
	if (t->bias) fcb_range(t, t->bias, (size_t)(e == 512 ? t->n : t->m) * fcb_size(T));
	/* The auxiliary matrix's whole columns: cuBLASLt stores it in 16-byte
	   units, and may write a column's last one whole, past D's rows. */
	if (t->aux && relu_mask(e)) fcb_range(t, t->aux, (size_t)t->n * (size_t)ald / 8);
	if (t->aux && gelu_aux(e)) fcb_range(t, t->aux, (size_t)t->n * (size_t)ald * fcb_size(T));
	uintptr_t scales[] = {t->ascale, t->bscale, t->dscale, t->amax};
	for (int i = 0; i < 4; i++)
		if (scales[i]) fcb_range(t, scales[i], 4);
	return fcb_submit(t, stream, 0);
}

long fake_cublaslt_live_handles(void) { pthread_mutex_lock(&fcb_mu); long n = live_handles; pthread_mutex_unlock(&fcb_mu); return n; }
/* fake_cublaslt_live_descs counts live matmul descriptors, matrix layouts
   and preferences. */
long fake_cublaslt_live_descs(void) { pthread_mutex_lock(&fcb_mu); long n = live_descs; pthread_mutex_unlock(&fcb_mu); return n; }
