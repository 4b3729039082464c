// Package nvrtc compiles CUDA C++ to PTX, CUBIN or LTO-IR at run time with
// NVIDIA's NVRTC, without a CUDA toolkit or C compiler on the machine: only
// libnvrtc is needed, found by package loader in the CUDA toolkit, the
// system's search or NVIDIA's pip wheel nvidia-cuda-nvrtc
// (PURECUDA_LIBNVRTC overrides). Without it, calls return an error matching
// loader.ErrNotFound that lists every place searched; it does not match
// driver.ErrNoGPU, since a machine with a GPU may lack only NVRTC.
//
// It stands beside package driver and does not import it: Compile returns
// bytes, and (*driver.Context).CompileModule compiles straight into a
// loaded module.
//
//	res, err := nvrtc.Compile(src, nvrtc.Options{Arch: "sm_90", Std: "c++17"})
//	if err != nil {
//		// errors.Is(err, nvrtc.ErrCompilation); the log is in err's text
//	}
//	mod, err := ctx.LoadModule(res.Image())
//
// # Built-in headers
//
// Compile passes a few headers of purecuda's own with every program, so that
// they can be included with no CUDA toolkit on the machine (BuiltinHeaders
// lists them; a header of the same name in Options.Headers replaces one).
// <purecuda/graph.h> (GraphHeader) declares cudaGraphConditionalHandle and
// cudaGraphSetConditional, with which a kernel sets the condition of a CUDA
// graph's conditional node (package graph: If, IfElse, While, Switch); the
// kernel receives the node's graph.Condition as Condition.Handle(), a 64-bit
// value:
//
//	#include <purecuda/graph.h>
//	extern "C" __global__ void step(int *left, cudaGraphConditionalHandle h) {
//		if (--*left == 0) cudaGraphSetConditional(h, 0); // ends a while loop
//	}
//
// # Concurrency
//
// Compile is safe to call from many goroutines: each call has its own NVRTC
// program, destroyed before it returns on every path.
package nvrtc
