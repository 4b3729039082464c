// Package loader finds and opens the CUDA libraries at run time, without
// cgo, and resolves their symbols: the CUDA driver and NVRTC, which
// purecuda uses, and NCCL, cuBLAS, cuBLASLt and nvJitLink (Kind names
// them). Open(k) searches once per process; Driver and NVRTC are Open of
// those two.
//
// It is the bottom layer of purecuda: packages driver and nvrtc resolve
// every function through it, and nothing in it knows about CUDA types.
//
// # Search order
//
// Each library is looked for in these places, in order, and the first copy
// that opens and exports the library's identifying symbol (cuInit,
// nvrtcVersion, ncclGetVersion, cublasGetVersion_v2, cublasLtGetVersion,
// nvJitLinkVersion) is used. The file names are newest first: for NVRTC
// libnvrtc.so.13, .so.12, .so.11.2 and .so; cuBLAS libcublas.so.13 then
// .so.12 (cuBLASLt and nvJitLink alike); NCCL libnccl.so.2; the driver
// libcuda.so.1 then libcuda.so.
//
//  1. The override: PURECUDA_LIBCUDA, PURECUDA_LIBNVRTC, PURECUDA_LIBNCCL,
//     PURECUDA_LIBCUBLAS, PURECUDA_LIBCUBLASLT or PURECUDA_LIBNVJITLINK
//     (Kind.EnvVar), a full path. When set, it is the only candidate: a
//     wrong override is reported, never silently replaced by another copy.
//  2. The CUDA toolkit (all but the driver and NCCL): lib64 under
//     $CUDA_PATH and $CUDA_HOME, /usr/local/cuda/lib64 and
//     /usr/local/cuda/targets/<arch>-linux/lib.
//  3. The system's own search by file name (LD_LIBRARY_PATH, the ld.so
//     cache); for the driver then /usr/lib/wsl/lib (WSL2) and
//     /usr/local/nvidia/lib64 (containers). The driver is looked for no
//     further: it comes with the NVIDIA driver, never with Python packages.
//  4. NVIDIA's Python wheels (pip install nvidia-cuda-nvrtc, nvidia-nccl-cu12,
//     nvidia-cublas, …), in site-packages/nvidia/cu13/lib (CUDA 13's wheels)
//     and the CUDA 12 wheels' own directory (nvidia/cuda_nvrtc/lib,
//     nvidia/nccl/lib, nvidia/cublas/lib, nvidia/nvjitlink/lib), under, in
//     turn: the active virtual environment ($VIRTUAL_ENV/lib/python3*/site-packages);
//     the active conda environment ($CONDA_PREFIX/lib/python3*/site-packages,
//     then $CONDA_PREFIX/lib itself, where conda's own CUDA packages go); the
//     user's site-packages ($PYTHONUSERBASE or ~/.local, lib/python3*/site-packages);
//     and the system's (/usr/local/lib/python3*/dist-packages and
//     site-packages, /usr/lib/python3/dist-packages, /usr/lib/python3*/site-packages,
//     /usr/lib64/python3*/site-packages). These are found by listing
//     directories; no program (python, pip, ldconfig) is run.
//
// On Windows: the override; for the toolkit libraries %CUDA_PATH%\bin\x64
// and %CUDA_PATH%\bin; the system's search by DLL name (nvcuda.dll,
// nvrtc64_130_0.dll then _120_0 and _112_0, cublas64_13.dll, …); then the
// wheels' nvidia\cu13\bin\x86_64 and nvidia\cuda_nvrtc\bin (nvidia\cublas\bin,
// nvidia\nvjitlink\bin) under %VIRTUAL_ENV%\Lib\site-packages,
// %CONDA_PREFIX%\Lib\site-packages (then %CONDA_PREFIX%\Library\bin),
// %APPDATA%\Python\Python3*\site-packages,
// %LOCALAPPDATA%\Programs\Python\Python3*\Lib\site-packages and
// %ProgramFiles%\Python3*\Lib\site-packages. NVIDIA ships NCCL for Linux only.
//
// Other operating systems (macOS, the BSDs) have no CUDA: there Open
// searches nothing and returns an *UnsupportedPlatformError, which matches
// ErrUnsupportedPlatform and ErrNotFound (NCCL on Windows too).
//
// NVRTC opened by its full path (from the toolkit's directory or a wheel)
// finds its builtins library (libnvrtc-builtins.so.*, nvrtc-builtins64_*.dll)
// only through the system's search when it first compiles: the loader opens
// the builtins beside it first, so that a wheel works without
// LD_LIBRARY_PATH or PATH. Likewise cuBLAS opened by its full path, which
// links against cuBLASLt by file name, has the cuBLASLt of the same version
// beside it (libcublasLt.so.13, cublasLt64_13.dll) opened first.
//
// # Errors
//
// When nothing opens, the error is a *NotFoundError naming the library
// (its Library field) and listing every place tried, in order, with the
// reason it failed: a file that does not exist, a directory without the
// library, a file that would not load, or a file that loaded but lacks the
// identifying symbol (ErrWrongLibrary). It matches ErrNotFound. For the CUDA
// driver, and for any library on an operating system without CUDA, the
// error also matches driver.ErrNoGPU, the one test for "this machine has no
// usable GPU"; NVRTC or cuBLAS missing on a machine with a GPU does not.
// An opened Library's Tried lists the places that failed before it.
//
// # Lifetime and concurrency
//
// An opened library stays loaded for the life of the process; there is no
// Close, because function pointers resolved from it are cached. Open,
// Driver, NVRTC and Library.Lookup may be called from any goroutine; every
// caller of Open(k) gets the same *Library (or error), which no one
// changes.
package loader
