// Command gen writes purecuda's raw tables from NVIDIA's headers:
// internal/cu, internal/rtc and driver/zconst.go from cuda.h,
// cudaTypedefs.h and nvrtc.h (the CUDA set), internal/ncclraw from
// nccl.h (the NCCL set), and internal/cublasraw from cublas_api.h,
// cublas_v2.h, cublasLt.h and library_types.h (the cuBLAS set).
//
// Usage:
//
//	go run ./internal/gen [-include DIR] [-nccl-include DIR] [-cublas-include DIR] [-only cuda|nccl|cublas] [-root DIR] [-check]
//
// -include defaults to $PURECUDA_CUDA_INCLUDE, then $CUDA_PATH/include, then
// /usr/local/cuda/include. -nccl-include defaults to $PURECUDA_NCCL_INCLUDE,
// then ../shared/nccl-include/2.28 beside the module root; -cublas-include
// to $PURECUDA_CUBLAS_INCLUDE, then ../shared/cuda-include/13.0. Every set
// is written unless -only names one; a set whose headers are not found is
// an error. With -check nothing is written: the command fails when a
// checked-in file differs from what it would write.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/purecuda/cuda/internal/gen/cheader"
)

func main() {
	include := flag.String("include", "", "directory holding cuda.h, cudaTypedefs.h and nvrtc.h")
	ncclInclude := flag.String("nccl-include", "", "directory holding nccl.h")
	cublasInclude := flag.String("cublas-include", "", "directory holding cublas_api.h, cublas_v2.h, cublasLt.h and library_types.h")
	only := flag.String("only", "", "the one set to write or check: cuda, nccl or cublas (all when empty)")
	root := flag.String("root", ".", "module root to write into")
	check := flag.Bool("check", false, "compare with the files on disk instead of writing")
	flag.Parse()
	if err := run(options{include: *include, ncclInclude: *ncclInclude, cublasInclude: *cublasInclude, only: *only, root: *root, check: *check}); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// includeDir picks the header directory.
func includeDir(flagValue string) (string, error) {
	cands := []string{flagValue, os.Getenv("PURECUDA_CUDA_INCLUDE")}
	if p := os.Getenv("CUDA_PATH"); p != "" {
		cands = append(cands, filepath.Join(p, "include"))
	}
	cands = append(cands, "/usr/local/cuda/include")
	return firstDirWith("cudaTypedefs.h", cands, "no CUDA headers found (tried %s); pass -include, or -only nccl to leave the CUDA tables alone")
}

// firstDirWith is the first of cands (empty ones passed over) that holds
// header, or an error made from failure with the places tried.
func firstDirWith(header string, cands []string, failure string) (string, error) {
	var tried []string
	for _, c := range cands {
		if c == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(c, header)); err == nil {
			return c, nil
		}
		tried = append(tried, c)
	}
	return "", fmt.Errorf(failure, strings.Join(tried, ", "))
}

// options are the command's flags.
type options struct {
	include, ncclInclude, cublasInclude, only, root string
	check                                           bool
}

// generateSets generates the sets opts asks for, each from its headers.
func generateSets(opts options) (map[string][]byte, []string, error) {
	if opts.only != "" && opts.only != "cuda" && opts.only != "nccl" && opts.only != "cublas" {
		return nil, nil, fmt.Errorf("-only %q: want cuda, nccl or cublas", opts.only)
	}
	files := map[string][]byte{}
	var summaries []string
	if opts.only == "" || opts.only == "cuda" {
		dir, err := includeDir(opts.include)
		if err != nil {
			return nil, nil, err
		}
		h, err := cheader.LoadDir(dir)
		if err != nil {
			return nil, nil, err
		}
		out, summary, err := generate(h)
		if err != nil {
			return nil, nil, err
		}
		for n, src := range out {
			files[n] = src
		}
		summaries = append(summaries, summary)
	}
	if opts.only == "" || opts.only == "nccl" {
		dir, err := ncclIncludeDir(opts.ncclInclude, opts.root)
		if err != nil {
			return nil, nil, err
		}
		n, err := cheader.LoadNCCL(dir)
		if err != nil {
			return nil, nil, err
		}
		out, summary, err := generateNCCL(n)
		if err != nil {
			return nil, nil, err
		}
		for n, src := range out {
			files[n] = src
		}
		summaries = append(summaries, summary)
	}
	if opts.only == "" || opts.only == "cublas" {
		dir, err := cublasIncludeDir(opts.cublasInclude, opts.root)
		if err != nil {
			return nil, nil, err
		}
		c, err := cheader.LoadCUBLAS(dir)
		if err != nil {
			return nil, nil, err
		}
		out, summary, err := generateCUBLAS(c)
		if err != nil {
			return nil, nil, err
		}
		for n, src := range out {
			files[n] = src
		}
		summaries = append(summaries, summary)
	}
	return files, summaries, nil
}

func run(opts options) error {
	files, summaries, err := generateSets(opts)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var stale []string
	for _, n := range names {
		path := filepath.Join(opts.root, n)
		if opts.check {
			old, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(old, files[n]) {
				stale = append(stale, n)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[n], 0o644); err != nil {
			return err
		}
	}
	for _, s := range summaries {
		fmt.Println(s)
	}
	if len(stale) > 0 {
		return fmt.Errorf("generated files are not current: %s (run go generate ./...)", strings.Join(stale, ", "))
	}
	if opts.check {
		fmt.Printf("%d generated files are current\n", len(names))
	}
	return nil
}

const header = "// go run ./internal/gen\n// Code generated by the command above from the CUDA %s headers; DO NOT EDIT.\n\n"

// generate returns the generated files by path and a coverage summary.
func generate(h *cheader.Headers) (map[string][]byte, string, error) {
	nameRecords(h.CUDA)
	cudaVersion := fmt.Sprint(h.CUDA.EnumConsts["CUDA_VERSION"])
	if toks, err := h.CUDAPP.ExpandMacro("CUDA_VERSION"); err == nil && len(toks) == 1 {
		cudaVersion = toks[0].Text
	}
	hdr := fmt.Sprintf(header, cudaVersion)
	out := map[string][]byte{}

	// Driver API.
	cu := &emitter{f: h.CUDA, pp: h.CUDAPP, pkg: "cu", result: "CUresult", imports: map[string]bool{},
		rename: func(n string) string {
			if n != "" && n[0] >= 'A' && n[0] <= 'Z' {
				return n
			}
			return ""
		}}
	var types bytes.Buffer
	if err := cu.typedefs(&types); err != nil {
		return nil, "", err
	}
	cu.constants(&types, "CU_", "CUDA_")
	src, err := assemble(hdr, "cu", cu.imports, types.Bytes())
	if err != nil {
		return nil, "", fmt.Errorf("ztypes.go: %w", err)
	}
	out["internal/cu/ztypes.go"] = src

	bindings, total, err := driverBindings(h)
	if err != nil {
		return nil, "", err
	}
	cu.imports = map[string]bool{}
	var funcs bytes.Buffer
	names := map[string]bool{}
	for _, b := range bindings {
		if err := cu.function(&funcs, b); err != nil {
			return nil, "", err
		}
		names[b.CName] = true
	}
	procTable(&funcs, bindings)
	src, err = assemble(hdr, "cu", cu.imports, funcs.Bytes())
	if err != nil {
		return nil, "", fmt.Errorf("zfuncs.go: %w", err)
	}
	out["internal/cu/zfuncs.go"] = src

	var lay bytes.Buffer
	cu.layoutTable(&lay)
	src, err = assemble(hdr, "cu_test", map[string]bool{"unsafe": true, "github.com/purecuda/cuda/internal/cu": true}, lay.Bytes())
	if err != nil {
		return nil, "", fmt.Errorf("zlayout_test.go: %w", err)
	}
	out["internal/cu/zlayout_test.go"] = src

	src, err = driverConstants(h, hdr)
	if err != nil {
		return nil, "", fmt.Errorf("driver/zconst.go: %w", err)
	}
	out["driver/zconst.go"] = src

	// NVRTC.
	rtc := &emitter{f: h.NVRTC, pp: h.NVRTCPP, pkg: "rtc", result: "Result", imports: map[string]bool{},
		rename: func(n string) string {
			if strings.HasPrefix(n, "nvrtc") && len(n) > 5 {
				return capitalize(n[5:])
			}
			return ""
		}}
	types.Reset()
	if err := rtc.typedefs(&types); err != nil {
		return nil, "", err
	}
	src, err = assemble(hdr, "rtc", rtc.imports, types.Bytes())
	if err != nil {
		return nil, "", fmt.Errorf("rtc ztypes.go: %w", err)
	}
	out["internal/rtc/ztypes.go"] = src
	rtc.imports = map[string]bool{}
	funcs.Reset()
	nv := nvrtcBindings(h)
	for _, b := range nv {
		if err := rtc.function(&funcs, b); err != nil {
			return nil, "", err
		}
	}
	procTable(&funcs, nv)
	src, err = assemble(hdr, "rtc", rtc.imports, funcs.Bytes())
	if err != nil {
		return nil, "", fmt.Errorf("rtc zfuncs.go: %w", err)
	}
	out["internal/rtc/zfuncs.go"] = src

	summary := fmt.Sprintf("bound %d/%d driver functions (%d entry points with older ABIs; %d graphics-interop functions left out), %d/%d nvrtc functions, %d structs and unions",
		len(names), total, len(bindings), countGraphics(h), len(nv), len(h.NVRTC.Funcs), len(cu.layouts))
	return out, summary, nil
}

func countGraphics(h *cheader.Headers) int {
	seen := map[string]bool{}
	for _, n := range h.CUDA.TypedefOrder {
		if m := pfnRE.FindStringSubmatch(n); m != nil && graphicsInterop(m[1]) {
			seen[m[1]] = true
		}
	}
	return len(seen)
}

func procTable(w *bytes.Buffer, bs []binding) { procTableNamed(w, "procs", bs) }

// procTableNamed writes the table of bs's entry points as the variable name.
func procTableNamed(w *bytes.Buffer, name string, bs []binding) {
	fmt.Fprintf(w, "// %s lists every bound entry point, for resolution checks.\nvar %s = []*proc{\n", name, name)
	for _, b := range bs {
		fmt.Fprintf(w, "\t&proc%s,\n", b.GoName)
	}
	fmt.Fprintf(w, "}\n")
}

func assemble(hdr, pkg string, imports map[string]bool, body []byte) ([]byte, error) {
	var w bytes.Buffer
	w.WriteString(hdr)
	fmt.Fprintf(&w, "package %s\n\n", pkg)
	if len(imports) > 0 {
		var list []string
		for imp := range imports {
			list = append(list, imp)
		}
		sort.Strings(list)
		w.WriteString("import (\n")
		for _, imp := range list {
			fmt.Fprintf(&w, "\t%q\n", imp)
		}
		w.WriteString(")\n\n")
	}
	w.Write(body)
	src, err := format.Source(w.Bytes())
	if err != nil {
		return nil, err
	}
	return src, nil
}
