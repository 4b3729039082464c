package cublas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/cublas"
)

// TestEpilogueString: every epilogue prints its name without the prefix,
// and a value not offered its number.
func TestEpilogueString(t *testing.T) {
	for e, want := range map[cublas.Epilogue]string{
		cublas.EpilogueNone: "None", cublas.EpilogueReLUBias: "ReLUBias", cublas.EpilogueGELUAuxBias: "GELUAuxBias",
		cublas.EpilogueDReLUBGrad: "DReLUBGrad", cublas.EpilogueBGradB: "BGradB", 0: "Epilogue(0)", 3: "Epilogue(3)",
	} {
		assert.Equal(t, want, e.String())
	}
	seen := map[string]bool{}
	for _, e := range []cublas.Epilogue{cublas.EpilogueNone, cublas.EpilogueReLU, cublas.EpilogueBias, cublas.EpilogueReLUBias,
		cublas.EpilogueGELU, cublas.EpilogueGELUBias, cublas.EpilogueReLUAux, cublas.EpilogueReLUAuxBias, cublas.EpilogueDReLU,
		cublas.EpilogueDReLUBGrad, cublas.EpilogueGELUAux, cublas.EpilogueGELUAuxBias, cublas.EpilogueDGELU,
		cublas.EpilogueDGELUBGrad, cublas.EpilogueBGradA, cublas.EpilogueBGradB} {
		s := e.String()
		assert.NotContains(t, s, "Epilogue(", "%d has a name", int32(e))
		assert.False(t, seen[s], "%s named twice", s)
		seen[s] = true
	}
}
