package gputest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/purecuda/cuda/internal/cu"
)

// BuildC compiles src, C code that includes <cuda.h>, into a shared library
// linked against the loaded libcuda, opens it and returns the addresses of
// syms, for benchmarks that compare a C loop with Go in the same process.
// It skips tb when gcc or the CUDA headers ($CUDA_PATH/include or
// /usr/local/cuda/include) are missing.
func BuildC(tb testing.TB, src string, syms ...string) map[string]uintptr {
	tb.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		tb.Skip("gcc not found: the C half needs a compiler")
	}
	inc := "/usr/local/cuda/include"
	if p := os.Getenv("CUDA_PATH"); p != "" {
		inc = filepath.Join(p, "include")
	}
	if _, err := os.Stat(filepath.Join(inc, "cuda.h")); err != nil {
		tb.Skip("cuda.h not found: the C half needs the CUDA headers")
	}
	lib, _, err := cu.Load()
	if err != nil {
		tb.Fatal(err)
	}
	if !filepath.IsAbs(lib) {
		for _, d := range []string{"/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"} {
			if _, err := os.Stat(filepath.Join(d, "libcuda.so.1")); err == nil {
				lib = filepath.Join(d, "libcuda.so.1")
				break
			}
		}
	}
	dir := tb.TempDir()
	cfile, so := filepath.Join(dir, "loops.c"), filepath.Join(dir, "loops.so")
	if err := os.WriteFile(cfile, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-O2", "-shared", "-fPIC", "-I", inc, "-o", so, cfile, lib).CombinedOutput(); err != nil {
		tb.Fatalf("gcc: %v\n%s", err, out)
	}
	h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]uintptr{}
	for _, n := range syms {
		if out[n], err = purego.Dlsym(h, n); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}
