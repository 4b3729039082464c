//go:build linux

package loader_test

import (
	"path/filepath"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/loader"
)

// TestCompanionPreloaded: NVRTC opened from a wheel has its builtins
// library, which it later opens by file name alone, loaded already, so
// the system's search finds it without LD_LIBRARY_PATH.
func TestCompanionPreloaded(t *testing.T) {
	venv := t.TempDir()
	dir := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cu13", "lib")
	buildFake(t, filepath.Join(dir, "libnvrtc.so.13"), "nvrtcVersion")
	name := "libnvrtc-builtins.so.99.7" // a version no real NVRTC has, so none is loaded already
	builtins := filepath.Join(dir, name)
	buildFake(t, builtins, "nvrtcBuiltinsFake", "-Wl,-soname,"+name)
	const rtldNoload = 0x4 // glibc: succeed only if already loaded
	_, err := purego.Dlopen(name, purego.RTLD_NOW|rtldNoload)
	require.Error(t, err, "not loaded before")

	lib, err := loader.OpenIn(loader.KindNVRTC, testEnv(t, map[string]string{"VIRTUAL_ENV": venv}))
	require.NoError(t, err)
	if !filepath.IsAbs(lib.Path) {
		t.Skipf("this machine has NVRTC in the system's search (%s)", lib.Path)
	}
	h, err := purego.Dlopen(name, purego.RTLD_NOW|rtldNoload)
	require.NoError(t, err, "the builtins beside NVRTC are loaded: opening them by name finds them")
	addr, err := purego.Dlsym(h, "nvrtcBuiltinsFake")
	assert.NoError(t, err)
	assert.NotZero(t, addr)
}

// TestNeedsPreloaded: cuBLAS from a wheel links against cuBLASLt by file
// name; with neither in the system's search, cuBLASLt beside it is opened
// first, so that cuBLAS opens.
func TestNeedsPreloaded(t *testing.T) {
	venv := t.TempDir()
	dir := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cublas", "lib")
	lt := filepath.Join(dir, "libcublasLt.so.12")
	buildFake(t, lt, "cublasLtFakeForNeeds", "-Wl,-soname,libcublasLt.so.12")
	const rtldNoload = 0x4
	if _, err := purego.Dlopen("libcublasLt.so.12", purego.RTLD_NOW|rtldNoload); err == nil {
		t.Skip("a libcublasLt.so.12 is loaded in this process already")
	}
	if _, err := purego.Dlopen("libcublasLt.so.12", purego.RTLD_NOW|purego.RTLD_LOCAL); err == nil {
		t.Skip("this machine has libcublasLt.so.12 in the system's search: the preload cannot be told apart")
	}
	buildFake(t, filepath.Join(dir, "libcublas.so.12"), "cublasGetVersion_v2", "-L"+dir, "-l:libcublasLt.so.12")

	lib, err := loader.OpenIn(loader.KindCUBLAS, testEnv(t, map[string]string{"VIRTUAL_ENV": venv}))
	require.NoError(t, err, "libcublas opens: its libcublasLt was opened first")
	if !filepath.IsAbs(lib.Path) {
		t.Skipf("this machine has cuBLAS in the system's search (%s)", lib.Path)
	}
	assert.Equal(t, filepath.Join(dir, "libcublas.so.12"), lib.Path)
	h, err := purego.Dlopen("libcublasLt.so.12", purego.RTLD_NOW|rtldNoload)
	require.NoError(t, err)
	addr, err := purego.Dlsym(h, "cublasLtFakeForNeeds")
	assert.NoError(t, err)
	assert.NotZero(t, addr)
}
