/* A tiny stand-in for cuda.h, written for the generator's tests. */
#ifndef TINY_CUDA_H
#define TINY_CUDA_H
#include <stdint.h>
#ifdef _MSC_VER
typedef unsigned __int64 cuuint64_t;
#else
typedef uint64_t cuuint64_t;
#endif
#if defined(__CUDA_API_VERSION_INTERNAL) || defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
    #define __CUDA_API_PTSZ(api) api ## _ptsz
#else
    #define __CUDA_API_PTSZ(api) api
#endif
#define cuMemAlloc cuMemAlloc_v2
#define cuMemPrefetchAsync __CUDA_API_PTSZ(cuMemPrefetchAsync_v2)
#define CUDA_VERSION 13000
#ifdef _WIN32
#define CUDAAPI __stdcall
#else
#define CUDAAPI
#endif
#define CU_SIZE 4
#define CU_TWICE (CU_SIZE * 2)
#define CU_NOT_A_NUMBER ((void*)0)
#if defined(_WIN64) || defined(__LP64__)
typedef unsigned long long CUdeviceptr_v2;
#else
typedef unsigned int CUdeviceptr_v2;
#endif
typedef CUdeviceptr_v2 CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUtexref_st *CUtexref;
typedef struct CUgraphExec_st *CUgraphExec;
typedef void (*CUhostFn)(void *userData);
typedef enum CUresult_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1, /**< a comment */
    CUDA_ERROR_OUT_OF_MEMORY,
    CUDA_ERROR_ALIAS = CUDA_ERROR_OUT_OF_MEMORY,
    CUDA_ERROR_SHIFTED = 1 << 4 | 1,
    CUDA_ERROR_UNKNOWN = 999
} CUresult;
typedef enum { CU_FLAG_A = 0x1, CU_FLAG_B = 0x2 } CUflags;
typedef enum CUlimit_enum {
    CU_LIMIT_STACK_SIZE = 0x00,
    CU_LIMIT_PRINTF_FIFO_SIZE = 0x01,
    CU_LIMIT_STACK = CU_LIMIT_STACK_SIZE,
    CU_LIMIT_MAX
} CUlimit;
typedef struct CUmemLocation_st { int type; int id; } CUmemLocation_v1;
typedef CUmemLocation_v1 CUmemLocation;
typedef struct CUipcMemHandle_st { char reserved[CU_TWICE * 8]; } CUipcMemHandle_v1;
typedef struct CUnested_st {
    unsigned int
        multiLine;
    union {
        cuuint64_t value64;
        unsigned int value;
    };
    struct {
        unsigned int x, y, z;
    } dim;
    unsigned char pad[8 - sizeof(unsigned int)];
    struct CUinner_st { CUdeviceptr ptr; } inner;
    void **kernelParams;
    CUhostFn fn;
    const char *name;
} CUnested;
#endif
