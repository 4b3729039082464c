// Package loader finds and opens the CUDA driver library and NVRTC at run
// time, without cgo, and resolves their symbols.
//
// It is the bottom layer of purecuda: packages driver and nvrtc resolve
// every CUDA and NVRTC function through it, and nothing in it knows about
// CUDA types.
//
// # Search order
//
// The driver library (libcuda.so.1 / nvcuda.dll):
//
//  1. PURECUDA_LIBCUDA, a full path. When set, it is the only candidate: a
//     wrong override is reported, never silently replaced by another copy.
//  2. Linux: libcuda.so.1 and libcuda.so through the dynamic loader's own
//     search (LD_LIBRARY_PATH, the ld.so cache), then /usr/lib/wsl/lib (WSL2)
//     and /usr/local/nvidia/lib64 (containers). Windows: nvcuda.dll.
//
// NVRTC (libnvrtc.so / nvrtc64_*.dll):
//
//  1. PURECUDA_LIBNVRTC, a full path, the only candidate when set.
//  2. Linux: libnvrtc.so.13, .so.12, .so.11.2 and .so in $CUDA_PATH/lib64,
//     $CUDA_HOME/lib64, /usr/local/cuda/lib64 and
//     /usr/local/cuda/targets/<arch>-linux/lib, then the same names through the
//     dynamic loader's search. Windows: nvrtc64_130_0.dll, nvrtc64_120_0.dll
//     and nvrtc64_112_0.dll in %CUDA_PATH%\bin\x64 and %CUDA_PATH%\bin, then
//     the same names through the system's search.
//
// Other operating systems (macOS, the BSDs) have no CUDA driver: there Driver
// and NVRTC search nothing and return an *UnsupportedPlatformError, which
// matches ErrUnsupportedPlatform and ErrNotFound.
//
// A candidate that opens but lacks the library's identifying symbol (cuInit,
// nvrtcVersion) is rejected as the wrong library. When nothing opens, the error
// lists every candidate with the reason it failed and satisfies
// errors.Is(err, ErrNotFound).
//
// # Lifetime
//
// An opened library stays loaded for the life of the process; there is no
// Close, because function pointers resolved from it are cached.
package loader
