//go:build linux

package cublas_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
)

// TestAPICallsCoverTheAPI: the close race (apiCalls) calls every exported
// function of the package and every method of *Handle, including any
// added later; and it names nothing that is neither.
func TestAPICallsCoverTheAPI(t *testing.T) {
	want := map[string]bool{}
	ht := reflect.TypeFor[*cublas.Handle]()
	for i := 0; i < ht.NumMethod(); i++ {
		want[ht.Method(i).Name] = true
	}
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.IsExported() {
				want[fn.Name.Name] = true
			}
		}
	}
	for _, name := range []string{"Gemm", "NewHandle", "IamaxTo", "Close", "Options"} {
		assert.Contains(t, want, name, "the parse found the API")
	}
	for name := range want {
		assert.Contains(t, apiCalls, name, "%s is not in the close race (apiCalls)", name)
	}
	for name := range apiCalls {
		assert.Contains(t, want, name, "apiCalls names %s, which is not exported", name)
	}
	for name := range handleFree {
		assert.Contains(t, apiCalls, name)
	}
}
