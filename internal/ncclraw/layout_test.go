package ncclraw_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/layouttest"
	"github.com/purecuda/cuda/internal/ncclraw"
)

// The generated zlayout_test.go lists the structs with these names.
type (
	layout      = layouttest.Struct
	layoutField = layouttest.Field
)

// ncclHeaderDir finds nccl.h: $PURECUDA_NCCL_INCLUDE, else the shared copy
// beside the repository (../shared/nccl-include/2.28), else "" with where
// it looked.
func ncclHeaderDir(t *testing.T) (dir, looked string) {
	if p := os.Getenv("PURECUDA_NCCL_INCLUDE"); p != "" {
		_, err := os.Stat(filepath.Join(p, "nccl.h"))
		require.NoError(t, err, "PURECUDA_NCCL_INCLUDE=%s holds no nccl.h", p)
		return p, p
	}
	return layouttest.SharedDir(t, "nccl.h", "nccl-include", "2.28")
}

// cudaStubs are the CUDA headers nccl.h includes, reduced to what it uses:
// cudaStream_t. cuda_bf16.h is included only with a CUDART_VERSION, which
// the stubs leave undefined.
var cudaStubs = map[string]string{
	"cuda_runtime.h": "typedef struct CUstream_st *cudaStream_t;\n",
	"cuda_fp16.h":    "",
}

// TestStructLayout compiles a C program against nccl.h that prints sizeof
// and offsetof for every generated struct, and compares them with Go's.
func TestStructLayout(t *testing.T) {
	inc, looked := ncclHeaderDir(t)
	if inc == "" {
		t.Skipf("nccl.h not found: PURECUDA_NCCL_INCLUDE is unset and %s has none", looked)
	}
	text, err := os.ReadFile(filepath.Join(inc, "nccl.h"))
	require.NoError(t, err)
	code := regexp.MustCompile(`(?m)^#define NCCL_VERSION_CODE ([0-9]+)`).FindSubmatch(text)
	require.NotNil(t, code, "nccl.h defines no NCCL_VERSION_CODE")
	if string(code[1]) != strconv.Itoa(ncclraw.NCCL_VERSION_CODE) && os.Getenv("PURECUDA_NCCL_INCLUDE") == "" {
		t.Skipf("%s/nccl.h is NCCL_VERSION_CODE %s, not the %d the table was generated from; set PURECUDA_NCCL_INCLUDE to compare with it anyway",
			inc, code[1], ncclraw.NCCL_VERSION_CODE)
	}
	layouttest.Compare(t, inc, "nccl.h", cudaStubs, layouts)
}
