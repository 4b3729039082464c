package cheader

import "testing"

func TestTryReal(t *testing.T) {
	h, err := LoadDir("/work/shared/cuda-include/13.0")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range h.CUDA.TypedefOrder {
		if len(name) > 4 && name[:4] == "PFN_" {
			n++
		}
	}
	t.Logf("typedefs %d pfn %d records %d enums %d nvrtc funcs %d", len(h.CUDA.Typedefs), n, len(h.CUDA.Records), len(h.CUDA.Enums), len(h.NVRTC.Funcs))
}
