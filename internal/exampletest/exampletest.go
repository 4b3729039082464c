// Package exampletest runs the programs under examples/ from their own
// tests: the test binary re-runs itself as the example in a child process,
// so each case opens the CUDA libraries afresh under its own environment.
package exampletest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/gputest"
)

const asMain = "PURECUDA_EXAMPLE_AS_MAIN"

// Main is the example's TestMain: run as the example, it calls main and
// exits; otherwise it runs the tests and says how many skipped for want of
// a GPU (gputest.Main).
func Main(m *testing.M, main func()) {
	if os.Getenv(asMain) == "1" {
		main()
		os.Exit(0)
	}
	gputest.Main(m)
}

// Run runs the example in a child process with env added, and returns its
// exit code and output. Nothing it prints may be a panic.
func Run(t *testing.T, env ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), asMain+"=1"), env...)
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

// NoGPU checks that the example named name, run without a driver, exits 2
// with a clear message that names the path tried and points to cmd/smoke.
func NoGPU(t *testing.T, name string) {
	missing := filepath.Join(t.TempDir(), "libcuda.so.1")
	code, stdout, stderr := Run(t, "PURECUDA_LIBCUDA="+missing)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, name+": no usable GPU: ")
	assert.Contains(t, stderr, missing+": no such file")
	assert.Contains(t, stderr, "cmd/smoke")
}

// OnThisMachine runs the example for real where there is a GPU (and must,
// under PURECUDA_REQUIRE_GPU), and returns what it printed.
func OnThisMachine(t *testing.T) string {
	code, stdout, stderr := Run(t)
	if code == 2 && os.Getenv("PURECUDA_REQUIRE_GPU") == "" {
		gputest.Skip(t, stderr)
	}
	require.Equal(t, 0, code, stderr)
	t.Log(stdout)
	return stdout
}
