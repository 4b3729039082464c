package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/purecuda/cuda/internal/gen/cheader"
)

// reexport describes a C enum that package driver declares as its own Go
// type (users cannot reach internal/cu, and go doc shows driver's constants
// only when driver declares them).
type reexport struct {
	cType    string // C enum type, e.g. CUdevice_attribute
	goType   string // driver's type, e.g. DeviceAttribute
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

// driverConstants writes driver/zconst.go: driver's own types for the
// re-exported enums, with their values (each commented with its C name) and
// a String method, and an Err constant of type Status (declared in
// driver/errors.go) for every CUresult but CUDA_SUCCESS. The file names no
// internal package, so go doc shows driver's names and values.
func driverConstants(h *cheader.Headers, hdr string) ([]byte, error) {
	var w bytes.Buffer
	enums := map[string]*cheader.EnumDef{}
	for _, e := range h.CUDA.Enums {
		if e.Name != "" {
			enums[e.Name] = e
		}
	}
	imports := map[string]bool{}
	for _, r := range driverReexports {
		e, ok := enums[r.cType]
		if !ok {
			continue // a header set without it
		}
		fmt.Fprintf(&w, "// %s is %s (the C enum %s).\ntype %s %s\n\n", r.goType, r.doc, r.cType, r.goType, e.GoKind())
		fmt.Fprintf(&w, "// Values of %s.\nconst (\n", r.goType)
		type value struct {
			name string
			v    int64
		}
		var values []value
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
			values = append(values, value{name, v.Value})
			fmt.Fprintf(&w, "\t%s %s = %d // %s\n", name, r.goType, v.Value, v.Name)
		}
		fmt.Fprintf(&w, ")\n\n")
		if len(values) == 0 {
			return nil, fmt.Errorf("re-export: enum %s has no value starting with %s", r.cType, r.cPrefix)
		}
		fmt.Fprintf(&w, "// String returns the name of the constant, e.g. %q.\nfunc (v %s) String() string {\n\tswitch v {\n", values[0].name, r.goType)
		seenValue := map[int64]bool{}
		for _, v := range values {
			if seenValue[v.v] {
				continue // an alias: the first name wins
			}
			seenValue[v.v] = true
			fmt.Fprintf(&w, "\tcase %s:\n\t\treturn %q\n", v.name, v.name)
		}
		fmt.Fprintf(&w, "\t}\n\treturn %q + strconv.FormatInt(int64(v), 10) + \")\"\n}\n\n", r.goType+"(")
		imports["strconv"] = true
	}
	res := enums["CUresult"]
	if res == nil {
		return nil, fmt.Errorf("re-export: no enum CUresult")
	}
	fmt.Fprintf(&w, "// Every CUresult but CUDA_SUCCESS as a Status: an error value, for errors.Is.\nconst (\n")
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
		fmt.Fprintf(&w, "\t%s Status = %d // %s\n", name, v.Value, v.Name)
	}
	fmt.Fprintf(&w, ")\n")
	return assemble(hdr, "driver", imports, w.Bytes())
}
