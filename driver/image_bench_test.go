package driver_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/nvrtc"
)

// The cost of loading a real CUBIN (imageSrc, for the device), the image
// check included: LoadModule and LoadLibrary, each load timed alone (the
// unload is not).
func BenchmarkLoadCubin(b *testing.B) {
	e, _ := setup(b)
	res, err := nvrtc.Compile(imageSrc, nvrtc.Options{Arch: e.dev.Arch()})
	require.NoError(b, err)
	img := res.CUBIN
	b.Run("module", func(b *testing.B) {
		for b.Loop() {
			m, err := e.ctx.LoadModule(img)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			require.NoError(b, m.Close())
			b.StartTimer()
		}
	})
	b.Run("library", func(b *testing.B) {
		for b.Loop() {
			l, err := driver.LoadLibrary(img)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			require.NoError(b, l.Close())
			b.StartTimer()
		}
	})
}
