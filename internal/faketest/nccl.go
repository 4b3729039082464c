//go:build linux

package faketest

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

const (
	// ncclSource is fakenccl's source, relative to the module root.
	ncclSource = "internal/ncclraw/testdata/fakenccl.c"
	// ncclEnv is the loader's override of the libnccl path.
	ncclEnv = "PURECUDA_LIBNCCL"
	// ncclChildEnv names, in the child process InNCCLChild starts, the
	// test it runs.
	ncclChildEnv = "PURECUDA_FAKENCCL_CHILD"
)

// BuildNCCL compiles fakenccl, a stand-in for libnccl with a few of its
// functions (internal/ncclraw/testdata/fakenccl.c says which), as Build
// does fakecuda, and returns the shared library's path.
var BuildNCCL = sync.OnceValues(func() (string, error) { return buildLib("fakenccl", ncclSource) })

// InNCCLChild reports whether t's body should run: true in the child
// process that has fakenccl as its libnccl. In the test binary itself it
// builds fakenccl (skipping t without it), runs t alone in a child process
// with PURECUDA_LIBNCCL naming fakenccl and env added to its environment,
// reports the child's result and output as t's, and returns false.
func InNCCLChild(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv(ncclChildEnv) == t.Name() {
		return true
	}
	path, err := BuildNCCL()
	if err != nil {
		t.Skip(err)
	}
	return runNCCLChild(t, path, env)
}

// InNCCLAndCUDAChild is InNCCLChild with fakecuda as libcuda too, for
// tests of communicators and their operations: fakenccl then runs them
// as fakecuda host functions. In the child, lib is fakecuda (Call and Sym
// reach it) and NCCL reaches fakenccl's controls.
func InNCCLAndCUDAChild(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv(ncclChildEnv) == t.Name() {
		lib = os.Getenv(libEnv)
		return true
	}
	path, err := BuildNCCL()
	if err != nil {
		t.Skip(err)
	}
	cuda, err := Build()
	if err != nil {
		t.Skip(err)
	}
	return runNCCLChild(t, path, append([]string{libEnv + "=" + cuda}, env...))
}

// NCCL calls fakenccl's control fn (in a child of InNCCLChild or
// InNCCLAndCUDAChild) with integer arguments.
func NCCL(tb testing.TB, fn string, args ...uintptr) int64 {
	tb.Helper()
	h, err := purego.Dlopen(os.Getenv(ncclEnv), purego.RTLD_NOW)
	if err != nil {
		tb.Fatalf("fakenccl: %v", err)
	}
	sym, err := purego.Dlsym(h, fn)
	if err != nil {
		tb.Fatalf("fakenccl: %v", err)
	}
	r, _, _ := purego.SyscallN(sym, args...)
	return int64(r)
}

// NCCLLastBad is fakenccl's description of its last bad use.
func NCCLLastBad(tb testing.TB) string {
	tb.Helper()
	buf := make([]byte, 512)
	NCCL(tb, "fake_nccl_last_bad", uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	if i := strings.IndexByte(string(buf), 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf)
}

// runNCCLChild runs t in a child process with PURECUDA_LIBNCCL naming
// fakenccl at path and env added.
func runNCCLChild(t *testing.T, path string, env []string) bool {
	t.Helper()
	return runChild(t, "fakenccl", append([]string{ncclChildEnv + "=" + t.Name(), ncclEnv + "=" + path}, env...))
}

// runChild runs t alone in a child process of the test binary with env
// added to its environment, and reports the child's result and output,
// under label, as t's. It returns false.
func runChild(t *testing.T, label string, env []string) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil:
		t.Errorf("under %s: %v\n%s", label, err, out)
	case !containsPass(out, t.Name()):
		t.Errorf("under %s, the test did not run:\n%s", label, out)
	default:
		t.Logf("under %s:\n%s", label, out)
	}
	return false
}

// containsPass reports whether go test's verbose output says name passed.
func containsPass(out []byte, name string) bool {
	return strings.Contains(string(out), "--- PASS: "+name+" ")
}
