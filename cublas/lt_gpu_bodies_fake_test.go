//go:build linux

package cublas_test

import (
	"testing"

	"github.com/purecuda/cuda/internal/faketest"
)

// TestGPUTrainingBodiesFromFake runs the GPU tests of the training
// epilogues against fakecublas and fakecuda, whose matmuls follow the same
// reference: their indexing, sizes, captures and checks are tested on the
// CPU before they meet cuBLASLt (float32 and Half, both layouts).
func TestGPUTrainingBodiesFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	TestGPUMatmulPlanTrainingEpilogues(t)
	TestGPUMatmulPlanReLUMaskLayout(t)
	TestGPUMatmulPlanTrainingCaptured(t)
}
