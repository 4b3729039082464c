package cheader_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/gen/cheader"
)

func parse(t *testing.T, src string) *cheader.File {
	t.Helper()
	pp := cheader.NewPreprocessor(cheader.Predefined())
	toks, err := pp.Run("t.h", src)
	require.NoError(t, err)
	f := cheader.NewFile()
	require.NoError(t, f.Parse(toks))
	return f
}

func parseErr(src string) error {
	pp := cheader.NewPreprocessor(cheader.Predefined())
	toks, err := pp.Run("t.h", src)
	if err != nil {
		return err
	}
	return cheader.NewFile().Parse(toks)
}

func TestConditionals(t *testing.T) {
	f := parse(t, `
#define A 1
#if defined(A) && !defined(B)
typedef int yes1;
#elif 1
typedef int no1;
#else
typedef int no2;
#endif
#ifdef B
typedef int no3;
#elif A == 1
typedef int yes2;
#endif
#ifndef B
#if 0
typedef int no4;
#else
typedef int yes3;
#endif
#endif
#if __STDC_VERSION__ >= 201112L && defined __LP64__
typedef int yes4;
#endif
`)
	assert.ElementsMatch(t, []string{"yes1", "yes2", "yes3", "yes4"}, f.TypedefOrder)
}

func TestPreprocessorErrors(t *testing.T) {
	assert.ErrorContains(t, parseErr("#if 1\ntypedef int a;\n"), "unterminated #if")
	assert.ErrorContains(t, parseErr("#endif\n"), "#endif without #if")
	assert.ErrorContains(t, parseErr("#error stop here\n"), "#error stop here")
	assert.NoError(t, parseErr("#if 0\n#error not active\n#endif\n"))
	assert.ErrorContains(t, parseErr("/* never closed\n"), "unterminated comment")
	assert.ErrorContains(t, parseErr("#frobnicate\n"), "unknown directive")
}

func TestMacros(t *testing.T) {
	f := parse(t, `
#define CAT_INNER(x, y) x ## y
#define CAT(x, y) CAT_INNER(x, y)
#define VERSION 2
#define API_PTSZ(api) api
#define EMPTY
typedef struct S_st { int a; } CAT(S_v, VERSION);
typedef int EMPTY plain;
typedef int API_PTSZ(wrapped);
#define MULTI \
   3
typedef char arr_t[MULTI];
`)
	assert.Contains(t, f.Typedefs, "S_v2")
	assert.Contains(t, f.Typedefs, "plain")
	assert.Contains(t, f.Typedefs, "wrapped")
	assert.EqualValues(t, 3, f.Typedefs["arr_t"].Elem.Len)
}

func TestDeclarations(t *testing.T) {
	f := parse(t, `
typedef unsigned long long u64;
typedef struct Handle_st *Handle;
typedef enum E_enum { E_A = 0x1, E_B = E_A << 3, E_C, E_D = (E_B | E_A) - 1, E_NEG = -1 } E;
typedef int (*Callback)(void *data, const char * const *names);
typedef struct Outer_st {
    unsigned int
        multi;           /* a declaration over two lines */
    union {
        u64 wide;
        int narrow;
    };
    struct { int x, y; } pos;
    Handle h;
    char pad[16 - sizeof(int) * 2];
    E kind;
    Callback cb;
    struct Outer_st *next;
    int grid[2][3];
} Outer;
int plainFunction(Outer *o,
                  int n);
typedef int (*PFN_thing_v12030)(Outer *o, Handle h);
typedef int (*PFN_thing_v12030_ptsz)(Outer *o, Handle h);
`)
	e := f.Typedefs["E"].Elem.En
	require.NotNil(t, e)
	assert.Equal(t, []cheader.EnumValue{{"E_A", 1}, {"E_B", 8}, {"E_C", 9}, {"E_D", 8}, {"E_NEG", -1}}, e.Values)
	assert.Equal(t, "int32", e.GoKind())

	outer := f.Typedefs["Outer"].Elem.Rec
	require.NotNil(t, outer)
	require.Len(t, outer.Fields, 9)
	assert.Equal(t, "multi", outer.Fields[0].Name)
	assert.Equal(t, "", outer.Fields[1].Name, "anonymous union")
	assert.True(t, outer.Fields[1].Type.Rec.Union)
	assert.EqualValues(t, 8, outer.Fields[4].Type.Len, "sizeof in an array length")
	grid := outer.Fields[8].Type
	assert.EqualValues(t, 2, grid.Len)
	assert.EqualValues(t, 3, grid.Elem.Len)
	size, align, err := outer.SizeAlign()
	require.NoError(t, err)
	offs, err := outer.Offsets()
	require.NoError(t, err)
	// multi@0, union@8 (8), pos@16 (8), h@24, pad@32 (8), kind@40, cb@48, next@56, grid@64 (24)
	assert.Equal(t, []int64{0, 8, 16, 24, 32, 40, 48, 56, 64}, offs[:9])
	assert.EqualValues(t, 88, size)
	assert.EqualValues(t, 8, align)

	cb := f.Typedefs["Callback"].Elem
	require.Equal(t, cheader.Pointer, cb.Kind)
	require.Equal(t, cheader.FuncType, cb.Elem.Kind)
	params := cb.Elem.Fn.Params
	require.Len(t, params, 2)
	assert.Equal(t, "names", params[1].Name)
	assert.Equal(t, cheader.Pointer, params[1].Type.Kind)
	assert.True(t, params[1].Type.Elem.Kind == cheader.Pointer && params[1].Type.Elem.Const, "const char * const *")

	require.Len(t, f.Funcs, 1)
	assert.Equal(t, "plainFunction", f.Funcs[0].Name)
	assert.Len(t, f.Funcs[0].Params, 2)
	assert.Contains(t, f.Typedefs, "PFN_thing_v12030_ptsz")
}

func TestRejectedDeclarations(t *testing.T) {
	assert.ErrorContains(t, parseErr("struct B { int x : 3; };"), "bit-fields")
	assert.ErrorContains(t, parseErr("typedef long L;"), "plain long")
	assert.ErrorContains(t, parseErr("typedef mystery M;"), "unknown type name mystery")
	assert.ErrorContains(t, parseErr("int f(int a, ...);"), "variadic")
	assert.ErrorContains(t, parseErr("typedef struct { int a; "), "end of input")
	assert.ErrorContains(t, parseErr("typedef int A[1/0];"), "division by zero")
}

func TestEvalConst(t *testing.T) {
	cases := map[string]int64{
		"1 + 2 * 3":          7,
		"(1 + 2) * 3":        9,
		"1 << 4 | 1":         17,
		"0x10 >> 2":          4,
		"10 / 3 % 2":         1,
		"~0 & 0xff":          255,
		"!0 && 1 || 0":       1,
		"3 > 2 ? 5 : 6":      5,
		"-(int)2":            -2,
		"0xFFFFFFFFu":        0xFFFFFFFF,
		"'A'":                65,
		"1 == 1 != 0":        1,
		"X * 2":              84,
		"(unsigned int)1<<2": 4,
	}
	for expr, want := range cases {
		pp := cheader.NewPreprocessor(nil)
		_ = pp
		toks := tokens(t, expr)
		got, err := cheader.EvalConst(toks, func(s string) (int64, bool) { return 42, s == "X" })
		if assert.NoError(t, err, expr) {
			assert.Equal(t, want, got, expr)
		}
	}
	for _, bad := range []string{"1 +", "(1", "Y", "1 << 99", "1 ? 2"} {
		_, err := cheader.EvalConst(tokens(t, bad), func(string) (int64, bool) { return 0, false })
		assert.Error(t, err, bad)
	}
}

// tokens runs text through the preprocessor to get tokens.
func tokens(t *testing.T, text string) []cheader.Token {
	pp := cheader.NewPreprocessor(nil)
	toks, err := pp.Run("e", text)
	require.NoError(t, err)
	return toks
}

func TestEnumSizes(t *testing.T) {
	f := parse(t, "typedef enum { A = 0, B = 0x80000000 } U;\ntypedef enum { C = -1, D = 0x100000000 } W;")
	assert.Equal(t, "uint32", f.Typedefs["U"].Elem.En.GoKind())
	assert.EqualValues(t, 4, f.Typedefs["U"].Elem.En.Size())
	assert.Equal(t, "int64", f.Typedefs["W"].Elem.En.GoKind())
	assert.EqualValues(t, 8, f.Typedefs["W"].Elem.En.Size())
}

// TestRealHeadersIfPresent parses NVIDIA's CUDA 13.0 headers from
// $PURECUDA_CUDA_INCLUDE, else ../shared/cuda-include/13.0 beside the
// checkout; it skips, saying where it looked, when neither is set up, and
// fails when PURECUDA_CUDA_INCLUDE names a directory without them.
func TestRealHeadersIfPresent(t *testing.T) {
	dir := os.Getenv("PURECUDA_CUDA_INCLUDE")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", "shared", "cuda-include", "13.0")
		if _, err := os.Stat(filepath.Join(dir, "cudaTypedefs.h")); err != nil {
			abs, _ := filepath.Abs(dir)
			t.Skipf("CUDA 13.0 headers not found: PURECUDA_CUDA_INCLUDE is unset and %s has none; set PURECUDA_CUDA_INCLUDE to a CUDA 13.0 include directory to run this test", abs)
		}
	}
	h, err := cheader.LoadDir(dir)
	require.NoError(t, err, "PURECUDA_CUDA_INCLUDE=%s", dir)
	n := 0
	for _, name := range h.CUDA.TypedefOrder {
		if strings.HasPrefix(name, "PFN_") {
			n++
		}
	}
	assert.Greater(t, n, 500)
	assert.Len(t, h.NVRTC.Funcs, 24)
	assert.Contains(t, h.Internal.Typedefs, "PFN_cuGraphInstantiate_v11000")
	assert.NotContains(t, h.CUDA.Typedefs, "PFN_cuGraphInstantiate_v11000")
}

// FuzzParse feeds arbitrary text through the preprocessor and parser: they
// must return errors, never panic or hang.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"typedef struct A_st { int a; union { int b; char c[4]; }; } A;",
		"#define X(a, b) a ## b\ntypedef int X(q, 1);",
		"typedef enum { V = 1 << 2, W } E;",
		"typedef int (*F)(const char * const *p, void **q);",
		"#if defined(A) || B > 1\n#else\nint f(void);\n#endif",
		"typedef struct { char p[8 - sizeof(int)]; } P;",
		"struct S { struct T { int x; } t; } ;",
		"/* c */ // d\n'a' \"s\"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		pp := cheader.NewPreprocessor(cheader.Predefined())
		toks, err := pp.Run("fuzz.h", src)
		if err != nil {
			return
		}
		file := cheader.NewFile()
		if file.Parse(toks) != nil {
			return
		}
		for _, r := range file.Records {
			_, _, _ = r.SizeAlign()
		}
	})
}

func TestTruncatedInputEnds(t *testing.T) {
	for _, src := range []string{"struct S { _Alignas(8", "typedef int a[3", "enum { A = (1", "typedef struct S_st {"} {
		assert.Error(t, parseErr(src), src)
	}
}

// TestStaticFunctions: a static (inline) function is marked Static, with
// or without a body; the declarations beside it are not.
func TestStaticFunctions(t *testing.T) {
	f := parse(t, `
int exported(int x);
static inline int wrapper(int x) { return exported(x); }
static int helper(void);
extern int other(void);
`)
	require.Len(t, f.Funcs, 4)
	for _, fn := range f.Funcs {
		assert.Equal(t, fn.Name == "wrapper" || fn.Name == "helper", fn.Static, fn.Name)
	}
}
