// Package cublasraw is purecuda's raw table of cuBLAS and cuBLASLt: one Go
// function for every function cublas_api.h and cublasLt.h declare (one
// internal reporter aside), their handle types, enums, macros and structs
// with C layout. It is generated (z*.go) by internal/gen and walled off as
// internal; a typed API is to be built on it.
//
// # Names
//
// Functions drop the "cublas" prefix and are named as C code calls them:
// cublas_v2.h maps cublasSgemm to the export cublasSgemm_v2, which Sgemm
// calls (Sgemm_64 calls cublasSgemm_v2_64); the legacy exports without
// _v2 (cublasSgemm, the handle-less API) are never bound. cuBLASLt's keep
// "Lt": LtMatmul calls cublasLtMatmul. Types drop "cublas" and "_t"
// (Handle, Status, LtMatmulDesc); the CUDA library types keep "Cuda"
// (CudaDataType; DataType is cublasDataType_t, the same type); cudaStream_t
// is Stream, the driver's CUstream; cuComplex is Complex. Enum values and
// macros keep their C names (CUBLAS_OP_N, CUDA_R_32F).
//
// The half types (__half, __nv_bfloat16) come from C++ headers and are
// declared here as their two bytes of storage (Half, Bfloat16): cuBLAS
// takes them by pointer only. cublas_api.h declares the functions on them
// (Hgemm, HSHgemvBatched, …) only for C++; they are exported C functions
// and bound like the rest.
//
// # Pointers
//
// A pointer that carries a device address is a uintptr: every void*, every
// pointer to elements (float, double, Complex, DoubleComplex, Half,
// Bfloat16, and arrays of such pointers for the batched calls), alpha and
// beta and a reduction's result (host or device memory, by the pointer
// mode), and the int arrays info, P, devIpiv and devInfoArray. Such an
// argument is passed as given: when it is Go memory, the caller makes it
// escape to the heap and keeps it alive until cuBLAS is done with it.
// Pointers to handles, enums, structs and other ints are Go pointers (the
// call's out-parameters), escaped and kept alive by the call itself.
//
// # Resolution
//
// Nothing is resolved when the package loads. On first use, the library is
// opened through package loader (libcublas.so.13 or .so.12 and
// libcublasLt.so.13 or .so.12: PURECUDA_LIBCUBLAS and PURECUDA_LIBCUBLASLT,
// the CUDA toolkit, the system's search, NVIDIA's Python wheels), and the
// function is resolved with dlsym and cached in an atomic, so later calls
// take no lock. A missing library is the loader's error, listing every
// place searched; a missing function (an older cuBLAS) is a *SymbolError
// matching ErrNotSupported. Nothing panics.
//
// # Calls
//
// Calls are made as internal/cu's are: a pooled frame from internal/ccall,
// no allocation. On linux/amd64 every call goes through ccall's direct
// trampolines: up to 12 arguments through the short one, longer calls
// (cublasSgemm has 14 arguments, cublasGemmEx 19, cublasGemmStridedBatchedEx
// 23, cublasLtMatmul 16) through the long one, up to 32. On other
// platforms calls go through purego.SyscallN, which takes up to 32 integer
// arguments on linux/arm64 and windows/amd64 (the generator refuses more).
// No function takes a float or a struct by value.
package cublasraw

// The table is generated together with internal/cu: see its go:generate line.
