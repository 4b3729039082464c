package nvrtc

import (
	"maps"
	"slices"
)

// GraphHeader is the name of the built-in header that declares what a
// kernel needs to set a CUDA graph's condition (package graph's conditional
// nodes): #include <purecuda/graph.h>.
const GraphHeader = "purecuda/graph.h"

// graphHeader declares the device runtime's conditional-node entry point
// the way the toolkit's headers do, so that NVRTC compiles kernels that call
// it with no toolkit include directory and no -rdc (DESIGN fact 11: seen
// working on driver 580 / NVRTC 13.0).
const graphHeader = `// purecuda/graph.h: built into purecuda's nvrtc.Compile.
// A kernel sets the condition of a CUDA graph's conditional node (if, if/else,
// while, switch) with cudaGraphSetConditional(handle, value); the handle is a
// graph.Condition passed as a kernel argument (Condition.Handle()).
#ifndef PURECUDA_GRAPH_H
#define PURECUDA_GRAPH_H
typedef unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);
#endif
`

// builtinHeaders are the headers every Compile passes to NVRTC, name →
// content, unless Options.Headers has one of the same name.
var builtinHeaders = map[string]string{
	GraphHeader: graphHeader,
}

// BuiltinHeaders returns a copy of the headers that Compile passes to NVRTC
// with every program (name → content), in addition to Options.Headers: a
// header in Options.Headers with the same name replaces the built-in one.
func BuiltinHeaders() map[string]string { return maps.Clone(builtinHeaders) }

// withBuiltins returns the headers to pass to NVRTC: the built-in ones,
// then user's, which win on a name clash. user is not modified.
func withBuiltins(user map[string]string) map[string]string {
	out := make(map[string]string, len(builtinHeaders)+len(user))
	maps.Copy(out, builtinHeaders)
	maps.Copy(out, user)
	return out
}

// programHeaders returns the names and contents Compile passes to
// nvrtcCreateProgram: the built-in headers and user's, in name order.
func programHeaders(user map[string]string) (names, contents []string) {
	all := withBuiltins(user)
	names = slices.Sorted(maps.Keys(all))
	contents = make([]string, len(names))
	for i, n := range names {
		contents[i] = all[n]
	}
	return names, contents
}
