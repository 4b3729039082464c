package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary runs as the example itself in a child process, so each
// case opens the libraries afresh under its own environment.
func TestMain(m *testing.M) {
	if os.Getenv("PURECUDA_EXAMPLE_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func example(t *testing.T, env ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "PURECUDA_EXAMPLE_AS_MAIN=1"), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("did not run: %v", err)
	}
	if exit != nil {
		code = exit.ExitCode()
	}
	assert.NotContains(t, e.String(), "panic:")
	return code, o.String(), e.String()
}

func TestNoGPU(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libcuda.so.1")
	code, stdout, stderr := example(t, "PURECUDA_LIBCUDA="+missing)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "vectoradd: no usable GPU: ")
	assert.Contains(t, stderr, missing+": no such file")
	assert.Contains(t, stderr, "cmd/smoke")
}

// TestOnThisMachine runs the example for real where there is a GPU (and
// must, under PURECUDA_REQUIRE_GPU).
func TestOnThisMachine(t *testing.T) {
	code, stdout, stderr := example(t)
	if code == 2 && os.Getenv("PURECUDA_REQUIRE_GPU") == "" {
		t.Skipf("no GPU here: %s", stderr)
	}
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "vectoradd: 1048576 sums on ")
	t.Log(stdout)
}
