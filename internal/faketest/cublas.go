//go:build linux

package faketest

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

const (
	// cublasEnv and cublasLtEnv are the loader's overrides of the
	// libcublas and libcublasLt paths.
	cublasEnv   = "PURECUDA_LIBCUBLAS"
	cublasLtEnv = "PURECUDA_LIBCUBLASLT"
	// cublasChildEnv names, in the child process InCUBLASAndCUDAChild
	// starts, the test it runs.
	cublasChildEnv = "PURECUDA_FAKECUBLAS_CHILD"
)

// cublasSources are fakecublas's sources, relative to the module root:
// one library stands for both libcublas and libcublasLt.
var cublasSources = []string{
	"internal/cublasraw/testdata/fakecublas.h",
	"internal/cublasraw/testdata/fakecublas.c",
	"internal/cublasraw/testdata/fakecublas_blas.c",
	"internal/cublasraw/testdata/fakecublas_l13.c",
	"internal/cublasraw/testdata/fakecublaslt.c",
}

// BuildCUBLAS compiles fakecublas, a stand-in for libcublas and
// libcublasLt working on fakecuda (internal/cublasraw/testdata/MODEL.md
// says what it models), as Build does fakecuda, and returns the shared
// library's path.
var BuildCUBLAS = sync.OnceValues(func() (string, error) { return buildLib("fakecublas", cublasSources...) })

// InCUBLASAndCUDAChild reports whether t's body should run: true in the
// child process that has fakecuda as libcuda and fakecublas as libcublas
// and libcublasLt. In the test binary itself it builds both (skipping t
// without them), runs t alone in a child process with PURECUDA_LIBCUDA,
// PURECUDA_LIBCUBLAS and PURECUDA_LIBCUBLASLT naming them and env added
// to its environment, reports the child's result and output as t's, and
// returns false. In the child, Call and Sym reach fakecuda, CUBLAS
// fakecublas.
func InCUBLASAndCUDAChild(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv(cublasChildEnv) == t.Name() {
		lib = os.Getenv(libEnv)
		return true
	}
	path, err := BuildCUBLAS()
	if err != nil {
		t.Skip(err)
	}
	cuda, err := Build()
	if err != nil {
		t.Skip(err)
	}
	return runChild(t, "fakecublas", append([]string{cublasChildEnv + "=" + t.Name(),
		cublasEnv + "=" + path, cublasLtEnv + "=" + path, libEnv + "=" + cuda}, env...))
}

// cublasSym is the address of fakecublas's exported symbol name.
func cublasSym(tb testing.TB, name string) uintptr {
	tb.Helper()
	h, err := purego.Dlopen(os.Getenv(cublasEnv), purego.RTLD_NOW)
	if err != nil {
		tb.Fatalf("fakecublas: %v", err)
	}
	sym, err := purego.Dlsym(h, name)
	if err != nil {
		tb.Fatalf("fakecublas: %v", err)
	}
	return sym
}

// CUBLAS calls fakecublas's control fn (in a child of
// InCUBLASAndCUDAChild) with integer arguments and returns its result.
func CUBLAS(tb testing.TB, fn string, args ...uintptr) int64 {
	tb.Helper()
	r, _, _ := purego.SyscallN(cublasSym(tb, fn), args...)
	return int64(r)
}

// CUBLASLastBad is fakecublas's description of its last bad use ("" if
// none since fake_cublas_reset).
func CUBLASLastBad(tb testing.TB) string {
	tb.Helper()
	buf := make([]byte, 512)
	CUBLAS(tb, "fake_cublas_last_bad", uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	if i := strings.IndexByte(string(buf), 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf)
}

// CUBLASFailNext makes fakecublas's next call of fn (its export name,
// "cublasSgemm_v2"; "" for any) return status and do nothing; a failure
// still armed is disarmed when tb ends.
func CUBLASFailNext(tb testing.TB, fn string, status int32) {
	tb.Helper()
	b := append([]byte(fn), 0)
	CUBLAS(tb, "fake_cublas_fail_next", uintptr(unsafe.Pointer(&b[0])), uintptr(status))
	runtime.KeepAlive(b)
	tb.Cleanup(func() { CUBLAS(tb, "fake_cublas_fail_next_clear") })
}
