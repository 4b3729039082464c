package cublas

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoStackAddressToC: no address of a plain variable is handed to C as
// a uintptr (uintptr(unsafe.Pointer(&v))). Escape analysis keeps such a v
// on the goroutine's stack (a uintptr does not make it escape), and the
// stack may move (grow) between the conversion and the C call inside the
// raw table's wrapper, leaving C a stale address. What C reads from Go
// memory lives in the handle's heap scratch (handleState.slot) instead.
func TestNoStackAddressToC(t *testing.T) {
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			conv, ok := n.(*ast.CallExpr)
			if !ok || len(conv.Args) != 1 {
				return true
			}
			if id, ok := conv.Fun.(*ast.Ident); !ok || id.Name != "uintptr" {
				return true
			}
			ptr, ok := conv.Args[0].(*ast.CallExpr)
			if !ok || len(ptr.Args) != 1 {
				return true
			}
			if sel, ok := ptr.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Pointer" {
				return true
			}
			if u, ok := ptr.Args[0].(*ast.UnaryExpr); ok && u.Op == token.AND {
				if id, ok := u.X.(*ast.Ident); ok {
					assert.Fail(t, "a variable's address to C as a uintptr", "%s: &%s", fset.Position(conv.Pos()), id.Name)
				}
			}
			return true
		})
	}
}
