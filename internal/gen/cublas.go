package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/purecuda/cuda/internal/gen/cheader"
)

// cublasPkg is where cuBLAS's and cuBLASLt's raw table goes, relative to
// the module root.
const cublasPkg = "internal/cublasraw"

// cublasDefaultInclude is the headers' directory relative to the module
// root when neither the flag nor the environment names one: the copy
// shared beside the checkout.
var cublasDefaultInclude = filepath.Join("..", "shared", "cuda-include", "13.0")

// cublasIncludeDir picks the directory of cublas_api.h, cublasLt.h,
// cublas_v2.h and library_types.h: the flag, then
// $PURECUDA_CUBLAS_INCLUDE, then cublasDefaultInclude under root.
func cublasIncludeDir(flagValue, root string) (string, error) {
	return firstDirWith("cublas_api.h", []string{flagValue, os.Getenv("PURECUDA_CUBLAS_INCLUDE"), filepath.Join(root, cublasDefaultInclude)},
		"no cublas_api.h found (tried %s); pass -cublas-include, or -only cuda or -only nccl to leave the cuBLAS table alone")
}

// cublasLeftOut are the functions of cublas_api.h and cublasLt.h not
// bound, and why.
var cublasLeftOut = map[string]string{
	"cublasXerbla": "cuBLAS's own reporter of a bad argument (it prints a message), not an entry point for callers",
}

// cublasTypeName is the Go name of a C type of the cuBLAS headers: the
// "cublas" prefix and "_t" suffix dropped (cublasHandle_t is Handle,
// cublasLtMatmulDesc_t LtMatmulDesc); the CUDA library types keep "Cuda"
// (cudaDataType is CudaDataType, so that cublasDataType_t, DataType, can
// name it), and their duplicate "_t" spellings are not emitted;
// cudaStream_t is Stream, the driver's CUstream; cuComplex is Complex.
func cublasTypeName(n string) string {
	switch {
	case n == "cudaStream_t":
		return "Stream"
	case strings.HasPrefix(n, "cublas") && len(n) > 6:
		return capitalize(strings.TrimSuffix(n[6:], "_t"))
	case strings.HasPrefix(n, "cuda") && len(n) > 4:
		if strings.HasSuffix(n, "_t") {
			return ""
		}
		return "Cuda" + capitalize(n[4:])
	case n == "libraryPropertyType":
		return "LibraryPropertyType"
	case n == "cuFloatComplex", n == "cuDoubleComplex", n == "cuComplex":
		return capitalize(n[2:])
	case n == "float2", n == "double2":
		return capitalize(n)
	case n == "__half":
		return "Half"
	case n == "__nv_bfloat16":
		return "Bfloat16"
	}
	return ""
}

// cublasIntAddresses are the names of int parameters that hold device
// addresses (pivots, per-matrix infos) or, by the pointer mode, either a
// device or a host address (a reduction's result).
var cublasIntAddresses = map[string]bool{"info": true, "P": true, "devIpiv": true, "devInfoArray": true, "result": true}

// cublasAddress reports the pointer parameters bound as uintptr: those
// to elements (float, double, the complex and half types, at any depth
// of pointer: the batched calls' arrays of matrices), which name device
// memory, or scalars that the pointer mode puts in device or host memory,
// and the int pointers of cublasIntAddresses. void* is a uintptr anyway.
// Pointers to handles, enums, structs and other ints stay Go pointers:
// they are host memory the call writes (an out-parameter).
func cublasAddress(_, name string, t *cheader.Type) bool {
	rt := t.Resolve()
	if rt.Kind != cheader.Pointer {
		return false
	}
	for rt.Kind == cheader.Pointer {
		rt = rt.Elem.Resolve()
	}
	switch rt.Kind {
	case cheader.Float:
		return true
	case cheader.Record:
		return rt.Rec.Complete && cublasTypeName(rt.Rec.Name) != "" && !strings.HasPrefix(rt.Rec.Name, "cublas")
	case cheader.Int:
		return cublasIntAddresses[name]
	}
	return false
}

// cublasFuncName is the Go name of a function: the name C code calls
// (cublas_v2.h maps cublasSgemm to the export cublasSgemm_v2) without the
// "cublas" prefix: Sgemm, Sgemm_64, GemmEx, LtMatmul.
func cublasFuncName(export string, callName map[string]string) string {
	n := export
	if c, ok := callName[export]; ok {
		n = c
	}
	return strings.TrimPrefix(n, "cublas")
}

// cublasBindings lists the functions to bind from fns, the ones left out on
// purpose, and how many are bound under a _v2 export.
func cublasBindings(fns []*cheader.Func, callName map[string]string) (bs []binding, out []leftOut, v2 int) {
	for _, fn := range fns {
		switch {
		case cublasLeftOut[fn.Name] != "":
			out = append(out, leftOut{fn.Name, cublasLeftOut[fn.Name]})
		case fn.Static:
			out = append(out, leftOut{fn.Name, "static inline in the header: compiled into its callers, not exported (its _internal function is bound)"})
		case strings.HasPrefix(fn.Name, "cublas"):
			if _, ok := callName[fn.Name]; ok {
				v2++
			}
			bs = append(bs, binding{CName: fn.Name, GoName: cublasFuncName(fn.Name, callName), Export: fn.Name, Fn: fn, Newest: true})
		}
	}
	return bs, out, v2
}

// cublasVersion is cublas_api.h's version, "13.1.0.3".
func cublasVersion(pp *cheader.Preprocessor) string {
	var parts []string
	for _, m := range []string{"CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH", "CUBLAS_VER_BUILD"} {
		toks, err := pp.ExpandMacro(m)
		if err != nil || len(toks) != 1 {
			return "unknown"
		}
		parts = append(parts, toks[0].Text)
	}
	return strings.Join(parts, ".")
}

const cublasHeader = "// go run ./internal/gen\n// Code generated by the command above from cuBLAS %s's cublas_api.h, cublas_v2.h and cublasLt.h; DO NOT EDIT.\n\n"

// cublasFuncs emits one library's functions: each binding, or the reason
// it is left out, then the "not bound, and why" list and the proc table
// named table. It returns the bound ones and what was left out.
func cublasFuncs(e *emitter, w *bytes.Buffer, lib, table string, bindings []binding, left []leftOut) ([]binding, []leftOut, error) {
	var bound []binding
	for _, b := range bindings {
		var one bytes.Buffer
		saved := map[string]bool{}
		for k, v := range e.imports {
			saved[k] = v
		}
		if err := e.function(&one, b); err != nil {
			e.imports = saved
			left = append(left, leftOut{b.CName, strings.TrimPrefix(err.Error(), b.CName+": ")})
			continue
		}
		w.Write(one.Bytes())
		bound = append(bound, b)
	}
	fmt.Fprintf(w, "// Functions of %s not bound, and why:\n//\n", lib)
	if len(left) == 0 {
		fmt.Fprintf(w, "//   - none\n")
	}
	for _, l := range left {
		fmt.Fprintf(w, "//   - %s: %s\n", l.name, l.reason)
	}
	w.WriteString("\n")
	procTableNamed(w, table, bound)
	return bound, left, nil
}

// generateCUBLAS returns cuBLAS's and cuBLASLt's raw table by path and a
// coverage summary. A function whose signature the generator cannot lower
// is left out with the reason, as the ones in cublasLeftOut are; the
// reasons are written into zfuncs.go and zltfuncs.go.
func generateCUBLAS(c *cheader.CUBLAS) (map[string][]byte, string, error) {
	nameRecords(c.File)
	version := cublasVersion(c.PP)
	hdr := fmt.Sprintf(cublasHeader, version)
	e := &emitter{f: c.File, pp: c.PP, pkg: "cublasraw", result: "Status", imports: map[string]bool{},
		rename: cublasTypeName, voidPtr: "uintptr", structFrames: true, address: cublasAddress}
	out := map[string][]byte{}
	var types bytes.Buffer
	if err := e.typedefs(&types); err != nil {
		return nil, "", err
	}
	e.constants(&types, "CUBLAS_", "CUBLASLT_")
	src, err := assemble(hdr, "cublasraw", e.imports, types.Bytes())
	if err != nil {
		return nil, "", fmt.Errorf("cublasraw ztypes.go: %w", err)
	}
	out[cublasPkg+"/ztypes.go"] = src

	callName := map[string]string{}
	for call, export := range c.V2 {
		callName[export] = call
	}
	declared := map[string]bool{}
	for _, fn := range c.File.Funcs {
		declared[fn.Name] = true
	}
	// cublas_v2.h also maps names to exports that cublas_api.h never
	// declares (cublasSrotg_64: rotg has no dimension to widen); they are
	// listed, not bound.
	var unknown []string
	for call, export := range c.V2 {
		if !declared[export] {
			unknown = append(unknown, call+" → "+export)
		}
	}
	sort.Strings(unknown)

	type set struct {
		file, lib, table string
		fns              []*cheader.Func
	}
	var summaries []string
	maxArgs, maxName := 0, ""
	for _, s := range []set{
		{"zfuncs.go", "cublas_api.h", "procs", c.File.Funcs[:c.LtFirst]},
		{"zltfuncs.go", "cublasLt.h", "ltProcs", c.File.Funcs[c.LtFirst:]},
	} {
		bindings, left, v2 := cublasBindings(s.fns, callName)
		e.imports = map[string]bool{}
		if s.table == "ltProcs" {
			e.procFields = ", lt: true"
		}
		var funcs bytes.Buffer
		if s.table == "procs" && len(unknown) > 0 {
			fmt.Fprintf(&funcs, "// cublas_v2.h maps these names to functions that cublas_api.h does not\n// declare; they are not bound:\n//\n")
			for _, u := range unknown {
				fmt.Fprintf(&funcs, "//   - %s\n", u)
			}
			funcs.WriteString("\n")
		}
		bound, left, err := cublasFuncs(e, &funcs, s.lib, s.table, bindings, left)
		if err != nil {
			return nil, "", err
		}
		src, err := assemble(hdr, "cublasraw", e.imports, funcs.Bytes())
		if err != nil {
			return nil, "", fmt.Errorf("cublasraw %s: %w", s.file, err)
		}
		out[cublasPkg+"/"+s.file] = src
		for _, b := range bound {
			if n := len(b.Fn.Params); n > maxArgs {
				maxArgs, maxName = n, b.CName
			}
		}
		var names []string
		for _, l := range left {
			names = append(names, l.name)
		}
		leftText := "none"
		if len(names) > 0 {
			leftText = strings.Join(names, ", ")
		}
		summaries = append(summaries, fmt.Sprintf("%d/%d %s functions (%d under a _v2 export; left out: %s)",
			len(bound), len(bound)+len(left), s.lib, v2, leftText))
	}
	e.procFields = ""

	var lay bytes.Buffer
	e.layoutTable(&lay)
	src, err = assemble(hdr, "cublasraw_test", map[string]bool{"unsafe": true, "github.com/purecuda/cuda/" + cublasPkg: true}, lay.Bytes())
	if err != nil {
		return nil, "", fmt.Errorf("cublasraw zlayout_test.go: %w", err)
	}
	out[cublasPkg+"/zlayout_test.go"] = src

	summary := fmt.Sprintf("bound %s of cuBLAS %s; %d structs; %d C++-only blocks of half-type declarations read as C; most arguments: %d (%s)",
		strings.Join(summaries, " and "), version, len(e.layouts), c.HalfBlocks, maxArgs, maxName)
	return out, summary, nil
}
