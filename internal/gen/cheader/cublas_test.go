package cheader

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEnableHalfBlocks: a C++-only block of declarations is read as C; one
// opening extern "C" or holding an inline body, or with a nested
// directive, is left alone; lines are kept.
func TestEnableHalfBlocks(t *testing.T) {
	src := "#if defined(__cplusplus)\nextern \"C\" {\n#endif\n" +
		"#if defined(__cplusplus)\nint f(const __half* x);\n\nint g(void);\n#endif\n" +
		"#if defined(__cplusplus)\n#if 1\nint h(void);\n#endif\n#endif\n" +
		"#if defined(__cplusplus)\n}\nstatic inline int k(void) { return 0; }\n#endif\n"
	out, n := EnableHalfBlocks(src)
	assert.Equal(t, 1, n)
	assert.Equal(t, "#if defined(__cplusplus)\nextern \"C\" {\n#endif\n"+
		"#if 1\nint f(const __half* x);\n\nint g(void);\n#endif\n"+
		"#if defined(__cplusplus)\n#if 1\nint h(void);\n#endif\n#endif\n"+
		"#if defined(__cplusplus)\n}\nstatic inline int k(void) { return 0; }\n#endif\n", out)
	out, n = EnableHalfBlocks("#if defined(__cplusplus)\nint f(void);\n") // no #endif
	assert.Zero(t, n)
	assert.Equal(t, "#if defined(__cplusplus)\nint f(void);\n", out)
}

// TestParseCUBLAS: the prelude's types, the half block's function, the
// boundary between cublas_api.h's functions and cublasLt.h's, and
// cublas_v2.h's mapping.
func TestParseCUBLAS(t *testing.T) {
	c, err := ParseCUBLAS("typedef enum cudaDataType_t { CUDA_R_32F = 0 } cudaDataType;\n",
		"int cublasCreate_v2(void);\n#if defined(__cplusplus)\nint cublasHgemm(const __half* a, cuComplex* c, cudaStream_t s);\n#endif\n",
		"int cublasLtCreate(FILE* f, cudaDataType t);\n",
		"/* mapping */\n#define cublasCreate cublasCreate_v2\n#define CUBLAS_X 1\n")
	require.NoError(t, err)
	var names []string
	for _, f := range c.File.Funcs {
		names = append(names, f.Name)
	}
	assert.Equal(t, []string{"cublasCreate_v2", "cublasHgemm", "cublasLtCreate"}, names)
	assert.Equal(t, 2, c.LtFirst)
	assert.Equal(t, 1, c.HalfBlocks)
	assert.Equal(t, map[string]string{"cublasCreate": "cublasCreate_v2"}, c.V2)
	for _, n := range []string{"__half", "__nv_bfloat16", "cuComplex", "cuDoubleComplex", "cudaStream_t", "FILE"} {
		assert.Contains(t, c.File.Typedefs, n)
	}
	_, err = ParseCUBLAS("", "int f(;\n", "", "")
	assert.Error(t, err)
}
