package driver

import (
	"github.com/purecuda/cuda/internal/cu"
)

// Error is a failed driver call: the C function's name and the CUresult it
// returned. Its message reads
//
//	cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory
//
// and is built from generated tables, so it needs no driver to format.
// Compare with errors.Is against the Err* values below or any Result.
type Error = cu.Error

// Result is a CUDA driver status code (CUresult). Every Result is an error
// value, usable as an errors.Is target.
type Result = cu.CUresult

// SymbolError reports a driver function that this driver cannot provide: it
// names the function, the ABI version the binding needs and the driver's
// version. It matches ErrNotSupported.
type SymbolError = cu.SymbolError

// ErrNotSupported is matched by errors for driver functions that the loaded
// driver does not provide, and by CUDA_ERROR_NOT_SUPPORTED results.
var ErrNotSupported = cu.ErrNotSupported
