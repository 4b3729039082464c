package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/purecuda/cuda/internal/gen/cheader"
)

// reexport describes an enum that package driver re-exports under Go names,
// since users cannot reach internal/cu.
type reexport struct {
	cType    string // C enum type, e.g. CUdevice_attribute
	goType   string // exported alias in driver, e.g. DeviceAttribute
	cPrefix  string // stripped from value names
	goPrefix string // put before the CamelCase rest
	doc      string
}

var driverReexports = []reexport{
	{"CUdevice_attribute", "DeviceAttribute", "CU_DEVICE_ATTRIBUTE_", "Attr", "a device attribute, read with (*Device).Attribute"},
	{"CUfunction_attribute", "FunctionAttribute", "CU_FUNC_ATTRIBUTE_", "FuncAttr", "a kernel attribute, read with (*Function).Attribute"},
	{"CUmemPool_attribute", "MemPoolAttribute", "CU_MEMPOOL_ATTR_", "PoolAttr", "a memory pool attribute"},
	{"CUlimit", "Limit", "CU_LIMIT_", "Limit", "a context limit, read with (*Context).Limit"},
	{"CUfunc_cache", "CacheConfig", "CU_FUNC_CACHE_", "Cache", "a cache preference"},
}

// camel turns MAX_THREADS_PER_BLOCK into MaxThreadsPerBlock.
func camel(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(s), "_") {
		if w == "" {
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// driverConstants writes driver/zconst.go: the re-exported enums and an
// Err value for every CUresult.
func driverConstants(h *cheader.Headers, hdr string) ([]byte, error) {
	var w bytes.Buffer
	enums := map[string]*cheader.EnumDef{}
	for _, e := range h.CUDA.Enums {
		if e.Name != "" {
			enums[e.Name] = e
		}
	}
	for _, r := range driverReexports {
		e, ok := enums[r.cType]
		if !ok {
			continue // a header set without it (the generator's test headers)
		}
		fmt.Fprintf(&w, "// %s is %s (the C enum %s).\ntype %s = cu.%s\n\n", r.goType, r.doc, r.cType, r.goType, r.cType)
		fmt.Fprintf(&w, "// Values of %s.\nconst (\n", r.goType)
		seen := map[string]bool{}
		for _, v := range e.Values {
			if !strings.HasPrefix(v.Name, r.cPrefix) || strings.HasSuffix(v.Name, "_MAX") {
				continue
			}
			name := r.goPrefix + camel(strings.TrimPrefix(v.Name, r.cPrefix))
			if seen[name] {
				continue
			}
			seen[name] = true
			fmt.Fprintf(&w, "\t%s %s = cu.%s\n", name, r.goType, v.Name)
		}
		fmt.Fprintf(&w, ")\n\n")
	}
	res := enums["CUresult"]
	if res == nil {
		return nil, fmt.Errorf("re-export: no enum CUresult")
	}
	fmt.Fprintf(&w, "// Every CUresult as an error value, for errors.Is.\nvar (\n")
	seen := map[int64]bool{}
	for _, v := range res.Values {
		if !strings.HasPrefix(v.Name, "CUDA_ERROR_") || seen[v.Value] {
			continue
		}
		seen[v.Value] = true
		name := "Err" + camel(strings.TrimPrefix(v.Name, "CUDA_ERROR_"))
		if name == "ErrNotSupported" {
			name = "ErrCUDANotSupported" // ErrNotSupported also covers missing entry points
		}
		fmt.Fprintf(&w, "\t%s error = cu.%s\n", name, v.Name)
	}
	fmt.Fprintf(&w, ")\n")
	return assemble(hdr, "driver", map[string]bool{"github.com/purecuda/cuda/internal/cu": true}, w.Bytes())
}
