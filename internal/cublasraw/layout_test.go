package cublasraw_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/layouttest"
)

// The generated zlayout_test.go lists the structs with these names.
type (
	layout      = layouttest.Struct
	layoutField = layouttest.Field
)

// cublasHeaderDir finds cublas_api.h: $PURECUDA_CUBLAS_INCLUDE, else the
// shared copy beside the repository (../shared/cuda-include/13.0), else
// "" with where it looked.
func cublasHeaderDir(t *testing.T) (dir, looked string) {
	if p := os.Getenv("PURECUDA_CUBLAS_INCLUDE"); p != "" {
		_, err := os.Stat(filepath.Join(p, "cublas_api.h"))
		require.NoError(t, err, "PURECUDA_CUBLAS_INCLUDE=%s holds no cublas_api.h", p)
		return p, p
	}
	return layouttest.SharedDir(t, "cublas_api.h", "cuda-include", "13.0")
}

// halfStubs are the C++ headers cublas_api.h includes, reduced to the two
// half types as the generator declares them (their storage).
var halfStubs = map[string]string{
	"cuda_fp16.h": "typedef struct __half { unsigned short x; } __half;\n",
	"cuda_bf16.h": "typedef struct __nv_bfloat16 { unsigned short x; } __nv_bfloat16;\n",
}

// TestStructLayout compiles a C program against cublasLt.h (which includes
// cublas_api.h) that prints sizeof and offsetof for every generated
// struct, and compares them with Go's.
func TestStructLayout(t *testing.T) {
	inc, looked := cublasHeaderDir(t)
	if inc == "" {
		t.Skipf("cublas_api.h not found: PURECUDA_CUBLAS_INCLUDE is unset and %s has none", looked)
	}
	text, err := os.ReadFile(filepath.Join(inc, "cublas_api.h"))
	require.NoError(t, err)
	var ver [4]int
	for i, m := range []string{"MAJOR", "MINOR", "PATCH", "BUILD"} {
		v := regexp.MustCompile(`(?m)^#define CUBLAS_VER_` + m + ` ([0-9]+)`).FindSubmatch(text)
		require.NotNil(t, v, "cublas_api.h defines no CUBLAS_VER_%s", m)
		ver[i], _ = strconv.Atoi(string(v[1]))
	}
	want := [4]int{cublasraw.CUBLAS_VER_MAJOR, cublasraw.CUBLAS_VER_MINOR, cublasraw.CUBLAS_VER_PATCH, cublasraw.CUBLAS_VER_BUILD}
	if ver != want && os.Getenv("PURECUDA_CUBLAS_INCLUDE") == "" {
		t.Skipf("%s/cublas_api.h is cuBLAS %v, not the %v the table was generated from; set PURECUDA_CUBLAS_INCLUDE to compare with it anyway", inc, ver, want)
	}
	layouttest.Compare(t, inc, "cublasLt.h", halfStubs, layouts)
}
