/* fakenccl.c: a stand-in for libnccl.so.2, for the CPU tests of
 * internal/ncclraw and nccl (built with gcc by internal/faketest and loaded
 * through PURECUDA_LIBNCCL in a child process of the test binary).
 *
 * It exports NCCL's functions that package nccl uses, with NCCL's
 * signatures, and answers the way NCCL does (a NULL out argument is
 * ncclInvalidArgument with a recorded warning). ncclCommCount... are there;
 * ncclCommRegister and the window, memory and scalar functions are left
 * out, so that a missing function can be tested.
 *
 * Without fakecuda (PURECUDA_LIBCUDA unset) only the calls that need no
 * CUDA work: version, unique IDs, errors, and ncclCommInitRank(Config),
 * which records what it received for fake_last_init.
 *
 * With fakecuda as libcuda, communicators work as NCCL's do, in one
 * process:
 *  - ranks join a clique by unique ID (ncclCommInitRank waits until all
 *    have; with config->blocking == 0 it returns ncclInProgress and
 *    ncclCommGetAsyncError reports ncclInProgress until they have);
 *    ncclCommInitAll makes a clique at once; ncclCommSplit is collective;
 *  - every operation is queued on its stream as a fakecuda host function
 *    (so it runs in stream order, and inside a capture becomes a graph node
 *    that runs at each launch). When it runs it checks its buffers with
 *    fake_check_device (freed memory is a bad pointer use), then waits for
 *    the same operation of every rank (collectives) or the matching send
 *    (a receive; sends are buffered), and computes the result exactly;
 *  - inside ncclGroupStart/End the operations are queued at ncclGroupEnd
 *    (fake_nccl_fail_group_end makes the next one fail after queuing,
 *    fake_nccl_fail_group_start the next ncclGroupStart fail); an
 *    operation refused inside a group makes the outermost ncclGroupEnd drop
 *    the whole group and return the refusal, as NCCL does;
 *  - an operation that runs after its communicator was destroyed (not
 *    aborted) is a stale use; a call on a destroyed communicator a bad
 *    handle; two threads inside calls on one communicator at once a
 *    concurrent use: fake_nccl_bad_uses counts them all, fake_nccl_last_bad
 *    says what the last was;
 *  - fake_nccl_fail_rank(rank, result) gives every live communicator of
 *    that rank an asynchronous error (a peer gone); ncclCommAbort ends the
 *    communicator's waiting operations (their kernels exit);
 *    ncclCommFinalize waits for the communicator's queued operations,
 *    returning the asynchronous error if one comes meanwhile (for a
 *    non-blocking communicator it returns ncclInProgress at once, and
 *    ncclCommGetAsyncError says ncclInProgress until they have run);
 *  - fake_nccl_live_comms counts communicators neither destroyed nor
 *    aborted, fake_nccl_ops_run the operations run, fake_nccl_aborts the
 *    communicators aborted. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef enum {
	ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
	ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7
} ncclResult_t;
typedef struct { size_t size; unsigned int magic, version; int blocking; } ncclConfig_head;

#define MAXR 16

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char lastError[1024] = "";
static unsigned char lastID[128];
static int lastNranks = -1, lastRank = -1;
static void *lastConfig;
static int ids;
static long bad_uses, ops_run, live_comms, aborts;
static char last_bad[512];

static ncclResult_t warn(ncclResult_t r, const char *msg) {
	pthread_mutex_lock(&mu);
	snprintf(lastError, sizeof lastError, "%s", msg);
	pthread_mutex_unlock(&mu);
	return r;
}

/* bad counts a bad use (mu held). */
static void bad(const char *fn, const char *what) {
	bad_uses++;
	snprintf(last_bad, sizeof last_bad, "%s: %s", fn, what);
}

/* The open group of this thread: its tasks are queued at ncclGroupEnd.
   An operation refused inside it fails the group, as NCCL's does
   (ncclGroupError): the outermost ncclGroupEnd drops every task and
   returns the first refusal. */
static __thread int groupDepth;
static __thread ncclResult_t groupError;

/* ingroup counts a call NCCL would defer to the thread's open group's
   ncclGroupEnd (creating, finalizing, destroying or aborting a
   communicator) as a bad use (mu held): package nccl relies on each being
   done when it returns. */
static void ingroup(const char *fn) {
	if (groupDepth > 0) bad(fn, "called inside an open group (NCCL would defer it to ncclGroupEnd)");
}


/* ---- fakecuda, reached through PURECUDA_LIBCUDA ---- */

typedef void (*hostfn)(void *);
static int (*launchHostFunc)(void *stream, hostfn fn, void *data);
static int (*checkDevice)(const char *fn, unsigned long long p, size_t n);
static int (*ctxGetDevice)(int *dev);
static int (*streamIsCapturing)(void *stream, int *status);
static int (*ctxGetCurrent)(void **ctx);

static int cuda(void) {
	if (launchHostFunc) return 1;
	const char *path = getenv("PURECUDA_LIBCUDA");
	void *h = path ? dlopen(path, RTLD_NOW) : NULL;
	if (!h) return 0;
	checkDevice = (int (*)(const char *, unsigned long long, size_t))dlsym(h, "fake_check_device");
	ctxGetDevice = (int (*)(int *))dlsym(h, "cuCtxGetDevice");
	streamIsCapturing = (int (*)(void *, int *))dlsym(h, "cuStreamIsCapturing");
	ctxGetCurrent = (int (*)(void **))dlsym(h, "cuCtxGetCurrent");
	launchHostFunc = (int (*)(void *, hostfn, void *))dlsym(h, "cuLaunchHostFunc");
	return launchHostFunc && checkDevice && ctxGetDevice && streamIsCapturing && ctxGetCurrent;
}

/* ---- version, IDs, errors ---- */

/* The version is FAKE_NCCL_VERSION's, else 22803 (2.28.3). */
ncclResult_t ncclGetVersion(int *version) {
	if (version == NULL) return warn(ncclInvalidArgument, "GetVersion : version argument is NULL");
	const char *v = getenv("FAKE_NCCL_VERSION");
	*version = v ? atoi(v) : 22803;
	return ncclSuccess;
}

/* Each ID is 128 bytes, all different: byte i of the n-th ID is n*31+i*7. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *out) {
	if (out == NULL) return warn(ncclInvalidArgument, "GetUniqueId : out argument is NULL");
	pthread_mutex_lock(&mu);
	int n = ++ids;
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < 128; i++) out->internal[i] = (char)(n * 31 + i * 7);
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
	switch (r) {
	case ncclSuccess: return "no error";
	case ncclInvalidArgument: return "fake: invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage: return "fake: invalid usage";
	case ncclRemoteError: return "fake: remote process exited or there was a network error";
	case ncclInProgress: return "fake: operation in progress";
	default: return "fake: unknown result";
	}
}

const char *ncclGetLastError(ncclComm_t comm) {
	(void)comm;
	return lastError;
}

/* ---- communicators ---- */

struct msg { int src, dst; size_t bytes; void *data; struct msg *next; };

struct clique {
	unsigned char id[128];
	int nranks, joined;
	struct ncclComm *ranks[MAXR];
	long gen; /* collective rounds completed */
	int arrived;
	struct task *slot[MAXR];
	struct msg *mbox; /* sent, not yet received */
	/* Split rendezvous */
	int splitArrived;
	long splitGen;
	int splitColor[MAXR], splitKey[MAXR];
	struct ncclComm *splitOut[MAXR];
	struct clique *next;
};

struct ncclComm {
	int magic; /* 0xC0FFEE */
	int alive, aborted, rank, nranks, dev, blocking;
	ncclResult_t async;
	long queued; /* operations queued, not yet run */
	int grouped; /* operations in a thread's open group, not yet queued */
	int inCall, inQuery;
	struct clique *cl;
};

static struct clique *cliques;

static struct clique *find_clique(const unsigned char *id, int nranks) {
	for (struct clique *c = cliques; c; c = c->next)
		if (!memcmp(c->id, id, 128) && c->joined < c->nranks) return c;
	struct clique *c = calloc(1, sizeof *c);
	memcpy(c->id, id, 128);
	c->nranks = nranks;
	c->next = cliques;
	cliques = c;
	return c;
}

static struct ncclComm *new_comm(struct clique *cl, int rank, int dev, int blocking) {
	struct ncclComm *c = calloc(1, sizeof *c);
	c->magic = 0xC0FFEE;
	c->alive = 1;
	c->rank = rank;
	c->nranks = cl->nranks;
	c->dev = dev;
	c->blocking = blocking;
	c->cl = cl;
	cl->ranks[rank] = c;
	cl->joined++;
	live_comms++;
	return c;
}

/* get checks a communicator for a call (mu held): a destroyed or unknown
   one is a bad handle use. enter marks the call, counting a second thread
   inside a call on the same communicator. */
static ncclResult_t get(const char *fn, ncclComm_t c) {
	if (!c) return ncclInvalidArgument;
	if (c->magic != 0xC0FFEE || !c->alive) {
		bad(fn, "destroyed or unknown communicator");
		return ncclInvalidArgument;
	}
	return ncclSuccess;
}
static void enter(const char *fn, ncclComm_t c) {
	if (c && __atomic_exchange_n(&c->inCall, 1, __ATOMIC_SEQ_CST)) bad(fn, "two threads in calls on one communicator");
}
static void leave(ncclComm_t c) {
	if (c) __atomic_store_n(&c->inCall, 0, __ATOMIC_SEQ_CST);
}

/* othergroup counts a call on c from a thread other than the one whose open
   group holds operations of c as a bad use (mu held): NCCL keeps them in c
   until that group ends. */
static void othergroup(const char *fn, struct ncclComm *c) {
	if (c && c->grouped > 0 && groupDepth == 0) bad(fn, "called while another thread's open group holds operations of the communicator");
}

static int current_dev(void) {
	int d = 0;
	if (cuda()) ctxGetDevice(&d);
	return d;
}

static ncclResult_t initRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, void *config) {
	pthread_mutex_lock(&mu);
	memcpy(lastID, id.internal, sizeof lastID);
	lastNranks = nranks;
	lastRank = rank;
	lastConfig = config;
	pthread_mutex_unlock(&mu);
	/* The ID is the callee's copy: changing it must not reach the caller. */
	unsigned char mine[128];
	memcpy(mine, id.internal, 128);
	memset(id.internal, 0xEE, sizeof id.internal);
	if (comm == NULL) return warn(ncclInvalidArgument, "CommInitRank : comm argument is NULL");
	if (nranks < 1 || rank < 0 || rank >= nranks) return warn(ncclInvalidArgument, "Invalid rank requested");
	if (!cuda()) { /* without fakecuda: a token handle, for the argument tests */
		*comm = (ncclComm_t)(uintptr_t)0xC0FFEE;
		return ncclSuccess;
	}
	if (nranks > MAXR) return warn(ncclInvalidArgument, "fake: too many ranks");
	int blocking = !(config && ((ncclConfig_head *)config)->blocking == 0);
	/* NCCL wants one rank per device; the fake's ranks share fakecuda's one
	   device, so each reports its own: the current device's ordinal plus
	   its rank (ncclCommCuDevice). */
	int dev = current_dev() + rank;
	pthread_mutex_lock(&mu);
	ingroup("ncclCommInitRank");
	struct clique *cl = find_clique(mine, nranks);
	if (cl->ranks[rank]) {
		pthread_mutex_unlock(&mu);
		return warn(ncclInvalidUsage, "fake: rank joined twice");
	}
	struct ncclComm *c = new_comm(cl, rank, dev, blocking);
	c->async = ncclInProgress;
	if (cl->joined == cl->nranks) {
		for (int i = 0; i < cl->nranks; i++) cl->ranks[i]->async = ncclSuccess;
		pthread_cond_broadcast(&cv);
	}
	*comm = c;
	if (!blocking) {
		pthread_mutex_unlock(&mu);
		return ncclInProgress;
	}
	while (c->async == ncclInProgress) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
	return initRank(comm, nranks, id, rank, NULL);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, void *config) {
	return initRank(comm, nranks, id, rank, config);
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
	if (!comms) return warn(ncclInvalidArgument, "CommInitAll : comms argument is NULL");
	if (ndev < 1 || ndev > MAXR) return warn(ncclInvalidArgument, "Invalid number of devices");
	if (!cuda()) return warn(ncclUnhandledCudaError, "fake: no fakecuda");
	pthread_mutex_lock(&mu);
	ingroup("ncclCommInitAll");
	struct clique *cl = calloc(1, sizeof *cl);
	cl->nranks = ndev;
	cl->next = cliques;
	cliques = cl;
	for (int i = 0; i < ndev; i++) comms[i] = new_comm(cl, i, devlist ? devlist[i] : i, 1);
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

/* fake_last_init copies out what the last ncclCommInitRank(Config) received. */
void fake_last_init(unsigned char *id, int *nranks, int *rank, void **config) {
	pthread_mutex_lock(&mu);
	memcpy(id, lastID, sizeof lastID);
	*nranks = lastNranks;
	*rank = lastRank;
	*config = lastConfig;
	pthread_mutex_unlock(&mu);
}

#define QUERY(name, field)                                             \
	ncclResult_t name(ncclComm_t c, int *out) {                        \
		if (!out) return warn(ncclInvalidArgument, #name " : NULL"); \
		pthread_mutex_lock(&mu);                                       \
		ncclResult_t r = get(#name, c);                                \
		if (!r) *out = c->field;                                       \
		pthread_mutex_unlock(&mu);                                     \
		return r;                                                      \
	}
QUERY(ncclCommCount, nranks)
QUERY(ncclCommUserRank, rank)
QUERY(ncclCommCuDevice, dev)

/* ncclCommGetAsyncError may run beside any other call (the watchdog's
   use), but not beside itself on one communicator: NCCL's completes the
   communicator's pending group job (a thread join) when the state turns to
   success. Two at once are a bad use; while the communicator is in
   progress the query takes a millisecond, so that overlaps show. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *out) {
	if (!out) return warn(ncclInvalidArgument, "CommGetAsyncError : NULL");
	pthread_mutex_lock(&mu);
	ncclResult_t r = get("ncclCommGetAsyncError", c);
	if (r) {
		pthread_mutex_unlock(&mu);
		return r;
	}
	if (__atomic_exchange_n(&c->inQuery, 1, __ATOMIC_SEQ_CST)) bad("ncclCommGetAsyncError", "two threads query one communicator at once");
	int slow = c->async == ncclInProgress;
	pthread_mutex_unlock(&mu);
	if (slow) {
		struct timespec ts = {0, 1000000L};
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&mu);
	*out = c->async;
	__atomic_store_n(&c->inQuery, 0, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

/* finalizer is a non-blocking communicator's finalize, as NCCL runs it
   on a thread of its own: the communicator reports ncclInProgress until
   its queued operations have run. */
static void *finalizer(void *p) {
	struct ncclComm *c = p;
	pthread_mutex_lock(&mu);
	while (c->queued > 0 && c->async == ncclInProgress && c->alive) pthread_cond_wait(&cv, &mu);
	if (c->async == ncclInProgress) c->async = ncclSuccess;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

ncclResult_t ncclCommFinalize(ncclComm_t c) {
	pthread_mutex_lock(&mu);
	ncclResult_t r = get("ncclCommFinalize", c);
	ingroup("ncclCommFinalize");
	othergroup("ncclCommFinalize", c);
	if (!r && !c->blocking && c->async == ncclSuccess) {
		/* As NCCL: the finalize goes on on a thread, and the call returns
		   what ncclCommGetAsyncError then says. */
		pthread_t th;
		c->async = ncclInProgress;
		if (pthread_create(&th, NULL, finalizer, c) == 0) pthread_detach(th);
		else c->async = ncclSuccess;
		r = c->async;
		pthread_mutex_unlock(&mu);
		return r;
	}
	if (!r) {
		enter("ncclCommFinalize", c);
		while (c->queued > 0 && c->async == ncclSuccess) pthread_cond_wait(&cv, &mu);
		r = c->async == ncclInProgress ? ncclSuccess : c->async;
		leave(c);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
	pthread_mutex_lock(&mu);
	ncclResult_t r = get("ncclCommDestroy", c);
	ingroup("ncclCommDestroy");
	othergroup("ncclCommDestroy", c);
	if (!r) {
		enter("ncclCommDestroy", c);
		while (c->queued > 0 && c->async == ncclSuccess) pthread_cond_wait(&cv, &mu);
		c->alive = 0;
		live_comms--;
		leave(c);
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

/* ncclCommAbort takes FAKE_NCCL_ABORT_MS milliseconds if set (NCCL's
   abort waits for its threads), then ends c. */
ncclResult_t ncclCommAbort(ncclComm_t c) {
	const char *d = getenv("FAKE_NCCL_ABORT_MS");
	if (d && atoi(d) > 0) {
		struct timespec ts = {atoi(d) / 1000, (long)(atoi(d) % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&mu);
	ncclResult_t r = get("ncclCommAbort", c);
	ingroup("ncclCommAbort");
	othergroup("ncclCommAbort", c);
	if (!r) {
		c->alive = 0;
		c->aborted = 1;
		live_comms--;
		aborts++;
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

/* split joins c's clique's split rendezvous (mu held) and returns c's new
   communicator once every rank has come (NULL for NCCL_SPLIT_NOCOLOR, or
   when c is aborted meanwhile). */
static struct ncclComm *split(ncclComm_t c, int color, int key) {
	struct clique *cl = c->cl;
	long g = cl->splitGen;
	cl->splitColor[c->rank] = color;
	cl->splitKey[c->rank] = key;
	if (++cl->splitArrived == cl->nranks) {
		for (int i = 0; i < cl->nranks; i++) cl->splitOut[i] = NULL;
		for (int i = 0; i < cl->nranks; i++) {
			if (cl->splitColor[i] < 0 || cl->splitOut[i]) continue;
			int members[MAXR], n = 0;
			for (int j = 0; j < cl->nranks; j++)
				if (cl->splitColor[j] == cl->splitColor[i]) members[n++] = j;
			for (int a = 1; a < n; a++) /* by key, then rank */
				for (int b = a; b > 0; b--) {
					int x = members[b - 1], y = members[b];
					if (cl->splitKey[x] > cl->splitKey[y] || (cl->splitKey[x] == cl->splitKey[y] && x > y)) {
						members[b - 1] = y;
						members[b] = x;
					} else break;
				}
			struct clique *nc = calloc(1, sizeof *nc);
			nc->nranks = n;
			nc->next = cliques;
			cliques = nc;
			for (int k = 0; k < n; k++)
				cl->splitOut[members[k]] = new_comm(nc, k, cl->ranks[members[k]]->dev, cl->ranks[members[k]]->blocking);
		}
		cl->splitArrived = 0;
		cl->splitGen++;
		pthread_cond_broadcast(&cv);
	} else {
		while (cl->splitGen == g && c->alive) pthread_cond_wait(&cv, &mu);
		if (cl->splitGen == g) return NULL;
	}
	return cl->splitOut[c->rank];
}

/* splitJob is a non-blocking communicator's split, run on a thread as
   NCCL does: the new communicator is stored through out when it is made
   (so out must stay valid until then), and the parent reports
   ncclInProgress until then. */
struct splitJob { ncclComm_t c; int color, key; ncclComm_t *out; };
static void *splitter(void *p) {
	struct splitJob *j = p;
	pthread_mutex_lock(&mu);
	struct ncclComm *nc = split(j->c, j->color, j->key);
	__atomic_store_n(j->out, nc, __ATOMIC_RELEASE);
	if (j->c->async == ncclInProgress) j->c->async = ncclSuccess;
	leave(j->c);
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	free(j);
	return NULL;
}

/* ncclCommSplit: collective over c's clique; NCCL_SPLIT_NOCOLOR (-1)
   gives no communicator. As NCCL's, the split of a non-blocking
   communicator returns ncclInProgress with *out NULL, and stores the new
   communicator through out when it is made. */
ncclResult_t ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *out, void *config) {
	(void)config;
	if (!out) return warn(ncclInvalidArgument, "CommSplit : newcomm is NULL");
	pthread_mutex_lock(&mu);
	ncclResult_t r = get("ncclCommSplit", c);
	ingroup("ncclCommSplit");
	othergroup("ncclCommSplit", c);
	if (r) {
		pthread_mutex_unlock(&mu);
		return r;
	}
	enter("ncclCommSplit", c);
	*out = NULL;
	if (!c->blocking) {
		struct splitJob *j = calloc(1, sizeof *j);
		*j = (struct splitJob){c, color, key, out};
		pthread_t th;
		c->async = ncclInProgress;
		if (pthread_create(&th, NULL, splitter, j) != 0) {
			c->async = ncclSuccess;
			leave(c);
			free(j);
			pthread_mutex_unlock(&mu);
			return warn(ncclSystemError, "fake: pthread_create");
		}
		pthread_detach(th);
		pthread_mutex_unlock(&mu);
		return ncclInProgress; /* the thread leaves c */
	}
	*out = split(c, color, key);
	leave(c);
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

/* fake_nccl_fail_rank gives every live communicator of rank an
   asynchronous error, as NCCL does when a peer goes away. */
void fake_nccl_fail_rank(int rank, int result) {
	pthread_mutex_lock(&mu);
	for (struct clique *cl = cliques; cl; cl = cl->next)
		for (int i = 0; i < cl->nranks; i++)
			if (cl->ranks[i] && cl->ranks[i]->alive && cl->ranks[i]->rank == rank) cl->ranks[i]->async = result;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}
long fake_nccl_bad_uses(void) { pthread_mutex_lock(&mu); long n = bad_uses; pthread_mutex_unlock(&mu); return n; }
long fake_nccl_live_comms(void) { pthread_mutex_lock(&mu); long n = live_comms; pthread_mutex_unlock(&mu); return n; }
long fake_nccl_aborts(void) { pthread_mutex_lock(&mu); long n = aborts; pthread_mutex_unlock(&mu); return n; }
long fake_nccl_ops_run(void) { pthread_mutex_lock(&mu); long n = ops_run; pthread_mutex_unlock(&mu); return n; }
void fake_nccl_last_bad(char *out, long n) {
	pthread_mutex_lock(&mu);
	snprintf(out, (size_t)n, "%s", last_bad);
	pthread_mutex_unlock(&mu);
}
void fake_nccl_reset(void) {
	pthread_mutex_lock(&mu);
	bad_uses = 0;
	last_bad[0] = 0;
	pthread_mutex_unlock(&mu);
}

/* ---- operations ---- */

enum { K_ALLREDUCE, K_BCAST, K_REDUCE, K_ALLGATHER, K_REDSCAT, K_SEND, K_RECV };
static const char *knames[] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather",
                               "ncclReduceScatter", "ncclSend", "ncclRecv"};

struct task {
	int kind, dt, op, peer;
	size_t count;
	uintptr_t send, recv;
	struct ncclComm *c;
	void *stream;
	int counted; /* in c->queued until it first runs (not when captured) */
	struct task *next;
};

static size_t dtsize(int dt) {
	switch (dt) {
	case 0: case 1: return 1;
	case 2: case 3: case 7: return 4;
	case 4: case 5: case 8: return 8;
	case 6: case 9: return 2;
	}
	return 0;
}

/* Element-wise reduction acc = acc op x, n elements of type dt. */
#define RED(T)                                                                            \
	static void red_##T(void *acc, const void *x, size_t n, int op) {                     \
		T *a = acc;                                                                       \
		const T *b = x;                                                                   \
		for (size_t i = 0; i < n; i++) switch (op) {                                      \
			case 0: case 4: a[i] = (T)(a[i] + b[i]); break;                               \
			case 1: a[i] = (T)(a[i] * b[i]); break;                                       \
			case 2: if (b[i] > a[i]) a[i] = b[i]; break;                                  \
			case 3: if (b[i] < a[i]) a[i] = b[i]; break;                                  \
			}                                                                             \
	}                                                                                     \
	static void avg_##T(void *acc, size_t n, int ranks) {                                 \
		T *a = acc;                                                                       \
		for (size_t i = 0; i < n; i++) a[i] = (T)(a[i] / (T)ranks);                       \
	}
RED(int8_t) RED(uint8_t) RED(int32_t) RED(uint32_t) RED(int64_t) RED(uint64_t) RED(float) RED(double)

static void reduce(int dt, void *acc, const void *x, size_t n, int op) {
	switch (dt) {
	case 0: red_int8_t(acc, x, n, op); break;
	case 1: red_uint8_t(acc, x, n, op); break;
	case 2: red_int32_t(acc, x, n, op); break;
	case 3: red_uint32_t(acc, x, n, op); break;
	case 4: red_int64_t(acc, x, n, op); break;
	case 5: red_uint64_t(acc, x, n, op); break;
	case 7: red_float(acc, x, n, op); break;
	case 8: red_double(acc, x, n, op); break;
	}
}
static void average(int dt, void *acc, size_t n, int ranks) {
	switch (dt) {
	case 0: avg_int8_t(acc, n, ranks); break;
	case 1: avg_uint8_t(acc, n, ranks); break;
	case 2: avg_int32_t(acc, n, ranks); break;
	case 3: avg_uint32_t(acc, n, ranks); break;
	case 4: avg_int64_t(acc, n, ranks); break;
	case 5: avg_uint64_t(acc, n, ranks); break;
	case 7: avg_float(acc, n, ranks); break;
	case 8: avg_double(acc, n, ranks); break;
	}
}

/* reduced returns a malloc'd reduction of the ranks' buffers at offset off
   (bytes), n elements (mu held, every rank waiting). */
static void *reduced(struct clique *cl, struct task *t, size_t off, size_t n) {
	size_t es = dtsize(t->dt);
	void *acc = malloc(n * es + 1);
	memcpy(acc, (void *)(cl->slot[0]->send + off), n * es);
	for (int r = 1; r < cl->nranks; r++) reduce(t->dt, acc, (void *)(cl->slot[r]->send + off), n, t->op);
	if (t->op == 4) average(t->dt, acc, n, cl->nranks);
	return acc;
}

/* complete computes a collective round: every rank's task is in its slot
   (mu held). */
static void complete(struct clique *cl) {
	struct task *t = cl->slot[0];
	size_t es = dtsize(t->dt), n = t->count;
	for (int r = 1; r < cl->nranks; r++) {
		struct task *u = cl->slot[r];
		if (u->kind != t->kind || u->count != n || u->dt != t->dt || u->op != t->op || u->peer != t->peer) {
			for (int i = 0; i < cl->nranks; i++) cl->ranks[i]->async = ncclInvalidUsage;
			bad(knames[t->kind], "ranks disagree on the collective");
			return;
		}
	}
	switch (t->kind) {
	case K_ALLREDUCE: {
		void *acc = reduced(cl, t, 0, n);
		for (int r = 0; r < cl->nranks; r++) memcpy((void *)cl->slot[r]->recv, acc, n * es);
		free(acc);
		break;
	}
	case K_REDUCE: {
		void *acc = reduced(cl, t, 0, n);
		memcpy((void *)cl->slot[t->peer]->recv, acc, n * es);
		free(acc);
		break;
	}
	case K_BCAST: {
		void *src = malloc(n * es + 1);
		memcpy(src, (void *)cl->slot[t->peer]->send, n * es);
		for (int r = 0; r < cl->nranks; r++) memcpy((void *)cl->slot[r]->recv, src, n * es);
		free(src);
		break;
	}
	case K_ALLGATHER: {
		void *all = malloc(cl->nranks * n * es + 1);
		for (int r = 0; r < cl->nranks; r++) memcpy((char *)all + r * n * es, (void *)cl->slot[r]->send, n * es);
		for (int r = 0; r < cl->nranks; r++) memcpy((void *)cl->slot[r]->recv, all, cl->nranks * n * es);
		free(all);
		break;
	}
	case K_REDSCAT: {
		void *parts[MAXR];
		for (int r = 0; r < cl->nranks; r++) parts[r] = reduced(cl, t, r * n * es, n);
		for (int r = 0; r < cl->nranks; r++) {
			memcpy((void *)cl->slot[r]->recv, parts[r], n * es);
			free(parts[r]);
		}
		break;
	}
	}
}

/* stopped reports whether an operation of c must give up waiting: its
   communicator was aborted or failed. */
static int stopped(struct ncclComm *c) { return c->aborted || (c->async != ncclSuccess && c->async != ncclInProgress); }

/* run executes a queued operation: the host function fakecuda calls. */
static void run(void *p) {
	struct task *t = p;
	struct ncclComm *c = t->c;
	const char *fn = knames[t->kind];
	size_t es = dtsize(t->dt), n = t->count, sn = n, rn = n;
	if (t->kind == K_ALLGATHER) rn = n * c->nranks;
	if (t->kind == K_REDSCAT) sn = n * c->nranks;
	int ok = !(t->send && checkDevice(fn, t->send, sn * es)) && !(t->recv && checkDevice(fn, t->recv, rn * es));
	pthread_mutex_lock(&mu);
	ops_run++;
	if (!c->alive && !c->aborted) bad(fn, "an operation ran after its communicator was destroyed");
	if (!ok || !c->alive || stopped(c)) goto done;
	struct clique *cl = c->cl;
	if (t->kind == K_SEND) {
		struct msg *m = calloc(1, sizeof *m);
		m->src = c->rank, m->dst = t->peer, m->bytes = n * es;
		m->data = malloc(m->bytes + 1);
		memcpy(m->data, (void *)t->send, m->bytes);
		struct msg **q = &cl->mbox;
		while (*q) q = &(*q)->next;
		*q = m;
		pthread_cond_broadcast(&cv);
		goto done;
	}
	if (t->kind == K_RECV) {
		for (;;) {
			struct msg **q = &cl->mbox;
			while (*q && !((*q)->src == t->peer && (*q)->dst == c->rank)) q = &(*q)->next;
			if (*q) {
				struct msg *m = *q;
				*q = m->next;
				if (m->bytes != n * es) {
					c->async = ncclInvalidUsage;
					bad(fn, "a receive of another size than the send");
				} else {
					memcpy((void *)t->recv, m->data, m->bytes);
				}
				free(m->data);
				free(m);
				break;
			}
			if (stopped(c) || !c->alive) break;
			pthread_cond_wait(&cv, &mu);
		}
		goto done;
	}
	long g = cl->gen;
	cl->slot[c->rank] = t;
	if (++cl->arrived == cl->nranks) {
		complete(cl);
		cl->arrived = 0;
		cl->gen++;
		pthread_cond_broadcast(&cv);
	} else {
		while (cl->gen == g && c->alive && !stopped(c)) pthread_cond_wait(&cv, &mu);
		if (cl->gen == g) cl->arrived--, cl->slot[c->rank] = NULL; /* gave up */
	}
done:
	if (t->counted) {
		t->counted = 0;
		c->queued--;
	}
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	/* A captured task runs at every launch: it is kept (tasks are small). */
}

static __thread struct task *groupHead, **groupTail;

static ncclResult_t queue(struct task *t) {
	int status = 0;
	if (streamIsCapturing(t->stream, &status) != 0) status = 0;
	pthread_mutex_lock(&mu);
	if (!status) { /* outstanding until it runs; a captured one only when launched */
		t->counted = 1;
		t->c->queued++;
	}
	pthread_mutex_unlock(&mu);
	if (launchHostFunc(t->stream, run, t) != 0) {
		pthread_mutex_lock(&mu);
		if (t->counted) t->c->queued--, t->counted = 0;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		return warn(ncclUnhandledCudaError, "fake: cuLaunchHostFunc failed");
	}
	return ncclSuccess;
}

static ncclResult_t op(int kind, uintptr_t send, uintptr_t recv, size_t count, int dt, int rop, int peer, ncclComm_t c, void *stream) {
	const char *fn = knames[kind];
	if (!cuda()) return warn(ncclUnhandledCudaError, "fake: no fakecuda");
	pthread_mutex_lock(&mu);
	ncclResult_t r = get(fn, c);
	if (!r && (dtsize(dt) == 0 || dt == 6 || dt == 9)) r = ncclInvalidArgument;
	if (!r && (rop < 0 || rop > 4)) r = ncclInvalidArgument;
	if (!r && (peer < 0 || peer >= c->nranks)) r = ncclInvalidArgument;
	if (!r && stopped(c)) r = c->async != ncclSuccess ? c->async : ncclInvalidUsage;
	if (!r) othergroup(fn, c);
	if (!r && groupDepth > 0) c->grouped++;
	if (!r) enter(fn, c);
	pthread_mutex_unlock(&mu);
	if (r && groupDepth > 0 && !groupError) groupError = r;
	if (r) return warn(r, "fake: invalid operation");
	struct task *t = calloc(1, sizeof *t);
	*t = (struct task){kind, dt, rop, peer, count, send, recv, c, stream, 0, NULL};
	if (groupDepth > 0) {
		if (!groupTail) groupTail = &groupHead;
		*groupTail = t;
		groupTail = &t->next;
	} else {
		r = queue(t);
	}
	leave(c);
	return r;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, int dt, int o, ncclComm_t c, void *st) {
	return op(K_ALLREDUCE, (uintptr_t)s, (uintptr_t)r, n, dt, o, 0, c, st);
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, void *st) {
	return op(K_BCAST, (uintptr_t)s, (uintptr_t)r, n, dt, 0, root, c, st);
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, int dt, int o, int root, ncclComm_t c, void *st) {
	return op(K_REDUCE, (uintptr_t)s, (uintptr_t)r, n, dt, o, root, c, st);
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, int dt, ncclComm_t c, void *st) {
	return op(K_ALLGATHER, (uintptr_t)s, (uintptr_t)r, n, dt, 0, 0, c, st);
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, int dt, int o, ncclComm_t c, void *st) {
	return op(K_REDSCAT, (uintptr_t)s, (uintptr_t)r, n, dt, o, 0, c, st);
}
ncclResult_t ncclSend(const void *s, size_t n, int dt, int peer, ncclComm_t c, void *st) {
	return op(K_SEND, (uintptr_t)s, 0, n, dt, 0, peer, c, st);
}
ncclResult_t ncclRecv(void *r, size_t n, int dt, int peer, ncclComm_t c, void *st) {
	return op(K_RECV, 0, (uintptr_t)r, n, dt, 0, peer, c, st);
}

/* fake_nccl_fail_group_start makes the next ncclGroupStart return result
   and open no group. */
static ncclResult_t failGroupStart;
void fake_nccl_fail_group_start(int result) {
	pthread_mutex_lock(&mu);
	failGroupStart = result;
	pthread_mutex_unlock(&mu);
}

ncclResult_t ncclGroupStart(void) {
	pthread_mutex_lock(&mu);
	ncclResult_t r = failGroupStart;
	failGroupStart = ncclSuccess;
	pthread_mutex_unlock(&mu);
	if (r) return warn(r, "fake: ncclGroupStart failed");
	groupDepth++;
	return ncclSuccess;
}

/* fake_nccl_fail_group_end makes the next outermost ncclGroupEnd queue
   its operations and then return result, as NCCL may after launching part
   of a group. */
static ncclResult_t failGroupEnd;
void fake_nccl_fail_group_end(int result) {
	pthread_mutex_lock(&mu);
	failGroupEnd = result;
	pthread_mutex_unlock(&mu);
}

ncclResult_t ncclGroupEnd(void) {
	if (groupDepth == 0) return warn(ncclInvalidUsage, "fake: ncclGroupEnd without ncclGroupStart");
	if (--groupDepth > 0) return ncclSuccess;
	pthread_mutex_lock(&mu);
	ncclResult_t r = failGroupEnd;
	failGroupEnd = ncclSuccess;
	pthread_mutex_unlock(&mu);
	if (r) warn(r, "fake: ncclGroupEnd failed after queuing its operations");
	void *cur = NULL;
	if (groupHead && cuda() && (ctxGetCurrent(&cur) != 0 || !cur)) {
		pthread_mutex_lock(&mu);
		bad("ncclGroupEnd", "operations launched without a current context (NCCL would create one on device 0)");
		pthread_mutex_unlock(&mu);
	}
	struct task *t = groupHead;
	groupHead = NULL;
	groupTail = &groupHead;
	ncclResult_t failed = groupError;
	groupError = ncclSuccess;
	if (failed) {
		/* NCCL's groupCleanup: nothing of the group is launched. */
		while (t) {
			struct task *next = t->next;
			pthread_mutex_lock(&mu);
			t->c->grouped--;
			pthread_mutex_unlock(&mu);
			free(t);
			t = next;
		}
		return warn(failed, "fake: an operation of the group was refused: the group is dropped");
	}
	while (t) {
		struct task *next = t->next;
		t->next = NULL;
		pthread_mutex_lock(&mu);
		t->c->grouped--;
		pthread_mutex_unlock(&mu);
		ncclResult_t q = queue(t);
		if (q && !r) r = q;
		t = next;
	}
	return r;
}
