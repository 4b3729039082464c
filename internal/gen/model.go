package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/purecuda/cuda/internal/gen/cheader"
)

// binding is one C function the generator binds.
type binding struct {
	CName  string // cuMemAlloc
	GoName string // MemAlloc or MemAlloc_v3020
	ABI    int    // 3020; 0 for NVRTC
	Export string // dlsym fallback name, "" if unknown
	Fn     *cheader.Func
	Newest bool
}

var pfnRE = regexp.MustCompile(`^PFN_(cu[A-Za-z0-9]+)_v([0-9]+)(_ptsz|_ptds)?$`)

// graphicsInterop reports the functions left out on purpose: OpenGL/D3D/VDPAU
// interop needs a graphics API this project does not bind.
func graphicsInterop(name string) bool { return strings.HasPrefix(name, "cuGraphics") }

// driverBindings chooses, from cudaTypedefs.h, the driver functions to bind:
// every function at its newest ABI, plus every older ABI of functions whose
// newest ABI needs a driver newer than 12.0.
func driverBindings(h *cheader.Headers) ([]binding, int, error) {
	type ver struct {
		abi int
		fn  *cheader.Func
	}
	versions := map[string][]ver{}
	collect := func(f *cheader.File, onlyNew bool) error {
		for _, name := range f.TypedefOrder {
			m := pfnRE.FindStringSubmatch(name)
			if m == nil || m[3] != "" {
				continue
			}
			if onlyNew {
				if _, ok := versions[m[1]]; ok {
					continue
				}
			}
			t := f.Typedefs[name].Elem
			if t.Kind != cheader.Pointer || t.Elem.Kind != cheader.FuncType {
				return fmt.Errorf("%s is not a function pointer", name)
			}
			abi, _ := strconv.Atoi(m[2])
			fn := *t.Elem.Fn
			fn.Name = m[1]
			versions[m[1]] = append(versions[m[1]], ver{abi, &fn})
		}
		return nil
	}
	if err := collect(h.CUDA, false); err != nil {
		return nil, 0, err
	}
	public := map[string]bool{}
	for k := range versions {
		public[k] = true
	}
	// Names that only the internal section declares (cuGraphInstantiate).
	internal := map[string][]ver{}
	abiCount := map[string]int{}
	for _, name := range h.Internal.TypedefOrder {
		m := pfnRE.FindStringSubmatch(name)
		if m == nil || m[3] != "" {
			continue
		}
		abiCount[m[1]]++
		if public[m[1]] {
			continue
		}
		t := h.Internal.Typedefs[name].Elem
		abi, _ := strconv.Atoi(m[2])
		fn := *t.Elem.Fn
		fn.Name = m[1]
		internal[m[1]] = append(internal[m[1]], ver{abi, &fn})
	}
	for k, v := range internal {
		versions[k] = v
	}
	exports := exportNames(h.CUDAPP)
	names := make([]string, 0, len(versions))
	for n := range versions {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []binding
	total := 0
	for _, n := range names {
		if graphicsInterop(n) {
			continue
		}
		total++
		vs := versions[n]
		sort.Slice(vs, func(i, j int) bool { return vs[i].abi > vs[j].abi })
		goBase := strings.TrimPrefix(n, "cu")
		for i, v := range vs {
			if i > 0 && vs[0].abi <= 12000 {
				break
			}
			b := binding{CName: n, GoName: goBase, ABI: v.abi, Fn: v.fn, Newest: i == 0}
			if i > 0 {
				b.GoName = fmt.Sprintf("%s_v%d", goBase, v.abi)
			}
			switch {
			case i == 0 && exports[n] != "":
				b.Export = exports[n]
			case abiCount[n] == 1 && exports[n] == "":
				b.Export = n // one ABI ever: the plain export is that ABI
			}
			out = append(out, b)
		}
	}
	return out, total, nil
}

// exportNames maps a function to the versioned symbol that cuda.h's
// "#define cuX cuX_vN" selects for the newest ABI.
func exportNames(pp *cheader.Preprocessor) map[string]string {
	out := map[string]string{}
	for _, name := range pp.Order {
		if !strings.HasPrefix(name, "cu") {
			continue
		}
		toks, err := pp.ExpandMacro(name)
		if err != nil || len(toks) != 1 || toks[0].Kind != cheader.Ident {
			continue
		}
		if strings.HasPrefix(toks[0].Text, name+"_") {
			out[name] = toks[0].Text
		}
	}
	return out
}

// nvrtcBindings lists every function nvrtc.h declares.
func nvrtcBindings(h *cheader.Headers) []binding {
	var out []binding
	for _, f := range h.NVRTC.Funcs {
		out = append(out, binding{CName: f.Name, GoName: strings.TrimPrefix(f.Name, "nvrtc"), Export: f.Name, Fn: f, Newest: true})
	}
	return out
}

// nameRecords gives every struct and union a Go name and, where C can name
// it, a C expression for the layout test.
func nameRecords(f *cheader.File) {
	for _, r := range f.Records {
		if r.Name == "" && r.Tag != "" {
			r.Name = r.Tag
		}
		anon := 0
		for _, fl := range r.Fields {
			t := fl.Type
			for t.Kind == cheader.Array {
				t = t.Elem
			}
			if t.Kind != cheader.Record || t.Rec.Name != "" {
				continue
			}
			if t.Rec.Tag != "" { // struct CUx_st {...} member;
				t.Rec.Name = t.Rec.Tag
				continue
			}
			if fl.Name == "" {
				t.Rec.Name = fmt.Sprintf("%s_anon%d", r.Name, anon)
				anon++
				continue
			}
			t.Rec.Name = r.Name + "_" + fl.Name
			if r.CExpr != "" {
				t.Rec.CExpr = fmt.Sprintf("__typeof__(((%s*)0)->%s)", r.CExpr, fl.Name)
				if fl.Type.Kind == cheader.Array {
					t.Rec.CExpr = fmt.Sprintf("__typeof__(((%s*)0)->%s[0])", r.CExpr, fl.Name)
				}
			}
		}
	}
}
