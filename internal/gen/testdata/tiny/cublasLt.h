/* A tiny stand-in for cublasLt.h. */
#pragma once
#include <cublas_api.h>
#include <stdio.h>
#if defined(__cplusplus)
extern "C" {
#endif
typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct { uint64_t data[32]; } cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;
typedef enum { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_RELU = 2 } cublasLtEpilogue_t;
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_GAUSSIAN (0x01ull << 32)
size_t CUBLASWINAPI cublasLtGetVersion(void);
cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle);
cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
    const void* alpha, const void* A, void* Adesc, const void* B, void* Bdesc, const void* beta,
    const void* C, void* Cdesc, void* D, void* Ddesc, const cublasLtMatmulAlgo_t* algo,
    void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream);
cublasStatus_t CUBLASWINAPI cublasLtLoggerSetFile(FILE* file);
#if defined(__cplusplus)
}
#endif
