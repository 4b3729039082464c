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

// TestAPICallsCoverTheAPI: the close race calls every exported function
// of the package and every method of *Handle (apiCalls) and of
// *MatmulPlan (planCalls), including any added later; and it names
// nothing that is none of them.
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
		_, ok := apiCalls[name]
		assert.True(t, ok, "%s is not in the close race (apiCalls)", name)
	}
	for name := range apiCalls {
		assert.True(t, want[name], "apiCalls names %s, which is not exported", name)
	}
	for name := range handleFree {
		_, ok := apiCalls[name]
		assert.True(t, ok, "handleFree names %s, which apiCalls lacks", name)
	}
	pt := reflect.TypeFor[*plan]()
	methods := map[string]bool{}
	for i := 0; i < pt.NumMethod(); i++ {
		methods[pt.Method(i).Name] = true
		_, ok := planCalls[pt.Method(i).Name]
		assert.True(t, ok, "MatmulPlan.%s is not in the close race (planCalls)", pt.Method(i).Name)
	}
	assert.True(t, methods["Run"], "the reflection found the plan's methods")
	for name := range planCalls {
		assert.True(t, methods[name], "planCalls names %s, which *MatmulPlan lacks", name)
	}
}
