package loader_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/loadspec"
	"github.com/purecuda/cuda/loader"
)

var kinds = []loader.Kind{loader.KindDriver, loader.KindNVRTC, loader.KindNCCL, loader.KindCUBLAS, loader.KindCUBLASLt, loader.KindNVJitLink}

// testEnv is a Linux environment with the variables kv whose system
// directories (/usr/…) are an empty tree: only what the test puts under
// its own temporary directories (named by kv) exists.
func testEnv(t *testing.T, kv map[string]string) loadspec.Env {
	tmp := os.TempDir()
	empty := t.TempDir()
	return loadspec.Env{
		GOOS: "linux", GOARCH: runtime.GOARCH,
		Getenv: func(k string) string { return kv[k] },
		Glob: func(pattern string) ([]string, error) {
			if strings.HasPrefix(pattern, tmp) {
				return filepath.Glob(pattern)
			}
			m, err := filepath.Glob(empty + pattern)
			require.Empty(t, m)
			return nil, err
		},
	}
}

func TestKind(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range kinds {
		assert.NotContains(t, k.String(), "Kind(")
		assert.True(t, strings.HasPrefix(k.EnvVar(), "PURECUDA_LIB"), k.EnvVar())
		assert.False(t, seen[k.EnvVar()], "one variable per library")
		seen[k.EnvVar()] = true
	}
	assert.Equal(t, "CUDA driver", loader.KindDriver.String())
	assert.Equal(t, "PURECUDA_LIBNVJITLINK", loader.KindNVJitLink.EnvVar())
	for _, bad := range []loader.Kind{0, loader.KindNVJitLink + 1, 255} {
		assert.Equal(t, "", bad.EnvVar())
		assert.Contains(t, bad.String(), "Kind(")
		lib, err := loader.Open(bad)
		assert.Nil(t, lib)
		assert.ErrorContains(t, err, "not a library kind")
		assert.NotErrorIs(t, err, loader.ErrNotFound)
	}
}

func TestOverrideMissingPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "lib.so.1")
	for _, k := range kinds {
		_, err := loader.OpenIn(k, testEnv(t, map[string]string{k.EnvVar(): missing, "VIRTUAL_ENV": t.TempDir()}))
		require.Error(t, err)
		assert.ErrorIs(t, err, loader.ErrNotFound)
		assert.NotErrorIs(t, err, loader.ErrWrongLibrary)
		var nf *loader.NotFoundError
		require.ErrorAs(t, err, &nf)
		assert.Equal(t, k, nf.Library, "the error says which library, as a value")
		assert.Equal(t, k.EnvVar(), nf.EnvVar)
		assert.Equal(t, []loader.Attempt{{Path: missing, Reason: "no such file"}}, nf.Tried, "an override is the only candidate")
		assert.Contains(t, err.Error(), k.String()+" library not found")
		assert.Contains(t, err.Error(), k.EnvVar())
		assert.Contains(t, err.Error(), missing+": no such file")
	}
}

// libcPath finds a shared library that is certainly not CUDA.
func libcPath(t *testing.T) string {
	if runtime.GOOS != "linux" {
		t.Skip("libc path lookup is written for Linux")
	}
	for _, pattern := range []string{"/lib/*-linux-gnu/libc.so.6", "/usr/lib/*-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6", "/lib/libc.so.6"} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0]
		}
	}
	t.Skip("libc.so.6 not found")
	return ""
}

func TestOverrideWrongLibrary(t *testing.T) {
	libc := libcPath(t)
	for _, k := range kinds {
		_, err := loader.OpenIn(k, testEnv(t, map[string]string{k.EnvVar(): libc}))
		require.Error(t, err)
		assert.ErrorIs(t, err, loader.ErrWrongLibrary)
		assert.ErrorIs(t, err, loader.ErrNotFound)
		assert.Contains(t, err.Error(), libc+": opened, but it is not the "+k.String()+" library (no symbol ")
	}
}

// buildFake compiles a shared library exporting symbol into path, or
// skips the test without gcc.
func buildFake(t *testing.T, path, symbol string, flags ...string) {
	gcc, err := exec.LookPath("gcc")
	if err != nil || runtime.GOOS != "linux" {
		t.Skip("needs gcc on Linux to build a fake library")
	}
	src := filepath.Join(t.TempDir(), "fake.c")
	require.NoError(t, os.WriteFile(src, []byte("int "+symbol+"(int *a, int *b) { *a = 13; *b = 0; return 0; }\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	out, err := exec.Command(gcc, append([]string{"-shared", "-fPIC", "-o", path, src}, flags...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestOpenFromWheel: NVRTC installed only as a pip wheel in a virtual
// environment is found and opened, and Library.Tried lists the places that
// failed before it.
func TestOpenFromWheel(t *testing.T) {
	venv := t.TempDir()
	wheel := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cu13", "lib", "libnvrtc.so.13")
	buildFake(t, wheel, "nvrtcVersion")
	lib, err := loader.OpenIn(loader.KindNVRTC, testEnv(t, map[string]string{"VIRTUAL_ENV": venv}))
	require.NoError(t, err)
	if !filepath.IsAbs(lib.Path) {
		t.Skipf("this machine has NVRTC in the system's search (%s)", lib.Path)
	}
	assert.Equal(t, wheel, lib.Path)
	assert.Equal(t, loader.KindNVRTC, lib.Kind)
	addr, err := lib.Lookup("nvrtcVersion")
	require.NoError(t, err)
	assert.NotZero(t, addr)
	_, err = lib.Lookup("nvrtcCompileProgram")
	assert.ErrorContains(t, err, "has no symbol nvrtcCompileProgram")
	require.NotEmpty(t, lib.Tried)
	assert.Equal(t, "libnvrtc.so.13", lib.Tried[len(lib.Tried)-4].Path, "the system's search was tried first")
	for _, a := range lib.Tried {
		assert.NotEmpty(t, a.Reason, a.Path)
	}

	var nilLib *loader.Library
	_, err = nilLib.Lookup("nvrtcVersion")
	assert.Error(t, err)
}

// TestNotFoundListsEveryPlace: with wheels that are not libraries in a
// virtual environment, conda's lib directory and the user's site-packages,
// the error lists every place searched, in the search's order, each with
// its reason.
func TestNotFoundListsEveryPlace(t *testing.T) {
	venv, conda, home := t.TempDir(), t.TempDir(), t.TempDir()
	var fakes []string
	for _, p := range []string{
		filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cu13", "lib", "libnvrtc.so.13"),
		filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12"),
		filepath.Join(conda, "lib", "libnvrtc.so.12"),
		filepath.Join(home, ".local", "lib", "python3.12", "site-packages", "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12"),
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("not an ELF file"), 0o644))
		fakes = append(fakes, p)
	}
	env := testEnv(t, map[string]string{"VIRTUAL_ENV": venv, "CONDA_PREFIX": conda, "HOME": home, "CUDA_PATH": "/opt/cuda"})
	want := loadspec.Search(&loadspec.NVRTC, env).Candidates
	var paths []string
	for _, c := range want {
		paths = append(paths, c.Path)
	}
	for _, f := range fakes {
		assert.Contains(t, paths, f, "a wheel that would not load is a place to try")
	}
	assert.Contains(t, paths, "/opt/cuda/lib64/libnvrtc.so.13")
	assert.Contains(t, paths, "libnvrtc.so.12")
	assert.Contains(t, paths, "/usr/lib/python3/dist-packages")
	assert.Less(t, indexOf(paths, "libnvrtc.so"), indexOf(paths, fakes[0]), "the system's search before the wheels")
	assert.Less(t, indexOf(paths, fakes[1]), indexOf(paths, fakes[2]), "the virtual environment before conda")
	assert.Less(t, indexOf(paths, fakes[2]), indexOf(paths, fakes[3]), "conda before the user's site-packages")

	lib, err := loader.OpenIn(loader.KindNVRTC, env)
	if err == nil {
		// Every place but the dynamic loader's own search (LD_LIBRARY_PATH,
		// the ld.so cache) is empty or fake here: only it can have found NVRTC.
		assert.Contains(t, loadspec.NVRTC.Sonames, lib.Path, "found by the system's search")
		t.Skipf("the system's own search finds %s on this machine: no NotFoundError to look at", lib.Path)
	}
	var nf *loader.NotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, loader.KindNVRTC, nf.Library)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.NotErrorIs(t, err, loader.ErrWrongLibrary)

	require.Len(t, nf.Tried, len(want), "one entry per place")
	for i, c := range want {
		a := nf.Tried[i]
		assert.Equal(t, c.Path, a.Path)
		if c.Missing != "" {
			assert.Equal(t, c.Missing, a.Reason)
		} else {
			assert.NotEmpty(t, a.Reason)
			assert.NotEqual(t, "no such file", a.Reason, a.Path)
		}
		assert.Contains(t, err.Error(), "\n\t"+a.Path+": "+a.Reason)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestUnsupportedPlatforms(t *testing.T) {
	for _, k := range kinds {
		env := testEnv(t, map[string]string{k.EnvVar(): "/nonexistent/lib.so"})
		env.GOOS, env.GOARCH = "darwin", "arm64"
		lib, err := loader.OpenIn(k, env)
		assert.Nil(t, lib)
		var up *loader.UnsupportedPlatformError
		require.ErrorAs(t, err, &up)
		assert.Equal(t, k, up.Library)
		assert.ErrorIs(t, err, loader.ErrNotFound)
		assert.ErrorIs(t, err, loader.ErrUnsupportedPlatform)
		assert.NotContains(t, err.Error(), "/nonexistent", "not even an override is tried")
	}
	env := testEnv(t, nil)
	env.GOOS, env.GOARCH = "windows", "amd64"
	_, err := loader.OpenIn(loader.KindNCCL, env)
	var up *loader.UnsupportedPlatformError
	require.ErrorAs(t, err, &up)
	assert.Equal(t, loader.KindNCCL, up.Library)
	assert.EqualError(t, err, "loader: NCCL library: unsupported platform windows/amd64: NVIDIA ships it for Linux only, so nothing was searched")
}

// TestDriverOnThisMachine opens the real driver: on a machine without one it
// must be a NotFoundError listing the platform's candidates, never a panic.
func TestDriverOnThisMachine(t *testing.T) {
	lib, err := loader.Driver()
	if err == nil {
		assert.NotEmpty(t, lib.Path)
		assert.Equal(t, loader.KindDriver, lib.Kind)
		t.Logf("driver: %s", lib.Path)
		return
	}
	if os.Getenv("PURECUDA_REQUIRE_GPU") != "" {
		t.Fatalf("PURECUDA_REQUIRE_GPU is set but: %v", err)
	}
	assert.ErrorIs(t, err, loader.ErrNotFound)
	var nf *loader.NotFoundError
	if errors.As(err, &nf) {
		assert.Equal(t, loader.KindDriver, nf.Library)
	}
	lib2, err2 := loader.Open(loader.KindDriver)
	assert.Nil(t, lib2)
	assert.Equal(t, err, err2, "the first outcome is kept")
	t.Logf("no driver here, as expected without a GPU:\n%v", err)
}
