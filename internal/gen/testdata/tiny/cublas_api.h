/* A tiny stand-in for cublas_api.h. */
#if !defined(CUBLAS_API_H_)
#define CUBLAS_API_H_
#define CUBLASWINAPI
#include "driver_types.h"
#include <cuda_fp16.h>
#include <library_types.h>
#if defined(__cplusplus)
extern "C" {
#endif
#define CUBLAS_VER_MAJOR 99
#define CUBLAS_VER_MINOR 2
#define CUBLAS_VER_PATCH 1
#define CUBLAS_VER_BUILD 7
#define CUBLAS_VERSION (CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH)
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2, CUBLAS_OP_HERMITAN = 2 } cublasOperation_t;
typedef cudaDataType cublasDataType_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
struct cublasContext;
typedef struct cublasContext* cublasHandle_t;
cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle);
cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType type, int* value);
size_t CUBLASWINAPI cublasGetCudartVersion(void);
const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status);
cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
cublasStatus_t CUBLASWINAPI cublasIsamax_v2(cublasHandle_t handle, int n, const float* x, int incx, int* result);
cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
    int m, int n, int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
    const float* beta, float* C, int ldc);
cublasStatus_t CUBLASWINAPI cublasSgemm_v2_64(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
    int64_t m, int64_t n, int64_t k, const float* alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
    const float* beta, float* C, int64_t ldc);
cublasStatus_t CUBLASWINAPI cublasCdotu_v2(cublasHandle_t handle, int n, const cuComplex* x, int incx, cuComplex* result);
cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
    cublasOperation_t transb, int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
    long long int strideA, const void* B, cudaDataType Btype, int ldb, long long int strideB, const void* beta,
    void* C, cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
    cublasComputeType_t computeType, int algo);
cublasStatus_t CUBLASWINAPI cublasSlow(cublasHandle_t handle, float scale);
void CUBLASWINAPI cublasXerbla(const char* srName, int info);

#if defined(__cplusplus)

cublasStatus_t CUBLASWINAPI cublasHgemmBatched(cublasHandle_t handle, int m, const __half* const Aarray[], __half* const Carray[]);

#endif

#if defined(__cplusplus)
}
static inline cublasStatus_t cublasGemmEx(cublasHandle_t handle, cudaDataType computeType) { return 0; }
#endif
#endif
