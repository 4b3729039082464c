// Package cu is purecuda's raw table of the CUDA driver API: one Go function
// for every function in NVIDIA's cudaTypedefs.h (graphics interop aside), the
// handle types, enums, macros and structs of cuda.h with C layout. It is
// generated (z*.go) by internal/gen and walled off as internal; the safe API is
// package driver.
//
// # Names
//
// Types and constants keep their C names (CUcontext, CUDA_KERNEL_NODE_PARAMS,
// CU_GRAPH_NODE_TYPE_KERNEL). Functions drop the "cu" prefix: MemAlloc calls
// cuMemAlloc. Where a function's newest ABI needs a driver newer than 12.0,
// its older ABIs are bound too, with the ABI version as suffix
// (GraphAddNode_v12020).
//
// # Resolution
//
// Nothing is resolved when the package loads. On first use, a function is
// resolved with cuGetProcAddress_v2 at the ABI version its Go signature was
// written for, falling back to dlsym of the versioned export name; the
// address is then cached in an atomic, so later calls take no lock. A function
// this driver lacks, or that needs a newer driver, returns an error matching
// ErrNotSupported that names the function, the ABI version and the driver
// version present. Nothing panics.
//
// # Calls
//
// Calls fill a pooled call frame (internal/ccall) and run it: on
// linux/amd64 through a small assembly trampoline under runtime.cgocall,
// elsewhere through purego.SyscallN with a slice of the frame; neither
// allocates. Pointer arguments pass through ccall.Escape first, so the
// objects they point at live on the heap, and runtime.KeepAlive after the
// call keeps them alive until C returns. The hot calls (cuLaunchKernel,
// cuGraphLaunch) also get XxxShort variants that run in a frame on the
// caller's stack (ccall.Short) with an entry point the caller resolved once
// (XxxProc); on linux/amd64 their pointer arguments may point into that
// stack, which cannot move before or during the call. Functions that take a float by value (three deprecated ones) are
// bound with purego.RegisterFunc on first use; the two that take a 64-byte
// IPC handle by value go through syscallStructArg, which follows each
// platform's ABI.
package cu

//go:generate go run ../gen -root ../..
