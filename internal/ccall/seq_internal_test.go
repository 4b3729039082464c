//go:build linux

package ccall

import (
	"testing"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunEachIsRun: the portable sequence (one foreign call per step,
// what Run is off linux/amd64) gives what Run gives: the same results and
// the same stop.
func TestRunEachIsRun(t *testing.T) {
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_LOCAL)
	require.NoError(t, err)
	labs, err := purego.Dlsym(h, "labs")
	require.NoError(t, err)
	make5 := func() []Step {
		var steps []Step
		for i, v := range []uintptr{0, 5, 1 << 32, 6, 2} {
			s := Step{Fn: labs, N: 1, Stop: uintptr(i % 2)}
			s.Args[0] = v
			steps = append(steps, s)
		}
		return steps
	}
	a, b := make5(), make5()
	assert.Equal(t, Run(a), runEach(b))
	assert.Equal(t, 2, runEach(b))
	assert.Equal(t, a, b)
}
