package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSkippedStep: a step that cannot run on this machine (a second GPU,
// NCCL) reports skipped with its reason, and the run still passes; steps
// that need it are skipped too.
func TestSkippedStep(t *testing.T) {
	list := []step{
		{name: "a", run: func(*state) (string, error) { return "fine", nil }},
		{name: "b", needs: []string{"a"}, run: func(*state) (string, error) { return "", skipped("one device: no peer") }},
		{name: "c", needs: []string{"b"}, run: func(*state) (string, error) { t.Error("c ran"); return "", nil }},
	}
	rep := runSteps(config{}, list, &textWriter{w: io.Discard})
	assert.Equal(t, "PASS", rep.Result)
	assert.Equal(t, exitPass, rep.ExitCode)
	assert.Equal(t, [3]int{1, 0, 2}, [3]int{rep.Passed, rep.Failed, rep.Skipped})
	assert.Equal(t, statusSkip, rep.Steps[1].Status)
	assert.Equal(t, "one device: no peer", rep.Steps[1].Summary)
	assert.Empty(t, rep.Steps[1].Error)
	assert.Equal(t, "needs b", rep.Steps[2].Summary)
}
