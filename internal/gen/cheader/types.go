package cheader

import "fmt"

// Kind classifies a Type.
type Kind int

// Type kinds.
const (
	Void Kind = iota
	Int
	Float
	Pointer
	Array
	Record   // struct or union
	Enum     // enum type
	Named    // typedef name, Elem is the target
	FuncType // a function type (reached through a Pointer)
)

// Type is a C type.
type Type struct {
	Kind   Kind
	Name   string // Int/Float: C spelling; Named: typedef name
	Size   int64  // Int/Float
	Signed bool   // Int
	Elem   *Type  // Pointer, Array, Named
	Len    int64  // Array
	Const  bool   // the object itself is const (pointee constness lives on Elem)
	Rec    *Rec   // Record
	En     *EnumDef
	Fn     *Func // FuncType
}

// Rec is a struct or union definition.
type Rec struct {
	Tag      string // may be empty
	Union    bool
	Fields   []Field
	Complete bool
	AlignAs  int64 // explicit _Alignas, 0 if none
	// Name is the name used in generated code (typedef or tag or synthesised).
	Name string
	// CExpr names this type in C (for layout checks); empty when it cannot be named.
	CExpr string
	Pos   string
}

// Field is a member of a Rec. Name is empty for an anonymous struct/union member.
type Field struct {
	Name string
	Type *Type
}

// EnumDef is an enum definition.
type EnumDef struct {
	Tag    string
	Name   string
	Values []EnumValue
	Pos    string
}

// EnumValue is one enumerator.
type EnumValue struct {
	Name  string
	Value int64
}

// Func is a function prototype.
type Func struct {
	Name   string
	Result *Type
	Params []Param
	Pos    string
	Static bool // declared static (a static inline function): compiled into its callers, not exported
}

// Param is a function parameter; Name may be empty.
type Param struct {
	Name string
	Type *Type
}

// Resolve follows typedefs to the underlying type.
func (t *Type) Resolve() *Type {
	for t != nil && t.Kind == Named {
		t = t.Elem
	}
	return t
}

// SizeAlign returns the size and alignment of t under LP64/LLP64 rules
// (pointers 8 bytes).
func (t *Type) SizeAlign() (int64, int64, error) {
	switch t.Kind {
	case Int, Float:
		return t.Size, t.Size, nil
	case Pointer:
		return 8, 8, nil
	case Enum:
		s := t.En.Size()
		return s, s, nil
	case Named:
		return t.Elem.SizeAlign()
	case Array:
		s, a, err := t.Elem.SizeAlign()
		return s * t.Len, a, err
	case Record:
		return t.Rec.SizeAlign()
	}
	return 0, 0, fmt.Errorf("type %s has no size", t.Name)
}

// SizeAlign computes a record's size and alignment.
func (r *Rec) SizeAlign() (int64, int64, error) {
	if !r.Complete {
		return 0, 0, fmt.Errorf("incomplete type struct %s", r.Tag)
	}
	var size, align int64 = 0, 1
	for _, f := range r.Fields {
		s, a, err := f.Type.SizeAlign()
		if err != nil {
			return 0, 0, err
		}
		if a > align {
			align = a
		}
		if r.Union {
			if s > size {
				size = s
			}
			continue
		}
		size = roundUp(size, a) + s
	}
	if r.AlignAs > align {
		align = r.AlignAs
	}
	return roundUp(size, align), align, nil
}

// Offsets returns each field's offset (0 for all members of a union).
func (r *Rec) Offsets() ([]int64, error) {
	offs := make([]int64, len(r.Fields))
	var off int64
	for i, f := range r.Fields {
		s, a, err := f.Type.SizeAlign()
		if err != nil {
			return nil, err
		}
		if r.Union {
			continue
		}
		off = roundUp(off, a)
		offs[i] = off
		off += s
	}
	return offs, nil
}

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }

// Size is the enum's size in bytes under GCC's rules: 4 unless a value needs 64 bits.
func (e *EnumDef) Size() int64 {
	for _, v := range e.Values {
		if v.Value > 0xFFFFFFFF || v.Value < -0x80000000 {
			return 8
		}
	}
	return 4
}

// GoKind is the Go integer type that holds every value of the enum.
func (e *EnumDef) GoKind() string {
	neg, big, huge := false, false, false
	for _, v := range e.Values {
		if v.Value < 0 {
			neg = true
		}
		if v.Value > 0x7FFFFFFF {
			big = true
		}
		if v.Value > 0xFFFFFFFF || v.Value < -0x80000000 {
			huge = true
		}
	}
	switch {
	case huge && neg:
		return "int64"
	case huge:
		return "uint64"
	case big && !neg:
		return "uint32"
	}
	return "int32"
}
