package gputest_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/gputest"
)

func TestMain(m *testing.M) { gputest.Main(m) }

// asChild makes TestChildNeedsGPU* run: only in the child process that
// TestMainPrintsSkipSummary starts without a driver.
const asChild = "PURECUDA_GPUTEST_CHILD"

func TestChildNeedsGPUOne(t *testing.T) {
	if os.Getenv(asChild) != "1" {
		t.Skip("runs only as the child of TestMainPrintsSkipSummary")
	}
	gputest.Require(t)
	t.Fatal("no driver was loaded, yet Require did not skip")
}

func TestChildNeedsGPUTwo(t *testing.T) {
	if os.Getenv(asChild) != "1" {
		t.Skip("runs only as the child of TestMainPrintsSkipSummary")
	}
	gputest.Require(t)
	t.Fatal("no driver was loaded, yet Require did not skip")
}

// child runs this test binary's two GPU tests with no driver to load and
// returns its exit code, its output and what it wrote to its "terminal".
func child(t *testing.T, env []string, args ...string) (code int, out, tty string) {
	t.Helper()
	dir := t.TempDir()
	ttyFile := filepath.Join(dir, "tty") // Main creates it
	cmd := exec.Command(os.Args[0], append([]string{"-test.run", "^TestChildNeedsGPU"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PURECUDA_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, asChild+"=1", "PURECUDA_LIBCUDA="+filepath.Join(dir, "libcuda.so.1"),
		"PURECUDA_SKIP_SUMMARY="+ttyFile)
	cmd.Env = append(cmd.Env, env...)
	var o bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &o
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil {
		require.True(t, errors.As(err, &exit), "child did not run: %v", err)
		code = exit.ExitCode()
	}
	b, err := os.ReadFile(ttyFile)
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	return code, o.String(), string(b)
}

// The line a CPU run prints names the package, the count and the reason,
// once on standard output and, since go test ./... would hide that, once on
// the terminal.
func TestMainPrintsSkipSummary(t *testing.T) {
	code, out, tty := child(t, nil)
	want := "purecuda: 2 GPU tests skipped in package " + binaryPackage() + ": no CUDA driver (its library was not found; " +
		"go run ./cmd/smoke -v lists where it looked); set PURECUDA_REQUIRE_GPU=1 to fail instead\n"
	assert.Equal(t, 0, code, out)
	assert.Equal(t, 1, strings.Count(out, want), out)
	assert.Equal(t, want, tty)
}

// binaryPackage is the package name the summary gives: the test binary's
// name less ".test" ("gputest" under go test, another name in a bundle).
func binaryPackage() string { return strings.TrimSuffix(filepath.Base(os.Args[0]), ".test") }

// With -v go test shows standard output, so the terminal gets nothing.
func TestMainPrintsSkipSummaryOnceWhenVerbose(t *testing.T) {
	code, out, tty := child(t, nil, "-test.v")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "--- SKIP: TestChildNeedsGPUOne")
	assert.Equal(t, 1, strings.Count(out, "purecuda: 2 GPU tests skipped in package "+binaryPackage()+": "), out)
	assert.Empty(t, tty)
}

// Under PURECUDA_REQUIRE_GPU nothing skips: the tests fail and no summary
// claims a skip.
func TestMainRequireGPUFailsWithoutSummary(t *testing.T) {
	code, out, tty := child(t, []string{"PURECUDA_REQUIRE_GPU=1"})
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "PURECUDA_REQUIRE_GPU is set but no GPU is usable")
	assert.NotContains(t, out, "GPU tests skipped")
	assert.Empty(t, tty)
}

func TestSummaryCountsOneTest(t *testing.T) {
	assert.Equal(t, "purecuda: 1 GPU test skipped in package driver: no device; set PURECUDA_REQUIRE_GPU=1 to fail instead",
		gputest.Summary("driver", 1, "no device\nmore detail"))
}
