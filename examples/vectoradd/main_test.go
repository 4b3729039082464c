package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m, main) }

func TestNoGPU(t *testing.T) { exampletest.NoGPU(t, "vectoradd") }

// TestOnThisMachine runs the example for real where there is a GPU (and
// must, under PURECUDA_REQUIRE_GPU).
func TestOnThisMachine(t *testing.T) {
	stdout := exampletest.OnThisMachine(t)
	assert.Contains(t, stdout, "vectoradd: 1048576 sums on ")
}
