package readme_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeGoBlocksCompile builds every Go block of README.md as the
// package doc describes, and fails with the block's line and the compiler's
// message for each one that does not compile.
func TestReadmeGoBlocksCompile(t *testing.T) {
	goTool := lookGo(t)
	root, mod := moduleRoot(t)
	md := filepath.Join(root, "README.md")
	data, err := os.ReadFile(md)
	require.NoError(t, err)

	blocks, err := parseBlocks("README.md", string(data))
	require.NoError(t, err)
	units, skipped, err := plan("README.md", blocks, md, mod)
	require.NoError(t, err)
	failed := compile(t, goTool, root, md, "README.md", units)
	for _, u := range units {
		if msg, ok := failed[u.name]; ok {
			t.Errorf("README.md:%d: the go block (%s) does not compile:\n%s", u.block.fence, u.how, indent(msg))
		}
	}

	kinds := map[string]int{}
	for _, u := range units {
		kinds[u.kind]++
	}
	t.Logf("README.md: %d of %d Go blocks compile (%d whole files, %d fragments, %d continuing a program); %d not compiled by request",
		len(units)-len(failed), len(units), kinds[kindFile], kinds[kindFragment], kinds[kindContinued], len(skipped))
	for _, b := range skipped {
		t.Logf("README.md:%d: not compiled: %s", b.fence, b.reason)
	}
}

// lookGo finds the go tool, or skips: the blocks are built with it. (The
// test binaries that tests/gpu-bundle.sh carries to a GPU machine without Go
// do not include this package.)
func lookGo(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the README's Go blocks are built with the go tool, which is not on PATH: %v", err)
	}
	return p
}

// moduleRoot returns the module's directory and path.
func moduleRoot(t *testing.T) (root, mod string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(gomod)
	require.NotNil(t, m, "go.mod names no module")
	return root, string(m[1])
}

// compile builds units with the go tool, from files in a temporary
// directory overlaid at root/tests/readme/_compiled/NAME/main.go, and
// returns the compiler's message for each unit that does not compile, by
// name, with md's path written as display.
func compile(t *testing.T, goTool, root, md, display string, units []unit) map[string]string {
	t.Helper()
	if len(units) == 0 {
		return nil
	}
	dir := t.TempDir()
	overlay := map[string]string{}
	args := []string{"list", "-e", "-export", "-json=ImportPath,Error,DepsErrors"}
	var pkgs []string
	for _, u := range units {
		file := filepath.Join(dir, u.name+".go")
		require.NoError(t, os.WriteFile(file, []byte(u.src), 0o644))
		overlay[filepath.Join(root, "tests", "readme", "_compiled", u.name, "main.go")] = file
		pkgs = append(pkgs, "./tests/readme/_compiled/"+u.name)
	}
	js, err := json.Marshal(map[string]any{"Replace": overlay})
	require.NoError(t, err)
	overlayFile := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(overlayFile, js, 0o644))

	cmd := exec.Command(goTool, append(append(args, "-overlay="+overlayFile), pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "go list: %s", stderr.String())

	names := newNames(root, md, display)
	failed, seen := map[string]string{}, map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	for {
		var p struct {
			ImportPath string
			Error      *struct{ Err string }
			DepsErrors []struct{ Err string }
		}
		err := dec.Decode(&p)
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "go list -json")
		name := p.ImportPath[strings.LastIndex(p.ImportPath, "/")+1:]
		seen[name] = true
		var msgs []string
		if p.Error != nil {
			msgs = append(msgs, compilerMessage(p.Error.Err))
		}
		for _, e := range p.DepsErrors {
			msgs = append(msgs, "a package it imports does not build: "+compilerMessage(e.Err))
		}
		if len(msgs) > 0 {
			failed[name] = names.Replace(strings.Join(msgs, "\n"))
		}
	}
	for _, u := range units {
		if !seen[u.name] {
			failed[u.name] = "go list did not report it:\n" + stdout.String()
		}
	}
	return failed
}

// newNames rewrites the ways the go tool writes md's path (the //line
// directives name it) as display.
func newNames(root, md, display string) *strings.Replacer {
	olds := []string{md}
	if rel, err := filepath.Rel(root, md); err == nil {
		olds = append(olds, "."+string(filepath.Separator)+rel, rel)
	}
	sort.Slice(olds, func(i, j int) bool { return len(olds[i]) > len(olds[j]) })
	var pairs []string
	for _, o := range olds {
		pairs = append(pairs, o, display)
	}
	return strings.NewReplacer(pairs...)
}

// compilerMessage drops the "# import/path" line the go tool puts first.
func compilerMessage(s string) string {
	if strings.HasPrefix(s, "# ") {
		if _, rest, ok := strings.Cut(s, "\n"); ok {
			s = rest
		}
	}
	return strings.TrimSpace(s)
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(s, "\n", "\n\t")
}

// TestReadmeCompileErrorsNameTheLine builds blocks that do not compile and
// checks that each failure names its block and gives the compiler's message
// at the line of the Markdown file. The continuation is the README's graph
// snippet in an older form that declared a and c again.
func TestReadmeCompileErrorsNameTheLine(t *testing.T) {
	goTool := lookGo(t)
	root, mod := moduleRoot(t)
	md := strings.Join([]string{
		"```go", // 1
		"package main",
		"",
		`import "github.com/purecuda/cuda/driver"`,
		"",
		"func main() {",
		"\tctx, _ := driver.DeviceByOrdinal(0)",
		"\ta, c := ctx, ctx",
		"\t_, _ = a, c",
		"}",
		"```",
		"<!-- compiled: continues the program above -->", // 12
		"```go",
		"a, _ := driver.Alloc[float32](nil, 4)",
		"```",
		"```go", // 16
		"unused := 1",
		"```",
		"<!-- not compiled: a sketch -->", // 19
		"```go",
		"x := ...",
		"```",
	}, "\n")
	path := filepath.Join(t.TempDir(), "DOC.md")
	blocks, err := parseBlocks("DOC.md", md)
	require.NoError(t, err)
	units, skipped, err := plan("DOC.md", blocks, path, mod)
	require.NoError(t, err)
	require.Len(t, units, 3)
	require.Len(t, skipped, 1)

	failed := compile(t, goTool, root, path, "DOC.md", units)
	assert.NotContains(t, failed, "b1", "the program itself compiles")
	assert.Contains(t, failed["b13"], "DOC.md:14:6: no new variables on left side of :=\n")
	assert.Equal(t, "DOC.md:17:1: declared and not used: unused", failed["b16"])
	assert.Len(t, failed, 2)
}
