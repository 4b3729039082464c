package loader_test

import (
	"errors"
	"fmt"

	"github.com/purecuda/cuda/loader"
)

func ExampleDriver() {
	lib, err := loader.Driver()
	if errors.Is(err, loader.ErrNotFound) {
		fmt.Println(err) // lists every candidate and why it failed
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	addr, err := lib.Lookup("cuInit")
	fmt.Println(lib.Path, addr != 0, err)
}

func ExampleNVRTCSpec() {
	spec := loader.NVRTCSpec("windows", "amd64", func(string) string { return `C:\CUDA` })
	fmt.Println(spec.EnvVar, spec.Candidates[0])
	// Output: PURECUDA_LIBNVRTC C:\CUDA\bin\x64\nvrtc64_130_0.dll
}
