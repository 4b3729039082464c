package driver

import (
	"os"
	"testing"
)

// BenchmarkImageCheck times the image check alone on a real CUBIN
// ($PURECUDA_IMAGE_BENCH, or the corpus's sm_90 CUBINs): what it adds to
// every LoadModule and LoadLibrary (BenchmarkLoadCubin on a GPU).
func BenchmarkImageCheck(b *testing.B) {
	imgs := map[string][]byte{}
	if p := os.Getenv("PURECUDA_IMAGE_BENCH"); p != "" {
		img, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		imgs["file"] = img
	} else {
		c := readCorpus(b)
		imgs["plain"], imgs["rich"] = c["sm_90_plain.cubin"], c["sm_90_rich.cubin"]
	}
	for name, img := range imgs {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := checkImage(img); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
