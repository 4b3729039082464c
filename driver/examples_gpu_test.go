package driver_test

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/gputest"
)

// stdoutOf runs f with os.Stdout redirected and returns what it printed.
func stdoutOf(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = old }()
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	f()
	require.NoError(t, w.Close())
	os.Stdout = old
	return strings.TrimSpace(<-done)
}

// TestExamplesOnGPU runs the package's examples that print, and checks
// what they print (go test cannot: they need a GPU).
func TestExamplesOnGPU(t *testing.T) {
	gputest.Require(t)
	for name, c := range map[string]struct {
		f    func()
		want string
	}{
		"Example":                      {Example, "[2 3 4 5]"},
		"ExampleStream_LaunchHostFunc": {ExampleStream_LaunchHostFunc, "28"},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, c.want, stdoutOf(t, c.f)) })
	}
}
