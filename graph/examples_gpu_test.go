package graph_test

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/gputest"
)

// capture runs f with os.Stdout redirected and returns what it printed.
func capture(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = old }()
	f()
	w.Close()
	os.Stdout = old
	return strings.TrimSpace(<-done)
}

// TestExamplesOnGPU runs the package's examples and checks their output.
func TestExamplesOnGPU(t *testing.T) {
	gputest.Require(t)
	for name, c := range map[string]struct {
		f    func()
		want string
	}{
		"Example":                  {Example, "[8 16 24 32] 3"},
		"ExampleBuilder_MemAlloc":  {ExampleBuilder_MemAlloc, "[0 1 2 3 -1 -1 -1 -1]"},
		"ExampleBuilder_Child":     {ExampleBuilder_Child, "[0 1 2 3]"},
		"ExampleGraph_Clone":       {ExampleGraph_Clone, "empty 2"},
		"ExampleExec_SetKernelArg": {ExampleExec_SetKernelArg, "[6 12 18 24]"},
		"ExampleGraph_While":       {ExampleGraph_While, "128"},
		"ExampleCapture":           {ExampleCapture, "[0 1 2 3] 2"},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, c.want, capture(t, c.f)) })
	}
}
