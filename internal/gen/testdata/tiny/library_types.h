/* A tiny stand-in for library_types.h. */
typedef enum cudaDataType_t { CUDA_R_16F = 2, CUDA_R_32F = 0, CUDA_R_8F_UE4M3 = 28, CUDA_R_8F_E4M3 = 28 } cudaDataType;
typedef enum libraryPropertyType_t { MAJOR_VERSION, MINOR_VERSION } libraryPropertyType;
#ifndef __cplusplus
typedef enum cudaDataType_t cudaDataType_t;
typedef enum libraryPropertyType_t libraryPropertyType_t;
#endif
