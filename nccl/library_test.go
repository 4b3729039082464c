package nccl_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/loader"
	"github.com/purecuda/cuda/nccl"
)

// childEnv names, in a child process of the test binary, the test it runs.
const childEnv = "PURECUDA_NCCL_TEST_CHILD"

// inChild reports whether t's body should run: true in a child process of
// the test binary that runs t alone with env added to its environment
// (before anything there opens NCCL). In the test binary itself it runs
// that child, fails t if the child fails, and returns false.
func inChild(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=60s")
	cmd.Env = append(append(os.Environ(), childEnv+"="+t.Name()), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "in a child process with %q:\n%s", env, out)
	assert.Contains(t, string(out), "--- PASS: "+t.Name(), "the child ran the test:\n%s", out)
	return false
}

// assertNotSupported checks the error of a call made without NCCL.
func assertNotSupported(t *testing.T, err error) *loader.NotFoundError {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, nccl.ErrNotSupported)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.Contains(t, err.Error(), "nccl: not supported: loader: NCCL library not found (set PURECUDA_LIBNCCL to its full path to choose one); tried:")
	var nf *loader.NotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, loader.KindNCCL, nf.Library)
	return nf
}

// TestMissingLibrary: a PURECUDA_LIBNCCL naming no file is the only place
// looked; every call says so, and nothing panics.
func TestMissingLibrary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libnccl.so.2")
	if !inChild(t, "PURECUDA_LIBNCCL="+missing) {
		return
	}
	missing = os.Getenv("PURECUDA_LIBNCCL")
	major, minor, patch, err := nccl.Version()
	assert.Zero(t, major+minor+patch)
	nf := assertNotSupported(t, err)
	assert.Equal(t, []loader.Attempt{{Path: missing, Reason: "no such file"}}, nf.Tried)
	assert.Contains(t, err.Error(), missing+": no such file")

	id, err := nccl.NewUniqueID()
	assert.Equal(t, nccl.UniqueID{}, id)
	assertNotSupported(t, err)
}

// libcPath finds a shared library that is certainly not NCCL.
func libcPath(t *testing.T) string {
	for _, pattern := range []string{"/lib/*-linux-gnu/libc.so.6", "/usr/lib/*-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6"} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0]
		}
	}
	t.Skip("libc.so.6 not found")
	return ""
}

// TestWrongLibrary: a PURECUDA_LIBNCCL naming a library that is not NCCL
// is refused, and the error says why.
func TestWrongLibrary(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("NCCL is for Linux only")
	}
	if !inChild(t, "PURECUDA_LIBNCCL="+libcPath(t)) {
		return
	}
	_, _, _, err := nccl.Version()
	assertNotSupported(t, err)
	assert.ErrorIs(t, err, loader.ErrWrongLibrary)
	assert.Contains(t, err.Error(), os.Getenv("PURECUDA_LIBNCCL")+": opened, but it is not the NCCL library (no symbol ncclGetVersion)")
}

// TestWithoutLibrary: where this machine has no libnccl, the error lists
// the places the default search tried, the system's search among them.
func TestWithoutLibrary(t *testing.T) {
	if path, err := ncclraw.Load(); err == nil {
		t.Skipf("libnccl is present here (%s): TestMissingLibrary covers its absence", path)
	}
	_, _, _, err := nccl.Version()
	if runtime.GOOS != "linux" {
		assert.ErrorIs(t, err, nccl.ErrNotSupported)
		assert.ErrorIs(t, err, loader.ErrUnsupportedPlatform)
		return
	}
	nf := assertNotSupported(t, err)
	var paths []string
	for _, a := range nf.Tried {
		paths = append(paths, a.Path)
	}
	assert.Contains(t, paths, "libnccl.so.2", "the system's search by name")
}

// requireNCCL skips t where no libnccl is found (failing it instead under
// PURECUDA_REQUIRE_GPU, on the machines that have it).
func requireNCCL(t *testing.T) {
	t.Helper()
	path, err := ncclraw.Load()
	if err != nil {
		gputest.Skip(t, "libnccl not found: "+err.Error())
	}
	t.Logf("libnccl: %s", path)
}

// TestVersionFromLibrary reads the version of a real libnccl (no GPU needed).
func TestVersionFromLibrary(t *testing.T) {
	requireNCCL(t)
	major, minor, patch, err := nccl.Version()
	require.NoError(t, err)
	t.Logf("NCCL %d.%d.%d", major, minor, patch)
	assert.GreaterOrEqual(t, major, 2)
	assert.True(t, minor >= 0 && minor < 100 && patch >= 0 && patch < 100)
}

// TestNewUniqueIDFromLibrary makes IDs with a real libnccl: each differs,
// and one survives its text and binary forms.
func TestNewUniqueIDFromLibrary(t *testing.T) {
	requireNCCL(t)
	a, err := nccl.NewUniqueID()
	if errors.Is(err, nccl.ErrUnhandledCUDA) {
		if _, derr := loader.Driver(); derr != nil {
			gputest.Skip(t, "this NCCL wants CUDA to make an ID, and there is no driver: "+err.Error())
		}
	}
	require.NoError(t, err)
	b, err := nccl.NewUniqueID()
	require.NoError(t, err)
	assert.NotEqual(t, nccl.UniqueID{}, a)
	assert.NotEqual(t, a, b, "each ID names a rendezvous of its own")
	text, err := a.MarshalText()
	require.NoError(t, err)
	var back nccl.UniqueID
	require.NoError(t, back.UnmarshalText(text))
	assert.Equal(t, a, back)
}
