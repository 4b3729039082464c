/* A tiny stand-in for cublas_v2.h. */
#if !defined(CUBLAS_V2_H_)
#define CUBLAS_V2_H_
#include "cublas_api.h"
#define cublasCreate cublasCreate_v2
#define cublasSetStream cublasSetStream_v2
#define cublasIsamax cublasIsamax_v2
#define cublasSgemm cublasSgemm_v2
#define cublasCdotu cublasCdotu_v2
#define cublasSgemm_64 cublasSgemm_v2_64
#define cublasSrotg_64 cublasSrotg_v2_64 /* declared nowhere */
#endif
