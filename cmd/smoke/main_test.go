package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/gputest"
)

func TestSmoke(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(&out, &errOut)
	if _, _, err := cu.Load(); err != nil {
		if gputest.Required() {
			t.Fatalf("PURECUDA_REQUIRE_GPU is set but: %v", err)
		}
		assert.Equal(t, 2, code, "no driver: exit status 2")
		assert.Contains(t, errOut.String(), "CUDA driver library not found")
		assert.Contains(t, errOut.String(), "libcuda.so.1")
		return
	}
	gputest.Require(t)
	t.Log(out.String())
	assert.Equal(t, 0, code, errOut.String())
	assert.Contains(t, out.String(), "entry points: 459 resolved, 0 not available")
}
