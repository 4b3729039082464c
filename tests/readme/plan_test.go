package readme_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ways a Go block is compiled.
const (
	kindFile      = "a whole file"
	kindFragment  = "a fragment"
	kindContinued = "continues the program above"
)

// A unit is the file one Go block is compiled as, in a package of its own.
type unit struct {
	name  string // the package's directory: b and the fence's line
	block block
	kind  string
	how   string // kind, with the line of the program a continuation extends
	src   string
}

// plan turns the Go blocks into units, and returns the blocks that opt out.
// md is the Markdown file's absolute path, which the //line directives
// name, so that the compiler reports lines of md; name is md's name in
// errors; mod is the module path.
func plan(name string, blocks []block, md, mod string) (units []unit, skipped []block, err error) {
	var errs []error
	var program *unit // the last whole file, with the fragments that continue it
	for _, b := range blocks {
		if b.lang != "go" {
			continue
		}
		if b.skip {
			skipped = append(skipped, b)
			continue
		}
		u := unit{name: fmt.Sprintf("b%d", b.fence), block: b}
		switch {
		case b.cont:
			if program == nil {
				errs = append(errs, fmt.Errorf("%s:%d: the block continues the program above, but no whole Go file comes before it", name, b.fence))
				continue
			}
			src, err := continueProgram(program.src, b, md, mod)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: the block continues the program at line %d: %w", name, b.fence, program.block.fence, err))
				continue
			}
			u.kind, u.how, u.src = kindContinued, fmt.Sprintf("%s, at line %d", kindContinued, program.block.fence), src
			program.src = src
		case isFile(b.text):
			u.kind, u.how, u.src = kindFile, kindFile, lineDirective(md, b.fence+1)+b.text+"\n"
			p := u
			program = &p
		default:
			u.kind, u.how, u.src = kindFragment, kindFragment, fragment(b, md, mod)
		}
		units = append(units, u)
	}
	return units, skipped, errors.Join(errs...)
}

// isFile reports whether src starts with a package clause.
func isFile(src string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", src, parser.PackageClauseOnly)
	return err == nil
}

// lineDirective makes the next line line of md, column 1.
func lineDirective(md string, line int) string {
	return fmt.Sprintf("//line %s:%d:1\n", md, line)
}

// fragment wraps a fragment into a file: top-level declarations as they
// are, statements as the body of func _(); imports as imports adds them.
func fragment(b block, md, mod string) string {
	src := "package readme\n\n" + lineDirective(md, b.fence+1) + b.text + "\n"
	if _, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution); err != nil {
		src = "package readme\n\nfunc _() {\n" + lineDirective(md, b.fence+1) + b.text + "\n}\n"
	}
	return imports(src, mod)
}

// continueProgram splices fragment b in at the end of the program's body:
// func run's, when prog has one (the README's programs return errors from
// run), before its final return statement, else func main's. Imports are
// added as imports adds them. The lines after it keep their own line
// numbers.
func continueProgram(prog string, b block, md, mod string) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", prog, parser.SkipObjectResolution)
	if err != nil {
		return "", fmt.Errorf("that program does not parse: %v", err)
	}
	var main, run *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Body != nil {
			switch fd.Name.Name {
			case "main":
				main = fd
			case "run":
				run = fd
			}
		}
	}
	body := main
	if run != nil {
		body = run
	}
	if body == nil {
		return "", errors.New("that program has no func main")
	}
	pos := body.Body.Rbrace
	if n := len(body.Body.List); body == run && n > 0 {
		if ret, ok := body.Body.List[n-1].(*ast.ReturnStmt); ok {
			pos = ret.Pos()
		}
	}
	end := fset.File(pos).Offset(pos)
	at := fset.Position(pos) // where the brace or return is in md
	src := prog[:end] + "\n" + lineDirective(md, b.fence+1) + b.text + "\n" +
		fmt.Sprintf("//line %s:%d:%d\n", at.Filename, at.Line, at.Column) + prog[end:]
	return imports(src, mod), nil
}

// imports adds to src an import of each package that src names and does
// not import, among the module's packages and the common standard ones.
// They go on the package clause's line (package p; import "q"), so that no
// line moves.
func imports(src, mod string) string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.SkipObjectResolution)
	if err != nil {
		return src // the compiler says what is wrong
	}
	need := map[string]bool{}
	conf := types.Config{
		Importer: emptyImporter{},
		Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) {
				if name, ok := strings.CutPrefix(te.Msg, "undefined: "); ok {
					if p := knownPackage(name, mod); p != "" {
						need[p] = true
					}
				}
			}
		},
	}
	_, _ = conf.Check("readme", fset, []*ast.File{f}, nil) // errors go to conf.Error
	if len(need) == 0 {
		return src
	}
	var paths []string
	for p := range need {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		b.WriteString("; import " + strconv.Quote(p))
	}
	at := fset.File(f.Name.End()).Offset(f.Name.End())
	return src[:at] + b.String() + src[at:]
}

// emptyImporter imports every path as a complete package with nothing in
// it: imports needs only to learn which package names are undefined.
type emptyImporter struct{}

func (emptyImporter) Import(p string) (*types.Package, error) {
	pkg := types.NewPackage(p, path.Base(p))
	pkg.MarkComplete()
	return pkg, nil
}

// knownPackage returns the import path of a package a README block may use
// without importing it, or "".
func knownPackage(name, mod string) string {
	switch name {
	case "cublas", "driver", "graph", "lifetime", "loader", "nccl", "nvrtc":
		return mod + "/" + name
	}
	return stdPackages[name]
}

var stdPackages = map[string]string{
	"atomic":   "sync/atomic",
	"bytes":    "bytes",
	"context":  "context",
	"errors":   "errors",
	"filepath": "path/filepath",
	"fmt":      "fmt",
	"io":       "io",
	"log":      "log",
	"math":     "math",
	"os":       "os",
	"runtime":  "runtime",
	"slices":   "slices",
	"strconv":  "strconv",
	"strings":  "strings",
	"sync":     "sync",
	"time":     "time",
	"unsafe":   "unsafe",
}

func TestPlanWrapsFragmentsAndAddsImports(t *testing.T) {
	const mod = "example.com/m"
	md := strings.Join([]string{
		"```go", // 1
		"fmt.Println(graph.Device, time.Second)",
		"```",
		"```go", // 4
		"func twice(x int) int { return 2 * x }",
		"```",
		"```go", // 7
		"errors := []error{}",
		"_ = errors",
		"```",
	}, "\n")
	blocks, err := parseBlocks("DOC.md", md)
	require.NoError(t, err)
	units, skipped, err := plan("DOC.md", blocks, "/d/DOC.md", mod)
	require.NoError(t, err)
	assert.Empty(t, skipped)
	require.Len(t, units, 3)

	assert.Equal(t, "b1", units[0].name)
	assert.Equal(t, kindFragment, units[0].kind)
	assert.Equal(t, `package readme; import "example.com/m/graph"; import "fmt"; import "time"

func _() {
//line /d/DOC.md:2:1
fmt.Println(graph.Device, time.Second)
}
`, units[0].src, "statements go into a function, with the imports they need on the package clause's line")
	assert.Equal(t, "package readme\n\n//line /d/DOC.md:5:1\nfunc twice(x int) int { return 2 * x }\n", units[1].src,
		"declarations stay at the top level")
	assert.NotContains(t, units[2].src, "import", "a name the fragment declares is no package")
}

func TestPlanSplicesContinuationsIntoMain(t *testing.T) {
	md := strings.Join([]string{
		"```go", // 1
		"package main",
		"",
		"func main() {",
		"\tx := 1",
		"\t_ = x",
		"}",
		"",
		"func other() {}",
		"```",
		"<!-- compiled: continues the program above -->", // 11
		"```go",
		"y := x + 1",
		"```",
		"<!-- compiled: continues the program above -->", // 15
		"```go",
		"fmt.Println(y)",
		"```",
	}, "\n")
	blocks, err := parseBlocks("DOC.md", md)
	require.NoError(t, err)
	units, _, err := plan("DOC.md", blocks, "/d/DOC.md", "example.com/m")
	require.NoError(t, err)
	require.Len(t, units, 3)
	assert.Equal(t, kindFile, units[0].kind)
	assert.Equal(t, "//line /d/DOC.md:2:1\npackage main\n\nfunc main() {\n\tx := 1\n\t_ = x\n}\n\nfunc other() {}\n", units[0].src)
	assert.Equal(t, "continues the program above, at line 1", units[2].how)
	assert.Equal(t, `//line /d/DOC.md:2:1
package main; import "fmt"

func main() {
	x := 1
	_ = x

//line /d/DOC.md:13:1
y := x + 1
//line /d/DOC.md:7:1

//line /d/DOC.md:17:1
fmt.Println(y)
//line /d/DOC.md:7:1
}

func other() {}
`, units[2].src, "each continuation comes after the ones before it; the brace keeps its line")
}

func TestPlanRejectsAContinuationOfNothing(t *testing.T) {
	blocks, err := parseBlocks("DOC.md", "<!-- compiled: continues the program above -->\n```go\nx := 1\n```")
	require.NoError(t, err)
	_, _, err = plan("DOC.md", blocks, "/d/DOC.md", "example.com/m")
	assert.ErrorContains(t, err, "DOC.md:2: the block continues the program above, but no whole Go file comes before it")
}

func TestPlanSplicesContinuationsIntoRunBeforeItsReturn(t *testing.T) {
	md := strings.Join([]string{
		"```go", // 1
		"package main",
		"",
		"func main() { _ = run() }",
		"",
		"func run() error {",
		"\tx := 1",
		"\treturn nil",
		"}",
		"```",
		"<!-- compiled: continues the program above -->", // 11
		"```go",
		"return fmt.Errorf(\"%d\", x)",
		"```",
	}, "\n")
	blocks, err := parseBlocks("DOC.md", md)
	require.NoError(t, err)
	units, _, err := plan("DOC.md", blocks, "/d/DOC.md", "example.com/m")
	require.NoError(t, err)
	require.Len(t, units, 2)
	assert.Equal(t, `//line /d/DOC.md:2:1
package main; import "fmt"

func main() { _ = run() }

func run() error {
	x := 1
	
//line /d/DOC.md:13:1
return fmt.Errorf("%d", x)
//line /d/DOC.md:8:2
return nil
}
`, units[1].src, "the fragment goes into run, before its final return, which keeps its line")
}
