package loader_test

import (
	"errors"
	"fmt"

	"github.com/purecuda/cuda/loader"
)

func ExampleDriver() {
	lib, err := loader.Driver()
	if errors.Is(err, loader.ErrNotFound) {
		fmt.Println(err) // lists every place tried and why it failed
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	addr, err := lib.Lookup("cuInit")
	fmt.Println(lib.Path, addr != 0, err)
}

func ExampleOpen() {
	lib, err := loader.Open(loader.KindCUBLAS)
	var nf *loader.NotFoundError
	if errors.As(err, &nf) {
		fmt.Printf("no %s: set %s, or pip install nvidia-cublas; tried %d places\n", nf.Library, nf.EnvVar, len(nf.Tried))
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("cuBLAS:", lib.Path)
}

func ExampleKind() {
	for _, k := range []loader.Kind{loader.KindDriver, loader.KindNVRTC, loader.KindNCCL, loader.KindCUBLAS, loader.KindCUBLASLt, loader.KindNVJitLink} {
		fmt.Println(k, k.EnvVar())
	}
	// Output:
	// CUDA driver PURECUDA_LIBCUDA
	// NVRTC PURECUDA_LIBNVRTC
	// NCCL PURECUDA_LIBNCCL
	// cuBLAS PURECUDA_LIBCUBLAS
	// cuBLASLt PURECUDA_LIBCUBLASLT
	// nvJitLink PURECUDA_LIBNVJITLINK
}
