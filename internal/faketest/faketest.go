//go:build linux

// Package faketest runs tests against fakecuda, the stand-in for libcuda
// in tests/fakedriver/testdata/fakecuda.c (its controls and counters are
// listed in tests/fakedriver/MODEL.md). It is the one way to do so:
//
//   - Build compiles fakecuda with gcc, once per source version, into the
//     user's cache directory.
//   - A package whose tests all run against fakecuda (tests/fakedriver)
//     calls Main from its TestMain: PURECUDA_LIBCUDA then names fakecuda
//     before anything opens the driver, and Need skips a test, with the
//     reason, where fakecuda could not be built.
//   - A package whose other tests use the real driver (graph's internal
//     tests) runs each fake-driver test in a child process of its test
//     binary, with PURECUDA_LIBCUDA set there only: such a test begins with
//     `if !faketest.InChild(t) { return }`.
//
// Call, Sym, FailCalls, FailNext, LastBadUse and NoBadUses reach fakecuda's
// controls in either case.
package faketest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	// libEnv is the loader's override of the libcuda path.
	libEnv = "PURECUDA_LIBCUDA"
	// childEnv marks the child process InChild starts.
	childEnv = "PURECUDA_FAKETEST_CHILD"
	// source is fakecuda's source, relative to the module root.
	source = "tests/fakedriver/testdata/fakecuda.c"
)

var gccFlags = []string{"-O2", "-shared", "-fPIC"}

// Build compiles fakecuda, unless a library built from the same source
// is already in the cache, and returns the shared library's path. It finds
// the source from the working directory (go test runs a package's tests in
// its directory), so a test binary run elsewhere gets an error, as it does
// without gcc; the error says why, for a skip.
var Build = sync.OnceValues(func() (string, error) { return buildLib("fakecuda", source) })

// buildLib compiles the C files srcs (relative to the module root; the
// .c ones are compiled, the others, headers they include, only hashed)
// into one shared library named for name and a hash of the sources,
// unless the cache has it already, and returns its path.
func buildLib(name string, srcs ...string) (string, error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", fmt.Errorf("gcc not found: %s cannot be built", name)
	}
	h := sha256.New()
	h.Write([]byte(strings.Join(gccFlags, " ") + "\n"))
	var compile []string
	for _, src := range srcs {
		path, err := findSource(src)
		if err != nil {
			return "", err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		h.Write(text)
		if strings.HasSuffix(path, ".c") {
			compile = append(compile, path)
		}
	}
	sum := h.Sum(nil)
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "lib"+name+"-"+hex.EncodeToString(sum[:8])+".so")
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}
	// Built under a name of its own and renamed into place, so that test
	// binaries building at once (go test ./...) never see half a library.
	tmp, err := os.CreateTemp(dir, "building-*.so")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	args := append(append(append([]string(nil), gccFlags...), "-o", tmp.Name()), compile...)
	args = append(args, "-lpthread", "-lm")
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s failed: %v\n%s", name, err, out)
	}
	if err := os.Rename(tmp.Name(), lib); err != nil {
		return "", err
	}
	return lib, nil
}

// findSource looks for src below the module root, the first directory up
// from the working directory with a go.mod.
func findSource(src string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			path := filepath.Join(dir, filepath.FromSlash(src))
			if _, err := os.Stat(path); err != nil {
				return "", fmt.Errorf("%s: %w", src, err)
			}
			return path, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("%s not found: no go.mod above the working directory", src)
		}
		dir = up
	}
}

// cacheDir is where built libraries are kept: the user's cache directory,
// else a directory of this process's own.
func cacheDir() (string, error) {
	if base, err := os.UserCacheDir(); err == nil {
		dir := filepath.Join(base, "purecuda-fakecuda")
		if err := os.MkdirAll(dir, 0o755); err == nil {
			return dir, nil
		}
	}
	return os.MkdirTemp("", "fakecuda")
}

// lib is the library the controls reach; skip says why there is none.
var lib, skip string

// Main is the TestMain of a package whose tests all run against fakecuda:
// it builds fakecuda and points PURECUDA_LIBCUDA at it before any test
// opens the driver, then runs the tests. Without fakecuda the tests run
// all the same, and Need skips them with the reason.
func Main(m *testing.M) {
	if path, err := Build(); err != nil {
		skip = err.Error()
	} else {
		lib = path
		os.Setenv(libEnv, path)
	}
	os.Exit(m.Run())
}

// Need skips tb where fakecuda could not be built, with the reason.
func Need(tb testing.TB) {
	tb.Helper()
	if skip != "" {
		tb.Skip(skip)
	}
	if lib == "" {
		tb.Fatal("fakecuda is not loaded: call faketest.Main from TestMain, or faketest.InChild")
	}
}

// Path is the path of the fakecuda library the tests run against.
func Path() string { return lib }

// InChild reports whether t's body should run: true in the child process
// that has fakecuda as its driver (with fakecuda's counters reset). In the
// test binary itself it builds fakecuda (skipping t without it), runs t
// alone in a child process with PURECUDA_LIBCUDA naming fakecuda, reports
// the child's result and output as t's, and returns false.
func InChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == "1" {
		lib = os.Getenv(libEnv)
		Call(t, "fake_reset_counters")
		return true
	}
	path, err := Build()
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=120s")
	cmd.Env = append(os.Environ(), childEnv+"=1", libEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("under fakecuda: %v\n%s", err, out)
	} else {
		t.Logf("under fakecuda:\n%s", out)
	}
	return false
}

var handle = sync.OnceValues(func() (uintptr, error) {
	return purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
})

// Sym is the address of one of fakecuda's exported symbols.
func Sym(tb testing.TB, name string) uintptr {
	tb.Helper()
	Need(tb)
	h, err := handle()
	require.NoError(tb, err)
	p, err := purego.Dlsym(h, name)
	require.NoError(tb, err, "fakecuda lacks %s", name)
	return p
}

// Call calls one of fakecuda's fake_* controls or counters with integer
// arguments and returns its result.
func Call(tb testing.TB, name string, args ...uintptr) int64 {
	tb.Helper()
	r, _, _ := purego.SyscallN(Sym(tb, name), args...)
	return int64(r)
}

// FailCalls makes calls of fn (a CUDA function's base name) fail with
// code: times of them (-1: every one) after skip that succeed.
func FailCalls(tb testing.TB, fn string, code, skip, times int32) {
	tb.Helper()
	b := append([]byte(fn), 0)
	purego.SyscallN(Sym(tb, "fake_fail_calls"), uintptr(unsafe.Pointer(&b[0])), uintptr(code), uintptr(skip), uintptr(times))
	runtime.KeepAlive(b)
}

// FailNext makes fakecuda's next call of fn fail with code; whatever
// failure is still set is cleared when tb ends.
func FailNext(tb testing.TB, fn string, code int32) {
	tb.Helper()
	FailCalls(tb, fn, code, 0, 1)
	tb.Cleanup(func() { Call(tb, "fake_fail_clear") })
}

var lastBadUse struct {
	once sync.Once
	fn   func() string
}

// LastBadUse is fakecuda's description of the latest bad use it counted
// ("" if none since its counters were reset).
func LastBadUse(tb testing.TB) string {
	tb.Helper()
	sym := Sym(tb, "fake_last_bad_use")
	lastBadUse.once.Do(func() { purego.RegisterFunc(&lastBadUse.fn, sym) })
	return lastBadUse.fn()
}

// NoBadUses checks that nothing reached fakecuda with a freed or foreign
// pointer or a destroyed handle, and that no graph call came without a
// current context; it logs the latest bad use, if any.
func NoBadUses(tb testing.TB) {
	tb.Helper()
	if last := LastBadUse(tb); last != "" {
		tb.Logf("fakecuda's last bad use: %s", last)
	}
	assert.Zero(tb, Call(tb, "fake_bad_ptr_uses"), "uses of freed or foreign device memory")
	assert.Zero(tb, Call(tb, "fake_bad_handle_uses"), "uses of destroyed handles (a segfault in the real libcuda)")
	assert.Zero(tb, Call(tb, "fake_no_ctx_graph_calls"), "graph calls without a current context")
}
