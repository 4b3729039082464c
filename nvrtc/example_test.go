package nvrtc_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/purecuda/cuda/nvrtc"
)

// Compile a templated kernel and find its mangled name.
func ExampleCompile() {
	res, err := nvrtc.Compile(`
template <typename T> __global__ void scale(T* x, T k) { x[threadIdx.x] *= k; }
`, nvrtc.Options{
		Arch:            "sm_90",
		Std:             "c++17",
		NameExpressions: []string{"scale<float>"},
	})
	var ce *nvrtc.CompileError
	switch {
	case errors.As(err, &ce):
		log.Fatalf("does not compile:\n%s", ce.Log)
	case err != nil:
		log.Fatal(err) // e.g. no libnvrtc: the message lists where it looked
	}
	fmt.Println(len(res.CUBIN) > 0, res.LoweredNames["scale<float>"])
}

func ExampleOptions_Args() {
	args, _ := nvrtc.Options{Arch: "compute_90", Std: "c++17", Defines: map[string]string{"N": "4"}, LineInfo: true}.Args()
	fmt.Println(args)
	// Output: [-arch=compute_90 -std=c++17 -DN=4 -lineinfo]
}
