package cheader

import (
	"fmt"
	"strings"
)

// File is what a set of headers declares.
type File struct {
	Typedefs     map[string]*Type // name → Named type
	TypedefOrder []string
	Records      []*Rec // every struct/union definition, nested ones included, in order
	Enums        []*EnumDef
	EnumConsts   map[string]int64
	Funcs        []*Func // function declarations, in order
	tags         map[string]*Rec
	enumTags     map[string]*EnumDef
}

// NewFile returns an empty File; parse headers into it in dependency order.
func NewFile() *File {
	return &File{
		Typedefs:   map[string]*Type{},
		EnumConsts: map[string]int64{},
		tags:       map[string]*Rec{},
		enumTags:   map[string]*EnumDef{},
	}
}

// builtinTypedefs are the standard-library type names the CUDA headers use.
var builtinTypedefs = map[string]*Type{
	"size_t":    {Kind: Int, Name: "size_t", Size: 8},
	"uint8_t":   {Kind: Int, Name: "uint8_t", Size: 1},
	"uint16_t":  {Kind: Int, Name: "uint16_t", Size: 2},
	"uint32_t":  {Kind: Int, Name: "uint32_t", Size: 4},
	"uint64_t":  {Kind: Int, Name: "uint64_t", Size: 8},
	"int8_t":    {Kind: Int, Name: "int8_t", Size: 1, Signed: true},
	"int16_t":   {Kind: Int, Name: "int16_t", Size: 2, Signed: true},
	"int32_t":   {Kind: Int, Name: "int32_t", Size: 4, Signed: true},
	"int64_t":   {Kind: Int, Name: "int64_t", Size: 8, Signed: true},
	"uintptr_t": {Kind: Int, Name: "uintptr_t", Size: 8},
	"intptr_t":  {Kind: Int, Name: "intptr_t", Size: 8, Signed: true},
}

type parser struct {
	f      *File
	toks   []Token
	i      int
	static bool // the declaration specifiers parsed last had "static"
}

// Parse parses preprocessed tokens into f.
func (f *File) Parse(toks []Token) (err error) {
	p := &parser{f: f, toks: toks}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseError)
			if !ok {
				panic(r)
			}
			err = pe
		}
	}()
	for p.i < len(p.toks) {
		p.topLevel()
	}
	return nil
}

type parseError struct{ msg string }

func (e parseError) Error() string { return e.msg }

func (p *parser) fail(format string, args ...any) {
	pos := "end of input"
	if p.i < len(p.toks) {
		pos = p.toks[p.i].Pos + " near " + fmt.Sprintf("%q", p.toks[p.i].Text)
	}
	panic(parseError{pos + ": " + fmt.Sprintf(format, args...)})
}

func (p *parser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i].Text
	}
	return ""
}

func (p *parser) peekAt(k int) string {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k].Text
	}
	return ""
}

func (p *parser) pos() string {
	if p.i < len(p.toks) {
		return p.toks[p.i].Pos
	}
	return ""
}

func (p *parser) next() Token {
	if p.i >= len(p.toks) {
		p.fail("unexpected end of input")
	}
	t := p.toks[p.i]
	p.i++
	return t
}

func (p *parser) expect(s string) {
	if p.peek() != s {
		p.fail("expected %q", s)
	}
	p.i++
}

func (p *parser) accept(s string) bool {
	if p.peek() == s {
		p.i++
		return true
	}
	return false
}

// skipBalanced skips a parenthesised or braced group starting at the current token.
func (p *parser) skipBalanced() {
	open := p.peek()
	closeTok := map[string]string{"(": ")", "{": "}", "[": "]"}[open]
	depth := 0
	for p.i < len(p.toks) {
		t := p.next().Text
		if t == open {
			depth++
		} else if t == closeTok {
			depth--
			if depth == 0 {
				return
			}
		}
	}
	p.fail("unbalanced %s", open)
}

func (p *parser) topLevel() {
	if p.accept(";") {
		return
	}
	if p.peek() == "extern" && p.peekAt(1) != "" && strings.HasPrefix(p.peekAt(1), "\"") {
		p.i += 2
		if p.accept("{") {
			return
		}
	}
	if p.peek() == "}" { // end of extern "C" block
		p.i++
		return
	}
	isTypedef := p.accept("typedef")
	pos := p.pos()
	p.static = false
	base, _ := p.declSpecs()
	static := p.static
	if p.accept(";") {
		return
	}
	for {
		name, build := p.declarator(false)
		p.attributes()
		t := build(base)
		if isTypedef {
			if name == "" {
				p.fail("typedef without a name")
			}
			p.addTypedef(name, t)
		} else if t.Kind == FuncType && name != "" {
			t.Fn.Name = name
			t.Fn.Pos = pos
			t.Fn.Static = static
			p.f.Funcs = append(p.f.Funcs, t.Fn)
		}
		if p.peek() == "{" { // function body
			p.skipBalanced()
			return
		}
		if p.accept(",") {
			continue
		}
		p.expect(";")
		return
	}
}

func (p *parser) addTypedef(name string, t *Type) {
	if old, ok := p.f.Typedefs[name]; ok {
		_ = old // redefinition of the same typedef is allowed in C11
		return
	}
	nt := &Type{Kind: Named, Name: name, Elem: t}
	p.f.Typedefs[name] = nt
	p.f.TypedefOrder = append(p.f.TypedefOrder, name)
	if t.Kind == Record && t.Rec.Name == "" {
		t.Rec.Name = name
		t.Rec.CExpr = name
	}
	if t.Kind == Enum && t.En.Name == "" {
		t.En.Name = name
	}
}

// attributes skips __attribute__((...)) and __declspec(...).
func (p *parser) attributes() {
	for p.peek() == "__attribute__" || p.peek() == "__declspec" {
		p.i++
		p.skipBalanced()
	}
}

// declSpecs parses declaration specifiers and returns the base type and any
// _Alignas value.
func (p *parser) declSpecs() (*Type, int64) {
	var words []string
	var base *Type
	var alignAs int64
	isConst := false
	for {
		t := p.peek()
		switch t {
		case "const":
			isConst = true
			p.i++
		case "static":
			p.static = true
			p.i++
		case "volatile", "extern", "inline", "__inline__", "__inline", "register", "restrict", "__restrict":
			p.i++
		case "__attribute__", "__declspec":
			p.attributes()
		case "_Alignas", "alignas":
			p.i++
			p.expect("(")
			v, err := EvalConst(p.constTokens(func() bool { return p.peek() == ")" }), p.lookupConst)
			if err != nil {
				p.fail("alignas: %v", err)
			}
			alignAs = v
			p.expect(")")
		case "void", "char", "short", "int", "long", "signed", "unsigned", "float", "double", "_Bool":
			if base != nil {
				p.fail("type word after a type")
			}
			words = append(words, t)
			p.i++
		case "struct", "union":
			base = p.recordSpec()
		case "enum":
			base = p.enumSpec()
		default:
			if base == nil && len(words) == 0 && p.i < len(p.toks) && p.toks[p.i].Kind == Ident {
				if td, ok := p.f.Typedefs[t]; ok {
					base = td
					p.i++
					continue
				}
				if bt, ok := builtinTypedefs[t]; ok {
					base = bt
					p.i++
					continue
				}
				p.fail("unknown type name %s", t)
			}
			if base == nil {
				if len(words) == 0 {
					p.fail("expected a type")
				}
				base = basicType(p, words)
			}
			if isConst {
				c := *base
				c.Const = true
				base = &c
			}
			return base, alignAs
		}
	}
}

func basicType(p *parser, words []string) *Type {
	count := map[string]int{}
	for _, w := range words {
		count[w]++
	}
	unsigned := count["unsigned"] > 0
	switch {
	case count["void"] > 0:
		return &Type{Kind: Void, Name: "void"}
	case count["float"] > 0:
		return &Type{Kind: Float, Name: "float", Size: 4}
	case count["double"] > 0:
		return &Type{Kind: Float, Name: "double", Size: 8}
	case count["_Bool"] > 0:
		return &Type{Kind: Int, Name: "_Bool", Size: 1}
	case count["char"] > 0:
		name := "char"
		if unsigned {
			name = "unsigned char"
		} else if count["signed"] > 0 {
			name = "signed char"
		}
		return &Type{Kind: Int, Name: name, Size: 1, Signed: !unsigned}
	case count["short"] > 0:
		return &Type{Kind: Int, Name: strings.Join(words, " "), Size: 2, Signed: !unsigned}
	case count["long"] >= 2:
		return &Type{Kind: Int, Name: strings.Join(words, " "), Size: 8, Signed: !unsigned}
	case count["long"] == 1:
		// long is 8 bytes on LP64 and 4 on Windows: refuse it rather than guess.
		p.fail("plain long has no fixed size across targets")
	}
	return &Type{Kind: Int, Name: strings.Join(words, " "), Size: 4, Signed: !unsigned}
}

func (p *parser) recordSpec() *Type {
	union := p.next().Text == "union"
	p.attributes()
	tag := ""
	if p.i < len(p.toks) && p.toks[p.i].Kind == Ident {
		tag = p.next().Text
	}
	p.attributes()
	var rec *Rec
	if tag != "" {
		rec = p.f.tags[tag]
	}
	if rec == nil {
		rec = &Rec{Tag: tag, Union: union, Pos: p.pos()}
		if tag != "" {
			p.f.tags[tag] = rec
			kw := "struct "
			if union {
				kw = "union "
			}
			rec.CExpr = kw + tag
		}
	}
	if p.peek() != "{" {
		if tag == "" {
			p.fail("anonymous record without a body")
		}
		return &Type{Kind: Record, Rec: rec}
	}
	if rec.Complete {
		p.fail("redefinition of %s", tag)
	}
	p.expect("{")
	p.f.Records = append(p.f.Records, rec)
	for !p.accept("}") {
		base, align := p.declSpecs()
		if align > rec.AlignAs {
			rec.AlignAs = align
		}
		if p.accept(";") {
			if base.Kind != Record {
				p.fail("member without a name")
			}
			rec.Fields = append(rec.Fields, Field{Type: base})
			continue
		}
		for {
			name, build := p.declarator(false)
			if p.peek() == ":" {
				p.fail("bit-fields are not supported")
			}
			p.attributes()
			rec.Fields = append(rec.Fields, Field{Name: name, Type: build(base)})
			if !p.accept(",") {
				break
			}
		}
		p.expect(";")
	}
	rec.Complete = true
	p.attributes()
	return &Type{Kind: Record, Rec: rec}
}

func (p *parser) enumSpec() *Type {
	p.expect("enum")
	tag := ""
	if p.i < len(p.toks) && p.toks[p.i].Kind == Ident {
		tag = p.next().Text
	}
	if p.peek() != "{" {
		en := p.f.enumTags[tag]
		if en == nil {
			p.fail("unknown enum %s", tag)
		}
		return &Type{Kind: Enum, En: en}
	}
	en := &EnumDef{Tag: tag, Pos: p.pos()}
	if tag != "" {
		p.f.enumTags[tag] = en
	}
	p.expect("{")
	var next int64
	for !p.accept("}") {
		name := p.next()
		if name.Kind != Ident {
			p.fail("expected an enumerator")
		}
		if p.accept("=") {
			depth := 0
			v, err := EvalConst(p.constTokens(func() bool {
				switch p.peek() {
				case "(":
					depth++
				case ")":
					depth--
				case ",", "}":
					return depth == 0
				}
				return false
			}), p.lookupConst)
			if err != nil {
				p.fail("enumerator %s: %v", name.Text, err)
			}
			next = v
		}
		en.Values = append(en.Values, EnumValue{name.Text, next})
		p.f.EnumConsts[name.Text] = next
		next++
		p.accept(",")
	}
	p.f.Enums = append(p.f.Enums, en)
	return &Type{Kind: Enum, En: en}
}

func (p *parser) lookupConst(name string) (int64, bool) {
	v, ok := p.f.EnumConsts[name]
	return v, ok
}

// declarator parses a (possibly abstract) declarator and returns its name and
// a function that applies it to a base type.
func (p *parser) declarator(abstract bool) (string, func(*Type) *Type) {
	type ptr struct{ isConst bool }
	var ptrs []ptr
	for {
		p.attributes()
		if p.accept("*") {
			ptrs = append(ptrs, ptr{})
			continue
		}
		if p.peek() == "const" || p.peek() == "volatile" || p.peek() == "restrict" || p.peek() == "__restrict" {
			if len(ptrs) > 0 && p.peek() == "const" {
				ptrs[len(ptrs)-1].isConst = true
			}
			p.i++
			continue
		}
		break
	}
	name := ""
	var inner func(*Type) *Type
	if p.peek() == "(" && (p.peekAt(1) == "*" || p.peekAt(1) == "__attribute__") {
		p.i++
		name, inner = p.declarator(abstract)
		p.expect(")")
	} else if p.i < len(p.toks) && p.toks[p.i].Kind == Ident && !isTypeStart(p, p.peek()) {
		name = p.next().Text
	}
	type suffix struct {
		arrLen int64
		isArr  bool
		params []Param
	}
	var sufs []suffix
	for {
		if p.accept("[") {
			if p.accept("]") {
				sufs = append(sufs, suffix{isArr: true, arrLen: -1})
				continue
			}
			v, err := EvalConst(p.constTokens(func() bool { return p.peek() == "]" }), p.lookupConst)
			if err != nil {
				p.fail("array length: %v", err)
			}
			p.expect("]")
			sufs = append(sufs, suffix{isArr: true, arrLen: v})
			continue
		}
		if p.peek() == "(" {
			sufs = append(sufs, suffix{params: p.params()})
			continue
		}
		break
	}
	return name, func(base *Type) *Type {
		t := base
		for _, pt := range ptrs {
			t = &Type{Kind: Pointer, Elem: t, Const: pt.isConst}
		}
		for k := len(sufs) - 1; k >= 0; k-- {
			s := sufs[k]
			if s.isArr {
				t = &Type{Kind: Array, Elem: t, Len: s.arrLen}
			} else {
				t = &Type{Kind: FuncType, Fn: &Func{Result: t, Params: s.params}}
			}
		}
		if inner != nil {
			t = inner(t)
		}
		return t
	}
}

func isTypeStart(p *parser, s string) bool {
	switch s {
	case "const", "volatile", "void", "char", "short", "int", "long", "signed", "unsigned",
		"float", "double", "struct", "union", "enum", "_Bool":
		return true
	}
	_, td := p.f.Typedefs[s]
	_, bt := builtinTypedefs[s]
	return td || bt
}

func (p *parser) params() []Param {
	p.expect("(")
	var out []Param
	if p.peek() == "void" && p.peekAt(1) == ")" {
		p.i += 2
		return nil
	}
	for !p.accept(")") {
		if p.accept("...") {
			p.fail("variadic functions are not supported")
		}
		base, _ := p.declSpecs()
		name, build := p.declarator(true)
		t := build(base)
		if t.Kind == Array { // arrays decay to pointers
			t = &Type{Kind: Pointer, Elem: t.Elem}
		}
		if t.Kind == FuncType {
			t = &Type{Kind: Pointer, Elem: t}
		}
		out = append(out, Param{Name: name, Type: t})
		if !p.accept(",") {
			p.expect(")")
			break
		}
	}
	return out
}

// constTokens collects the tokens of a constant expression up to (not
// including) the token where stop reports true, replacing sizeof(type) with
// the type's size.
func (p *parser) constTokens(stop func() bool) []Token {
	var out []Token
	for p.i < len(p.toks) && !stop() {
		if p.peek() != "sizeof" {
			out = append(out, p.next())
			continue
		}
		pos := p.pos()
		p.i++
		p.expect("(")
		base, _ := p.declSpecs()
		_, build := p.declarator(true)
		p.expect(")")
		size, _, err := build(base).SizeAlign()
		if err != nil {
			p.fail("sizeof: %v", err)
		}
		out = append(out, Token{Number, fmt.Sprint(size), pos})
	}
	return out
}
