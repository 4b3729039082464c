//go:build linux

package cublas_test

import (
	"testing"

	"github.com/purecuda/cuda/internal/faketest"
)

// TestGPULtBodiesFromFake runs the GPU tests of the training epilogues,
// of FP8 plans (8-bit D's too) and of views and biases at 16-byte offsets against fakecublas and fakecuda (a device of compute
// capability 9.0), whose matmuls follow the same reference: their
// indexing, sizes, captures and checks are tested on the CPU before they
// meet cuBLASLt, and no operand closed while queued or captured is used
// after its release.
func TestGPULtBodiesFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	TestGPUMatmulPlanTrainingEpilogues(t)
	TestGPUMatmulPlanReLUMaskLayout(t)
	TestGPUMatmulPlanTrainingCaptured(t)
	TestGPUMatmulPlanTrainingBackwardBeta(t)
	TestGPUMatmulPlanFP8(t)
	TestGPUMatmulPlanFP8Held(t)
	TestGPUMatmulPlanFP8Out(t)
	TestGPUMatmulPlanFP8OutHeld(t)
	TestGPUMatmulPlanFP8OutGELU(t)
	TestGPUMatmulPlanAlignedOffsets(t)
	for _, boff := range []int{1, 2, 3} { // TestGPUMatmulPlanBiasAnyElement's body
		matmulAtOffsets(t, boff)
	}
	noBadUses(t) // the captured mask and the scales closed while queued were held
}
