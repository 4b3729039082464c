package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/purecuda/cuda/internal/gen/cheader"
)

// emitter writes the Go declarations for one header set into one package.
type emitter struct {
	f       *cheader.File
	pp      *cheader.Preprocessor
	pkg     string
	rename  func(string) string // C type name → Go type name ("" if not emitted)
	result  string              // Go name of the status enum (CUresult, Result)
	imports map[string]bool
	layouts []layoutEntry
	// constName gives an enum value its Go name (nil: the C name).
	constName func(string) string
	// voidPtr is the Go type of void* ("" for unsafe.Pointer): uintptr
	// where the library's void* are device addresses or opaque handles.
	voidPtr string
	// structFrames passes a large struct by value through a pooled frame
	// (ccall's CallStruct) rather than the package's syscallStructArg.
	structFrames bool
	// procFields are more fields for every proc literal (", lt: true"):
	// which library resolves it, where a package has two.
	procFields string
	// address, when set, picks the pointer parameters bound as uintptr:
	// those that carry device addresses (or either kind, by a mode).
	address func(fn, name string, t *cheader.Type) bool
}

// goConst is the Go name of the enum value named name in C.
func (e *emitter) goConst(name string) string {
	if e.constName == nil {
		return name
	}
	return e.constName(name)
}

// recName is the Go name of a struct or union: its C name, renamed where
// the package renames types.
func (e *emitter) recName(r *cheader.Rec) string {
	if n := e.rename(r.Name); n != "" {
		return n
	}
	return r.Name
}

type layoutEntry struct {
	goName, cExpr string
	fields        [][2]string // Go field, C designator
}

func capitalize(s string) string {
	s = strings.TrimLeft(s, "_")
	if s == "" {
		return "X"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

var goKeywords = map[string]bool{
	"break": true, "case": true, "chan": true, "const": true, "continue": true, "default": true,
	"defer": true, "else": true, "fallthrough": true, "for": true, "func": true, "go": true, "goto": true,
	"if": true, "import": true, "interface": true, "map": true, "package": true, "range": true,
	"return": true, "select": true, "struct": true, "switch": true, "type": true, "var": true,
}

// goType is the Go spelling of a C type.
// opaqueUserData reports whether a void* parameter or field named name (of
// C function fn, or of a struct when fn is "") carries the caller's own
// data back to a callback. Go passes integers there (handle-map ids), so
// it is bound as uintptr: held in a Go pointer, an id would be followed by
// the garbage collector, and an id can look like a heap address.
func opaqueUserData(fn, name string, t *cheader.Type) bool {
	rt := t.Resolve()
	if rt.Kind != cheader.Pointer || rt.Elem.Resolve().Kind != cheader.Void {
		return false
	}
	return name == "userData" || (fn == "cuUserObjectCreate" && name == "ptr")
}

func (e *emitter) goType(t *cheader.Type) (string, error) {
	switch t.Kind {
	case cheader.Named:
		if n := e.rename(t.Name); n != "" {
			return n, nil
		}
		return e.goType(t.Elem)
	case cheader.Int:
		switch t.Name {
		case "char":
			return "byte", nil
		case "size_t", "uintptr_t":
			return "uintptr", nil
		case "intptr_t":
			return "int", nil
		case "_Bool":
			return "bool", nil
		}
		sign := "u"
		if t.Signed {
			sign = ""
		}
		return fmt.Sprintf("%sint%d", sign, t.Size*8), nil
	case cheader.Float:
		return fmt.Sprintf("float%d", t.Size*8), nil
	case cheader.Enum:
		if n := e.rename(t.En.Name); n != "" {
			return n, nil
		}
		if n := e.rename(t.En.Tag); n != "" {
			return n, nil
		}
		return t.En.GoKind(), nil
	case cheader.Record:
		if !t.Rec.Complete {
			return "", fmt.Errorf("incomplete struct %s used by value", t.Rec.Tag)
		}
		return e.recName(t.Rec), nil
	case cheader.Array:
		el, err := e.goType(t.Elem)
		return fmt.Sprintf("[%d]%s", t.Len, el), err
	case cheader.Pointer:
		el := t.Elem.Resolve()
		switch {
		case el.Kind == cheader.Void && e.voidPtr != "":
			return e.voidPtr, nil
		case el.Kind == cheader.Void:
			e.imports["unsafe"] = true
			return "unsafe.Pointer", nil
		case el.Kind == cheader.FuncType:
			return "uintptr", nil
		case el.Kind == cheader.Record && !el.Rec.Complete:
			return "uintptr", nil
		case el.Kind == cheader.Int && el.Size == 1 && t.Elem.Kind != cheader.Named:
			return "*byte", nil
		}
		inner, err := e.goType(t.Elem)
		return "*" + inner, err
	}
	return "", fmt.Errorf("no Go type for C type kind %d", t.Kind)
}

// typedefs emits Go types for the typedefs: handles, scalars, aliases, enums and records.
func (e *emitter) typedefs(w *bytes.Buffer) error {
	emittedRec := map[*cheader.Rec]bool{}
	emittedEnum := map[*cheader.EnumDef]bool{}
	for _, name := range e.f.TypedefOrder {
		goName := e.rename(name)
		if goName == "" || strings.HasPrefix(name, "PFN_") {
			continue
		}
		t := e.f.Typedefs[name].Elem
		switch t.Kind {
		case cheader.Named:
			if target := e.rename(t.Name); target != "" {
				fmt.Fprintf(w, "// %s is the C type %s, the same type as %s.\ntype %s = %s\n\n", goName, name, target, goName, target)
				continue
			}
			gt, err := e.goType(t)
			if err != nil {
				return fmt.Errorf("typedef %s: %w", name, err)
			}
			fmt.Fprintf(w, "// %s is the C type %s.\ntype %s %s\n\n", goName, name, goName, gt)
		case cheader.Int, cheader.Float:
			gt, _ := e.goType(t)
			fmt.Fprintf(w, "// %s is the C type %s.\ntype %s %s\n\n", goName, name, goName, gt)
		case cheader.Pointer:
			el := t.Elem.Resolve()
			if el.Kind == cheader.Record && !el.Rec.Complete || el.Kind == cheader.Record {
				fmt.Fprintf(w, "// %s is the C handle type %s (an opaque pointer owned by the library).\ntype %s uintptr\n\n", goName, name, goName)
				continue
			}
			if el.Kind == cheader.FuncType {
				fmt.Fprintf(w, "// %s is the C function pointer type %s.\ntype %s uintptr\n\n", goName, name, goName)
				continue
			}
			gt, err := e.goType(t)
			if err != nil {
				return fmt.Errorf("typedef %s: %w", name, err)
			}
			fmt.Fprintf(w, "// %s is the C type %s.\ntype %s %s\n\n", goName, name, goName, gt)
		case cheader.Enum:
			if emittedEnum[t.En] || e.rename(t.En.Name) != goName {
				target, _ := e.goType(t)
				fmt.Fprintf(w, "// %s is the C type %s, the same type as %s.\ntype %s = %s\n\n", goName, name, target, goName, target)
				continue
			}
			emittedEnum[t.En] = true
			e.enum(w, goName, name, t.En)
		case cheader.Record:
			if emittedRec[t.Rec] || t.Rec.Name != name {
				fmt.Fprintf(w, "// %s is the C type %s, the same type as %s.\ntype %s = %s\n\n", goName, name, e.recName(t.Rec), goName, e.recName(t.Rec))
				continue
			}
		default:
			return fmt.Errorf("typedef %s: unsupported kind %d", name, t.Kind)
		}
	}
	// Records, in definition order (nested ones included).
	for _, r := range e.f.Records {
		if !r.Complete || emittedRec[r] || e.rename(r.Name) == "" {
			continue
		}
		emittedRec[r] = true
		if err := e.record(w, r); err != nil {
			return err
		}
	}
	// Enums that no typedef names but that have a tag, and anonymous ones.
	for _, en := range e.f.Enums {
		if emittedEnum[en] {
			continue
		}
		if n := e.rename(en.Tag); n != "" {
			emittedEnum[en] = true
			e.enum(w, n, "enum "+en.Tag, en)
			continue
		}
		fmt.Fprintf(w, "// Values of an anonymous C enum (%s).\nconst (\n", en.Pos)
		for _, v := range en.Values {
			fmt.Fprintf(w, "\t%s = %d\n", e.goConst(v.Name), v.Value)
		}
		fmt.Fprintf(w, ")\n\n")
	}
	return nil
}

func (e *emitter) enum(w *bytes.Buffer, goName, cName string, en *cheader.EnumDef) {
	fmt.Fprintf(w, "// %s is the C enum %s.\ntype %s %s\n\n", goName, cName, goName, en.GoKind())
	fmt.Fprintf(w, "// Values of %s.\nconst (\n", goName)
	for _, v := range en.Values {
		fmt.Fprintf(w, "\t%s %s = %d\n", e.goConst(v.Name), goName, v.Value)
	}
	fmt.Fprintf(w, ")\n\n")
	fmt.Fprintf(w, "// String returns the C name of the value.\nfunc (v %s) String() string {\n\tswitch v {\n", goName)
	seen := map[int64]bool{}
	for _, v := range en.Values {
		if seen[v.Value] {
			continue
		}
		seen[v.Value] = true
		fmt.Fprintf(w, "\tcase %s:\n\t\treturn %q\n", e.goConst(v.Name), v.Name)
	}
	e.imports["strconv"] = true
	fmt.Fprintf(w, "\t}\n\treturn %q + strconv.FormatInt(int64(v), 10) + \")\"\n}\n\n", goName+"(")
}

func (e *emitter) record(w *bytes.Buffer, r *cheader.Rec) error {
	goName := e.recName(r)
	size, align, err := r.SizeAlign()
	if err != nil {
		return err
	}
	kind := "struct"
	if r.Union {
		kind = "union"
	}
	desc := r.CExpr
	if desc == "" {
		desc = "an anonymous " + kind + " member"
	}
	alignNote := ""
	if r.AlignAs > 8 {
		alignNote = fmt.Sprintf("\n//\n// C aligns it to %d bytes, which Go cannot express: allocate it with that alignment yourself.", r.AlignAs)
	}
	fmt.Fprintf(w, "// %s is the C %s %s (%d bytes).%s\n", goName, kind, desc, size, alignNote)
	if r.Union {
		fmt.Fprintf(w, "// A union: read and write its members through the accessor methods.\n")
		fmt.Fprintf(w, "type %s struct {\n", goName)
		if a := alignType(align); a != "" {
			fmt.Fprintf(w, "\t_ [0]%s\n", a)
		}
		fmt.Fprintf(w, "\tBytes [%d]byte\n}\n\n", size)
		e.imports["unsafe"] = true
		for i, fl := range r.Fields {
			gt, err := e.goType(fl.Type)
			if err != nil {
				return fmt.Errorf("%s.%s: %w", goName, fl.Name, err)
			}
			name := capitalize(fl.Name)
			if fl.Name == "" {
				name = fmt.Sprintf("Anon%d", i)
			}
			if name == "Bytes" {
				name = "Bytes_"
			}
			fmt.Fprintf(w, "// %s returns the union viewed as its member %s.\nfunc (u *%s) %s() *%s { return (*%s)(unsafe.Pointer(u)) }\n\n", name, fl.Name, goName, name, gt, gt)
		}
		if r.CExpr != "" {
			e.layouts = append(e.layouts, layoutEntry{goName: goName, cExpr: r.CExpr})
		}
		return nil
	}
	fmt.Fprintf(w, "type %s struct {\n", goName)
	used := map[string]bool{}
	entry := layoutEntry{goName: goName, cExpr: r.CExpr}
	anon := 0
	for _, fl := range r.Fields {
		gt, err := e.goType(fl.Type)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", goName, fl.Name, err)
		}
		if opaqueUserData("", fl.Name, fl.Type) {
			gt = "uintptr"
		}
		name := capitalize(fl.Name)
		cField := fl.Name
		if fl.Name == "" {
			name = fmt.Sprintf("Anon%d", anon)
			anon++
			cField = firstMember(fl.Type.Rec)
		}
		for used[name] {
			name += "_"
		}
		used[name] = true
		fmt.Fprintf(w, "\t%s %s\n", name, gt)
		if cField != "" {
			entry.fields = append(entry.fields, [2]string{name, cField})
		}
	}
	fmt.Fprintf(w, "}\n\n")
	if r.CExpr != "" {
		e.layouts = append(e.layouts, entry)
	}
	return nil
}

// firstMember names the first named member reachable through anonymous members.
func firstMember(r *cheader.Rec) string {
	for _, f := range r.Fields {
		if f.Name != "" {
			return f.Name
		}
		if f.Type.Kind == cheader.Record {
			return firstMember(f.Type.Rec)
		}
	}
	return ""
}

func alignType(a int64) string {
	switch a {
	case 2:
		return "uint16"
	case 4:
		return "uint32"
	case 8:
		return "uint64"
	}
	return ""
}

// constants emits the integer #defines whose names match prefix.
func (e *emitter) constants(w *bytes.Buffer, prefixes ...string) {
	var lines []string
	for _, name := range e.pp.Order {
		ok := false
		for _, p := range prefixes {
			ok = ok || strings.HasPrefix(name, p)
		}
		if !ok {
			continue
		}
		if _, isEnum := e.f.EnumConsts[name]; isEnum {
			continue
		}
		toks, err := e.pp.ExpandMacro(name)
		if err != nil || len(toks) == 0 {
			continue
		}
		typ := ""
		// ((CUdevice)-1), ((CUstream)0x1): a cast to a typedef of an integer or handle.
		if len(toks) > 5 && toks[0].Text == "(" && toks[1].Text == "(" && toks[3].Text == ")" && toks[len(toks)-1].Text == ")" {
			if td, ok := e.f.Typedefs[toks[2].Text]; ok && e.rename(toks[2].Text) != "" {
				rt := td.Resolve()
				if rt.Kind == cheader.Int || rt.Kind == cheader.Pointer && rt.Elem.Resolve().Kind == cheader.Record {
					typ = e.rename(toks[2].Text)
					toks = toks[4 : len(toks)-1]
				}
			}
		}
		v, err := cheader.EvalConst(toks, func(s string) (int64, bool) {
			x, ok := e.f.EnumConsts[s]
			return x, ok
		})
		if err != nil {
			continue
		}
		if typ != "" {
			lines = append(lines, fmt.Sprintf("\t%s %s = %d", name, typ, v))
			continue
		}
		lines = append(lines, fmt.Sprintf("\t%s = %d", name, v))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "// Integer macros of the header.\nconst (\n%s\n)\n\n", strings.Join(lines, "\n"))
}

// layoutTable emits the test table that the layout test compares with C.
func (e *emitter) layoutTable(w *bytes.Buffer) {
	fmt.Fprintf(w, "var layouts = []layout{\n")
	for _, l := range e.layouts {
		fmt.Fprintf(w, "\t{Go: %q, C: %q, Size: unsafe.Sizeof(%s.%s{})", l.goName, l.cExpr, e.pkg, l.goName)
		if len(l.fields) > 0 {
			fmt.Fprintf(w, ", Fields: []layoutField{\n")
			for _, f := range l.fields {
				fmt.Fprintf(w, "\t\t{Go: %q, C: %q, Off: unsafe.Offsetof(%s.%s{}.%s)},\n", f[0], f[1], e.pkg, l.goName, f[0])
			}
			fmt.Fprintf(w, "\t}")
		}
		fmt.Fprintf(w, "},\n")
	}
	fmt.Fprintf(w, "}\n")
}
