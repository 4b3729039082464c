package cheader

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// CUBLAS is the parse of cuBLAS's cublas_api.h and cublasLt.h (with
// library_types.h, which both use), and the name mapping of cublas_v2.h.
type CUBLAS struct {
	File *File
	PP   *Preprocessor // macros seen in library_types.h, cublas_api.h and cublasLt.h
	// V2 is cublas_v2.h's mapping from the name C code calls to the
	// symbol the library exports: cublasSgemm → cublasSgemm_v2.
	V2 map[string]string
	// LtFirst is the index in File.Funcs of cublasLt.h's first function:
	// the ones before it are cublas_api.h's.
	LtFirst int
	// HalfBlocks is how many of cublas_api.h's "#if defined(__cplusplus)"
	// blocks were read as C (see CUBLASPrelude).
	HalfBlocks int
}

// CUBLASPrelude declares what cublas_api.h and cublasLt.h take from headers
// the preprocessor does not read: cudaStream_t (driver_types.h), the
// complex types (cuComplex.h, on vector_types.h's float2 and double2),
// FILE (stdio.h), and the half types __half and __nv_bfloat16
// (cuda_fp16.h and cuda_bf16.h, C++ headers). The half types are stubbed
// as their storage, two bytes each: cuBLAS takes them only by pointer.
// cublas_api.h declares its functions on half types in blocks guarded by
// "#if defined(__cplusplus)" only because those types are C++; with the
// stubs such a block, when it holds declarations alone, is read as C.
const CUBLASPrelude = `typedef struct CUstream_st *cudaStream_t;
typedef struct _IO_FILE FILE;
typedef struct float2 { _Alignas(8) float x; float y; } float2;
typedef struct double2 { _Alignas(16) double x; double y; } double2;
typedef float2 cuFloatComplex;
typedef double2 cuDoubleComplex;
typedef cuFloatComplex cuComplex;
typedef struct __half { unsigned short x; } __half;
typedef struct __nv_bfloat16 { unsigned short x; } __nv_bfloat16;
`

// cplusplusIf is the line opening a block of C++-only code.
var cplusplusIf = regexp.MustCompile(`(?m)^#if defined\(__cplusplus\)[ \t]*$`)

// EnableHalfBlocks rewrites each "#if defined(__cplusplus)" block of src
// that holds only declarations (no nested directive, no brace: not
// extern "C" { nor an inline function's body) to "#if 1", and returns the
// text and how many it rewrote. Lines are kept, so positions hold.
func EnableHalfBlocks(src string) (string, int) {
	var b strings.Builder
	n, last := 0, 0
	for _, loc := range cplusplusIf.FindAllStringIndex(src, -1) {
		if loc[0] < last {
			continue
		}
		body := src[loc[1]:]
		end := strings.Index(body, "\n#")
		if end < 0 || !strings.HasPrefix(body[end+1:], "#endif") || strings.ContainsAny(body[:end], "{}") {
			continue
		}
		b.WriteString(src[last:loc[0]])
		b.WriteString("#if 1")
		last = loc[1]
		n++
	}
	b.WriteString(src[last:])
	return b.String(), n
}

// v2Define is one "#define cublasX cublasX_v2" of cublas_v2.h.
var v2Define = regexp.MustCompile(`(?m)^#define[ \t]+(cublas[A-Za-z0-9_]*)[ \t]+(cublas[A-Za-z0-9_]*)[ \t]*$`)

// LoadCUBLAS parses library_types.h, cublas_api.h, cublasLt.h and
// cublas_v2.h from dir.
func LoadCUBLAS(dir string) (*CUBLAS, error) {
	texts := map[string]string{}
	for _, name := range []string{"library_types.h", "cublas_api.h", "cublasLt.h", "cublas_v2.h"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		texts[name] = string(b)
	}
	return ParseCUBLAS(texts["library_types.h"], texts["cublas_api.h"], texts["cublasLt.h"], texts["cublas_v2.h"])
}

// ParseCUBLAS parses the texts of library_types.h, cublas_api.h,
// cublasLt.h and cublas_v2.h.
func ParseCUBLAS(libraryTypes, api, lt, v2 string) (*CUBLAS, error) {
	c := &CUBLAS{File: NewFile(), PP: NewPreprocessor(Predefined()), V2: map[string]string{}}
	api, c.HalfBlocks = EnableHalfBlocks(api)
	for _, s := range []struct{ name, text string }{
		{"<prelude>", CUBLASPrelude}, {"library_types.h", libraryTypes}, {"cublas_api.h", api}, {"cublasLt.h", lt},
	} {
		if s.name == "cublasLt.h" {
			c.LtFirst = len(c.File.Funcs)
		}
		toks, err := c.PP.Run(s.name, s.text)
		if err != nil {
			return nil, err
		}
		if err := c.File.Parse(toks); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	text, err := stripComments(v2)
	if err != nil {
		return nil, fmt.Errorf("cublas_v2.h: %w", err)
	}
	for _, m := range v2Define.FindAllStringSubmatch(text, -1) {
		c.V2[m[1]] = m[2]
	}
	return c, nil
}
