package loader_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/loader"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestDriverSearchOrder(t *testing.T) {
	s := loader.DriverSpec("linux")
	assert.Equal(t, "PURECUDA_LIBCUDA", s.EnvVar)
	assert.Equal(t, "cuInit", s.Probe)
	assert.Equal(t, []string{"libcuda.so.1", "libcuda.so", "/usr/lib/wsl/lib/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"}, s.Candidates)
	assert.Equal(t, []string{"nvcuda.dll"}, loader.DriverSpec("windows").Candidates)
}

func TestNVRTCSearchOrderLinux(t *testing.T) {
	s := loader.NVRTCSpec("linux", "amd64", env(map[string]string{"CUDA_PATH": "/opt/cuda", "CUDA_HOME": "/opt/home"}))
	require.Len(t, s.Candidates, 4*4+4)
	assert.Equal(t, "/opt/cuda/lib64/libnvrtc.so.13", s.Candidates[0])
	assert.Equal(t, "/opt/cuda/lib64/libnvrtc.so", s.Candidates[3])
	assert.Equal(t, "/opt/home/lib64/libnvrtc.so.13", s.Candidates[4])
	assert.Equal(t, "/usr/local/cuda/lib64/libnvrtc.so.12", s.Candidates[9])
	assert.Equal(t, "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.11.2", s.Candidates[14])
	assert.Equal(t, []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}, s.Candidates[16:])

	same := loader.NVRTCSpec("linux", "amd64", env(map[string]string{"CUDA_PATH": "/usr/local/cuda", "CUDA_HOME": "/usr/local/cuda/"}))
	assert.Len(t, same.Candidates, 2*4+4, "a directory named twice is searched once")
	assert.Equal(t, "/usr/local/cuda/lib64/libnvrtc.so.13", same.Candidates[0])
	assert.Equal(t, "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13", same.Candidates[4])

	empty := loader.NVRTCSpec("linux", "arm64", env(nil))
	assert.Equal(t, "/usr/local/cuda/lib64/libnvrtc.so.13", empty.Candidates[0])
	assert.Contains(t, empty.Candidates, "/usr/local/cuda/targets/sbsa-linux/lib/libnvrtc.so.13")
	assert.Contains(t, empty.Candidates, "/usr/local/cuda/targets/aarch64-linux/lib/libnvrtc.so")
	assert.Equal(t, "libnvrtc.so", empty.Candidates[len(empty.Candidates)-1])
}

func TestNVRTCSearchOrderWindows(t *testing.T) {
	s := loader.NVRTCSpec("windows", "amd64", env(map[string]string{"CUDA_PATH": `C:\CUDA`}))
	assert.Equal(t, []string{
		`C:\CUDA\bin\x64\nvrtc64_130_0.dll`, `C:\CUDA\bin\x64\nvrtc64_120_0.dll`, `C:\CUDA\bin\x64\nvrtc64_112_0.dll`,
		`C:\CUDA\bin\nvrtc64_130_0.dll`, `C:\CUDA\bin\nvrtc64_120_0.dll`, `C:\CUDA\bin\nvrtc64_112_0.dll`,
		"nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll",
	}, s.Candidates)
	assert.Equal(t, []string{"nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll"}, loader.NVRTCSpec("windows", "amd64", env(nil)).Candidates)
}

func TestOverrideMissingPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libcuda.so.1")
	spec := loader.DriverSpec(runtime.GOOS)
	_, err := loader.Open(spec, env(map[string]string{"PURECUDA_LIBCUDA": missing}))
	require.Error(t, err)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.NotErrorIs(t, err, loader.ErrWrongLibrary)
	var nf *loader.NotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, []loader.Attempt{{Path: missing, Reason: "no such file"}}, nf.Tried, "an override is the only candidate")
	assert.Contains(t, err.Error(), "CUDA driver library not found")
	assert.Contains(t, err.Error(), "PURECUDA_LIBCUDA")
	assert.Contains(t, err.Error(), missing+": no such file")
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
	_, err := loader.Open(loader.DriverSpec("linux"), env(map[string]string{"PURECUDA_LIBCUDA": libc}))
	require.Error(t, err)
	assert.ErrorIs(t, err, loader.ErrWrongLibrary)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.Contains(t, err.Error(), libc+": opened, but it is not the CUDA driver library (no symbol cuInit)")

	_, err = loader.Open(loader.NVRTCSpec("linux", runtime.GOARCH, env(nil)), env(map[string]string{"PURECUDA_LIBNVRTC": libc}))
	assert.ErrorIs(t, err, loader.ErrWrongLibrary)
	assert.Contains(t, err.Error(), "not the NVRTC library (no symbol nvrtcVersion)")
}

func TestOpenAndLookup(t *testing.T) {
	libc := libcPath(t)
	lib, err := loader.Open(loader.Spec{Kind: "C", EnvVar: "X_UNSET", Candidates: []string{"/nonexistent/libc.so", libc}, Probe: "malloc"}, env(nil))
	require.NoError(t, err)
	assert.Equal(t, libc, lib.Path)
	addr, err := lib.Lookup("free")
	require.NoError(t, err)
	assert.NotZero(t, addr)
	_, err = lib.Lookup("cuInit_definitely_missing")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no symbol cuInit_definitely_missing")

	var nilLib *loader.Library
	_, err = nilLib.Lookup("malloc")
	assert.Error(t, err)
}

func TestEveryCandidateListed(t *testing.T) {
	dir := t.TempDir()
	notLib := filepath.Join(dir, "libcuda.so.1")
	require.NoError(t, os.WriteFile(notLib, []byte("not an ELF file"), 0o644))
	spec := loader.Spec{Kind: "CUDA driver", EnvVar: "PURECUDA_LIBCUDA",
		Candidates: []string{"libpurecuda-test-none.so.1", notLib, filepath.Join(dir, "missing.so")}, Probe: "cuInit"}
	_, err := loader.Open(spec, env(nil))
	var nf *loader.NotFoundError
	require.ErrorAs(t, err, &nf)
	require.Len(t, nf.Tried, 3)
	for i, a := range nf.Tried {
		assert.Equal(t, spec.Candidates[i], a.Path)
		assert.NotEmpty(t, a.Reason)
	}
	assert.Equal(t, "no such file", nf.Tried[2].Reason)
	assert.True(t, errors.Is(err, loader.ErrNotFound))
}

// TestDriverOnThisMachine opens the real driver: on a machine without one it
// must be a NotFoundError listing the platform's candidates, never a panic.
func TestDriverOnThisMachine(t *testing.T) {
	lib, err := loader.Driver()
	if err == nil {
		assert.NotEmpty(t, lib.Path)
		t.Logf("driver: %s", lib.Path)
		return
	}
	if os.Getenv("PURECUDA_REQUIRE_GPU") != "" {
		t.Fatalf("PURECUDA_REQUIRE_GPU is set but: %v", err)
	}
	assert.ErrorIs(t, err, loader.ErrNotFound)
	lib2, err2 := loader.Driver()
	assert.Nil(t, lib2)
	assert.Equal(t, err, err2, "the first outcome is kept")
	t.Logf("no driver here, as expected without a GPU:\n%v", err)
}
