package nvrtc_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/nvrtc"
)

// needNVRTC skips without libnvrtc (fails under PURECUDA_REQUIRE_GPU).
func needNVRTC(tb testing.TB) {
	tb.Helper()
	if _, err := nvrtc.LibraryPath(); err != nil {
		if gputest.Required() {
			tb.Fatalf("PURECUDA_REQUIRE_GPU is set but NVRTC does not load: %v", err)
		}
		tb.Skipf("no NVRTC: %v", err)
	}
}

const setConditionalSrc = `
#include <purecuda/graph.h>
extern "C" __global__ void countdown(int *left, cudaGraphConditionalHandle h) {
	if (--*left <= 0) cudaGraphSetConditional(h, 0);
}
`

// A kernel that sets a graph condition compiles with only the built-in
// header: no toolkit include path, no -rdc (needs libnvrtc, no GPU).
func TestBuiltinGraphHeaderCompiles(t *testing.T) {
	needNVRTC(t)
	for _, arch := range []string{"compute_90", "sm_90"} {
		res, err := nvrtc.Compile(setConditionalSrc, nvrtc.Options{Arch: arch, Name: "countdown.cu"})
		require.NoError(t, err, arch)
		assert.Contains(t, string(res.PTX), "countdown", arch)
		assert.NotContains(t, res.Log, "error", arch)
		if arch == "sm_90" {
			assert.NotEmpty(t, res.CUBIN)
		}
	}
	// The quoted form finds it too.
	_, err := nvrtc.Compile(`#include "purecuda/graph.h"
extern "C" __global__ void k(cudaGraphConditionalHandle h) { cudaGraphSetConditional(h, 1); }`, nvrtc.Options{Arch: "compute_90"})
	require.NoError(t, err)
}

// A header the caller passes under the same name replaces the built-in one.
func TestBuiltinHeaderOverride(t *testing.T) {
	needNVRTC(t)
	src := `#include <purecuda/graph.h>
#ifndef MINE
#error "the built-in header was used"
#endif
extern "C" __global__ void k() {}`
	_, err := nvrtc.Compile(src, nvrtc.Options{Arch: "compute_90"})
	require.ErrorIs(t, err, nvrtc.ErrCompilation, "the built-in header does not define MINE")
	assert.ErrorContains(t, err, "the built-in header was used")
	_, err = nvrtc.Compile(src, nvrtc.Options{Arch: "compute_90", Headers: map[string]string{nvrtc.GraphHeader: "#define MINE 1\n"}})
	require.NoError(t, err)
}
