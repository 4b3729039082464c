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
