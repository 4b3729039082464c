package gputest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/purecuda/cuda/loader"
)

// ttyEnv names the file Main also appends its summary to: the terminal,
// "/dev/tty" (or "CONOUT$" on Windows), when unset; "off" for none. A script
// or CI, which has no terminal, points it at a file of its own and prints
// that after go test.
const ttyEnv = "PURECUDA_SKIP_SUMMARY"

// skips counts the tests skipped for want of a GPU in this process; reason
// is the first one's reason.
var (
	skips  atomic.Int64
	reason struct {
		sync.Mutex
		s string
	}
)

// Skip skips tb because no GPU is usable (why says what is missing), or
// fails it under PURECUDA_REQUIRE_GPU, and counts it for the summary Main
// prints. Require calls it; tests that find out for themselves (a child
// process that reports no GPU) call it directly.
func Skip(tb testing.TB, why string) {
	tb.Helper()
	if Required() {
		tb.Fatalf("PURECUDA_REQUIRE_GPU is set but no GPU is usable: %s", why)
	}
	skips.Add(1)
	reason.Lock()
	if reason.s == "" {
		reason.s = why
	}
	reason.Unlock()
	tb.Skipf("no GPU: %s", why)
}

// shortReason is the first line of err, or a plain phrase for the common
// case of no driver library at all.
func shortReason(err error) string {
	if errors.Is(err, loader.ErrNotFound) {
		return "no CUDA driver (its library was not found; go run ./cmd/smoke -v lists where it looked)"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// Summary is the line Main prints after the tests of package pkg when n of
// them skipped for want of a GPU, the first for reason why.
func Summary(pkg string, n int64, why string) string {
	tests := "tests"
	if n == 1 {
		tests = "test"
	}
	first, _, _ := strings.Cut(why, "\n")
	first = strings.TrimSuffix(strings.TrimSpace(first), "; tried:") // the loader's list follows
	return fmt.Sprintf("purecuda: %d GPU %s skipped in package %s: %s; set PURECUDA_REQUIRE_GPU=1 to fail instead",
		n, tests, pkg, first)
}

// Main is the TestMain of a package with GPU tests: it runs the tests and,
// when any skipped for want of a GPU, prints one line saying how many and
// why, so that a CPU run is not mistaken for a GPU run. Then it exits with
// the tests' status.
//
// The line goes to standard output, where go test shows it with -v or
// -json, when testing one directory (plain `go test`), and when the package
// fails. `go test ./...` (package list mode) shows nothing a passing package
// prints, standard error included, so unless -v is on and unless standard
// output is itself a terminal, the line also goes to the controlling
// terminal, when there is one, or to the file PURECUDA_SKIP_SUMMARY names.
func Main(m *testing.M) {
	code := m.Run()
	n := skips.Load()
	if n > 0 {
		reason.Lock()
		line := Summary(packageName(), n, reason.s)
		reason.Unlock()
		fmt.Println(line)
		if !testing.Verbose() && !isTerminal(os.Stdout) {
			toTerminal(line)
		}
	}
	os.Exit(code)
}

// packageName is the test binary's name less ".test": go test and
// tests/gpu-bundle.sh name the binary for its package.
func packageName() string {
	name := filepath.Base(os.Args[0])
	name = strings.TrimSuffix(name, ".exe")
	return strings.TrimSuffix(name, ".test")
}

// isTerminal reports whether f is a character device (a terminal, or
// /dev/null: either way nothing more is needed).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// toTerminal writes line to the controlling terminal, if there is one.
func toTerminal(line string) {
	path := os.Getenv(ttyEnv)
	switch path {
	case "off":
		return
	case "":
		path = terminalPath
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return // no terminal: CI, a daemon
	}
	_, _ = io.WriteString(f, line+"\n")
	_ = f.Close()
}
