package cheader

import (
	"fmt"
	"os"
	"path/filepath"
)

// Predefined are the macros the generator assumes: a 64-bit Linux-like C11
// compiler that is not GCC (so no attributes are produced), without the
// per-thread default stream and without NVIDIA's internal API versioning.
func Predefined() map[string]string {
	return map[string]string{
		"__LP64__":         "1",
		"__STDC_VERSION__": "201112L",
	}
}

// Headers is the parse of the CUDA driver headers and NVRTC.
type Headers struct {
	CUDA    *File         // cuda.h + cudaTypedefs.h
	CUDAPP  *Preprocessor // macros seen in cuda.h + cudaTypedefs.h
	NVRTC   *File
	NVRTCPP *Preprocessor
	// Internal holds the function-pointer typedefs that cudaTypedefs.h
	// declares only under __CUDA_API_VERSION_INTERNAL (older ABIs).
	Internal *File
}

// LoadDir parses cuda.h, cudaTypedefs.h and nvrtc.h from dir.
func LoadDir(dir string) (*Headers, error) {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		return string(b), err
	}
	cudaH, err := read("cuda.h")
	if err != nil {
		return nil, err
	}
	typedefsH, err := read("cudaTypedefs.h")
	if err != nil {
		return nil, err
	}
	nvrtcH, err := read("nvrtc.h")
	if err != nil {
		return nil, err
	}
	h := &Headers{CUDAPP: NewPreprocessor(Predefined()), NVRTCPP: NewPreprocessor(Predefined())}
	h.CUDA = NewFile()
	for _, src := range []struct{ name, text string }{{"cuda.h", cudaH}, {"cudaTypedefs.h", typedefsH}} {
		toks, err := h.CUDAPP.Run(src.name, src.text)
		if err != nil {
			return nil, err
		}
		if err := h.CUDA.Parse(toks); err != nil {
			return nil, fmt.Errorf("%s: %w", src.name, err)
		}
	}
	// The internal section of cudaTypedefs.h: parse it again with the guard
	// defined, keeping only typedef names that the public pass did not see.
	ipp := NewPreprocessor(Predefined())
	ipp.Macros["__CUDA_API_VERSION_INTERNAL"] = &Macro{Name: "__CUDA_API_VERSION_INTERNAL"}
	h.Internal = NewFile()
	for _, src := range []struct{ name, text string }{{"cuda.h", cudaH}, {"cudaTypedefs.h", typedefsH}} {
		toks, err := ipp.Run(src.name, src.text)
		if err != nil {
			return nil, err
		}
		if err := h.Internal.Parse(toks); err != nil {
			return nil, fmt.Errorf("%s (internal): %w", src.name, err)
		}
	}
	h.NVRTC = NewFile()
	toks, err := h.NVRTCPP.Run("nvrtc.h", nvrtcH)
	if err != nil {
		return nil, err
	}
	if err := h.NVRTC.Parse(toks); err != nil {
		return nil, fmt.Errorf("nvrtc.h: %w", err)
	}
	return h, nil
}

// NCCL is the parse of NCCL's nccl.h.
type NCCL struct {
	File *File
	PP   *Preprocessor // macros seen in nccl.h
}

// NCCLPrelude declares what nccl.h takes from the headers it includes,
// which the preprocessor does not read: cudaStream_t (cuda_runtime.h), the
// same handle as the driver's CUstream. It is parsed before nccl.h.
const NCCLPrelude = "typedef struct CUstream_st *cudaStream_t;\n"

// ncclPredefined adds limits.h's INT_MIN, which NCCL_CONFIG_UNDEF_INT names.
func ncclPredefined() map[string]string {
	m := Predefined()
	m["INT_MIN"] = "(-2147483647 - 1)"
	return m
}

// LoadNCCL parses nccl.h from dir.
func LoadNCCL(dir string) (*NCCL, error) {
	src, err := os.ReadFile(filepath.Join(dir, "nccl.h"))
	if err != nil {
		return nil, err
	}
	return ParseNCCL(string(src))
}

// ParseNCCL parses the text of nccl.h.
func ParseNCCL(src string) (*NCCL, error) {
	n := &NCCL{File: NewFile(), PP: NewPreprocessor(ncclPredefined())}
	for _, s := range []struct{ name, text string }{{"<prelude>", NCCLPrelude}, {"nccl.h", src}} {
		toks, err := n.PP.Run(s.name, s.text)
		if err != nil {
			return nil, err
		}
		if err := n.File.Parse(toks); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return n, nil
}
