/* A tiny stand-in for nccl.h. */
#ifndef NCCL_H_
#define NCCL_H_
#include <cuda_runtime.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#define NCCL_MAJOR 2
#define NCCL_MINOR 99
#define NCCL_PATCH 1
#define NCCL_SUFFIX ""
#define NCCL_VERSION(X,Y,Z) ((X) * 10000 + (Y) * 100 + (Z))
#ifdef __cplusplus
extern "C" {
#endif
#include <limits.h>
typedef struct ncclComm* ncclComm_t;
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
typedef enum { ncclSuccess = 0, ncclInvalidUsage = 5, ncclNumResults = 8 } ncclResult_t;
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_UNDEF_FLOAT -1.0f
typedef struct ncclConfig_v29901 {
  size_t size;
  int blocking;
  const char *netName;
} ncclConfig_t;
typedef struct { int a, b, c; } ncclTwelve_t;
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum { ncclSum = 0, ncclAvg = 4,
               ncclMaxRedOp = 0x7fffffff>>(32-8*sizeof(ncclRedOp_dummy_t)) } ncclRedOp_t;
typedef enum { ncclInt8 = 0, ncclChar = 0, ncclFloat32 = 7 } ncclDataType_t;
ncclResult_t  ncclGetVersion(int *version);
ncclResult_t pncclGetVersion(int *version);
ncclResult_t  ncclMemAlloc(void** ptr, size_t size);
ncclResult_t  ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
const char*  ncclGetErrorString(ncclResult_t result);
__attribute__ ((deprecated("not part of the API")))
void  ncclResetDebugInit();
ncclResult_t  ncclTwelve(ncclTwelve_t t);
ncclResult_t  ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t  ncclGroupStart();
#ifdef __cplusplus
}
#endif
#endif
