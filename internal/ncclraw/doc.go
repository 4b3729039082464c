// Package ncclraw is purecuda's raw table of NCCL: one Go function for
// every function nccl.h declares (one deprecated function aside), its
// handle types, enums, macros and structs with C layout. It is generated
// (z*.go) by internal/gen and walled off as internal; the safe API is
// package nccl.
//
// # Names
//
// Functions, types and enum values drop the "nccl" prefix (C's names are
// not exported in Go) and types their "_t": CommInitRank calls
// ncclCommInitRank, Comm is ncclComm_t, UniqueId is ncclUniqueId, Sum is
// ncclSum, InvalidUsage is ncclInvalidUsage; String gives an enum value's
// C name. Macros keep their C names (NCCL_UNIQUE_ID_BYTES). Every void*
// of nccl.h is a device address or an opaque handle, so it is a uintptr
// here (void** a *uintptr); cudaStream_t is Stream, the driver's CUstream.
//
// # Resolution
//
// Nothing is resolved when the package loads. On first use, the library
// is opened through package loader (libnccl.so.2: PURECUDA_LIBNCCL, the
// system's search, NVIDIA's Python wheel), and the function is resolved
// with dlsym and cached in an atomic, so later calls take no lock. A
// missing library is the loader's error, listing every place searched; a
// missing function (an older NCCL) is a *SymbolError matching
// ErrNotSupported. Nothing panics.
//
// # Calls
//
// Calls are made as internal/cu's are (see its doc): a pooled frame from
// internal/ccall, pointer arguments escaped to the heap and kept alive
// until C returns, no allocation. ncclCommInitRank and
// ncclCommInitRankConfig take ncclUniqueId (128 bytes) by value; they go
// through ccall's CallStruct, which lays it out as each platform's C ABI
// wants (on the stack after the integer registers on linux/amd64, as the
// address of a copy on arm64), from the same pooled frame.
package ncclraw

// The table is generated together with internal/cu: see its go:generate line.
