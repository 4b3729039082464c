package nvrtc

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Compile hands NVRTC exactly what programHeaders returns: the built-in
// headers and the caller's, in name order, the caller's winning a clash.
func TestProgramHeaders(t *testing.T) {
	names, contents := programHeaders(nil)
	assert.Equal(t, []string{GraphHeader}, names)
	assert.Equal(t, []string{graphHeader}, contents)

	user := map[string]string{"zeta.h": "#define Z 1", "alpha.h": "#define A 1"}
	names, contents = programHeaders(user)
	assert.Equal(t, []string{"alpha.h", GraphHeader, "zeta.h"}, names)
	assert.Equal(t, []string{"#define A 1", graphHeader, "#define Z 1"}, contents)
	assert.Len(t, user, 2, "the caller's map is not modified")

	names, contents = programHeaders(map[string]string{GraphHeader: "// mine"})
	assert.Equal(t, []string{GraphHeader}, names)
	assert.Equal(t, []string{"// mine"}, contents, "a caller's header of the same name replaces the built-in one")
	assert.Equal(t, graphHeader, builtinHeaders[GraphHeader], "and leaves the built-in one as it was")
}

// The header declares what DESIGN fact 11 found NVRTC needs, and nothing
// that would clash with the toolkit's own declarations.
func TestGraphHeaderDeclarations(t *testing.T) {
	h := BuiltinHeaders()[GraphHeader]
	assert.Contains(t, h, "typedef unsigned long long cudaGraphConditionalHandle;")
	assert.Contains(t, h, `extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);`)
	assert.Contains(t, h, "#ifndef PURECUDA_GRAPH_H")
	b := BuiltinHeaders()
	b[GraphHeader] = "changed"
	assert.Equal(t, graphHeader, BuiltinHeaders()[GraphHeader], "BuiltinHeaders returns a copy")
}
