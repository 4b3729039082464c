/* fakenccl.c: a small stand-in for libnccl.so.2, for the CPU tests of
 * internal/ncclraw and nccl (built with gcc by internal/faketest and loaded
 * through PURECUDA_LIBNCCL in a child process of the test binary).
 *
 * It exports a few of NCCL's functions with NCCL's signatures, answers the
 * way NCCL does (a NULL out argument is ncclInvalidArgument with a recorded
 * warning), records what ncclCommInitRank and ncclCommInitRankConfig
 * received, for fake_last_init to read back, and leaves every other
 * function of nccl.h out, so that a missing function can be tested. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef enum {
	ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
	ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7
} ncclResult_t;
typedef struct { size_t size; unsigned int magic, version; int blocking; } ncclConfig_head;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char lastError[1024] = "";
static unsigned char lastID[128];
static int lastNranks = -1, lastRank = -1;
static void *lastConfig;
static int ids;

static ncclResult_t warn(ncclResult_t r, const char *msg) {
	pthread_mutex_lock(&mu);
	snprintf(lastError, sizeof lastError, "%s", msg);
	pthread_mutex_unlock(&mu);
	return r;
}

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
	default: return "fake: unknown result";
	}
}

const char *ncclGetLastError(ncclComm_t comm) {
	(void)comm;
	return lastError;
}

static ncclResult_t initRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, void *config) {
	pthread_mutex_lock(&mu);
	memcpy(lastID, id.internal, sizeof lastID);
	lastNranks = nranks;
	lastRank = rank;
	lastConfig = config;
	pthread_mutex_unlock(&mu);
	/* The ID is the callee's copy: changing it must not reach the caller. */
	memset(id.internal, 0xEE, sizeof id.internal);
	if (comm == NULL) return warn(ncclInvalidArgument, "CommInitRank : comm argument is NULL");
	if (nranks < 1 || rank < 0 || rank >= nranks) return warn(ncclInvalidArgument, "Invalid rank requested");
	*comm = (ncclComm_t)(uintptr_t)0xC0FFEE;
	return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
	return initRank(comm, nranks, id, rank, NULL);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, void *config) {
	return initRank(comm, nranks, id, rank, config);
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
