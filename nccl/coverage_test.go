//go:build linux

package nccl_test

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

	"github.com/purecuda/cuda/nccl"
)

// TestCommCallsCoverTheAPI: the close race (commCalls) calls every method
// of *Comm and every exported function of the package that takes a *Comm,
// including any added later.
func TestCommCallsCoverTheAPI(t *testing.T) {
	want := map[string]bool{}
	ct := reflect.TypeFor[*nccl.Comm]()
	for i := 0; i < ct.NumMethod(); i++ {
		want[ct.Method(i).Name] = true
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
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() {
				continue
			}
			for _, p := range fn.Type.Params.List {
				if star, ok := p.Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && id.Name == "Comm" {
						want[fn.Name.Name] = true
					}
				}
			}
		}
	}
	assert.Contains(t, want, "AllReduce", "the parse found the operations")
	for name := range want {
		assert.Contains(t, commCalls, name, "%s is not in the close race (commCalls)", name)
	}
}
