package cu_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/purecuda/cuda/internal/layouttest"
)

// The generated zlayout_test.go lists the structs with these names.
type (
	layout      = layouttest.Struct
	layoutField = layouttest.Field
)

// headerDir finds cuda.h: $PURECUDA_CUDA_INCLUDE, the shared copy beside the
// repository (CI), $CUDA_PATH/include, /usr/local/cuda/include.
func headerDir() string {
	var cands []string
	if p := os.Getenv("PURECUDA_CUDA_INCLUDE"); p != "" {
		cands = append(cands, p)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				cands = append(cands, filepath.Join(d, "..", "shared", "cuda-include", "13.0"))
				break
			}
		}
	}
	if p := os.Getenv("CUDA_PATH"); p != "" {
		cands = append(cands, filepath.Join(p, "include"))
	}
	cands = append(cands, "/usr/local/cuda/include")
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, "cuda.h")); err == nil {
			return c
		}
	}
	return ""
}

// TestStructLayout compiles a C program that prints sizeof and offsetof for
// every generated struct and union and compares with unsafe.Sizeof/Offsetof.
func TestStructLayout(t *testing.T) {
	inc := headerDir()
	if inc == "" {
		t.Skip("cuda.h not found (set PURECUDA_CUDA_INCLUDE)")
	}
	layouttest.Compare(t, inc, "cuda.h", nil, layouts)
}
