// Package layouttest checks generated Go structs against their C layout:
// the generated tables' layout tests (internal/cu, internal/ncclraw,
// internal/cublasraw) compile a C program with gcc that prints sizeof and
// offsetof for every struct, and compare.
package layouttest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Field is one field of a generated struct: its Go and C names and Go's
// offset.
type Field struct {
	Go, C string
	Off   uintptr
}

// Struct is one generated struct (or union): its Go and C names, Go's size
// and its fields.
type Struct struct {
	Go, C  string
	Size   uintptr
	Fields []Field
}

// SharedDir is the directory sub (under ../shared beside the module's
// root, found from the working directory up) when it holds header, else ""
// with the place looked at.
func SharedDir(t testing.TB, header string, sub ...string) (dir, looked string) {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			c := filepath.Join(append([]string{filepath.Dir(d), "shared"}, sub...)...)
			if _, err := os.Stat(filepath.Join(c, header)); err == nil {
				return c, c
			}
			return "", c
		}
	}
	return "", wd
}

// Compare compiles, with gcc (skipping t without it), a C program that
// includes <include> from inc (after stubs, written as headers of their
// own into a directory searched first) and prints the size of every struct
// of layouts and the offset of every field; each must equal Go's.
func Compare(t *testing.T, inc, include string, stubs map[string]string, layouts []Struct) {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the layout check needs a C compiler")
	}
	require.NotEmpty(t, layouts)
	dir := t.TempDir()
	for name, text := range stubs {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	var src bytes.Buffer
	fmt.Fprintf(&src, "#include <stdio.h>\n#include <stddef.h>\n#include <%s>\nint main(void) {\n", include)
	for _, l := range layouts {
		fmt.Fprintf(&src, "\tprintf(\"%s %%zu\\n\", sizeof(%s));\n", l.Go, l.C)
		for _, f := range l.Fields {
			fmt.Fprintf(&src, "\tprintf(\"%s.%s %%zu\\n\", offsetof(%s, %s));\n", l.Go, f.Go, l.C, f.C)
		}
	}
	src.WriteString("\treturn 0;\n}\n")
	cfile := filepath.Join(dir, "layout.c")
	bin := filepath.Join(dir, "layout")
	require.NoError(t, os.WriteFile(cfile, src.Bytes(), 0o644))
	out, err := exec.Command(gcc, "-std=gnu11", "-I", dir, "-I", inc, "-o", bin, cfile).CombinedOutput()
	require.NoError(t, err, "gcc: %s", out)
	out, err = exec.Command(bin).Output()
	require.NoError(t, err)
	got := map[string]uintptr{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		require.True(t, ok)
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
		got[k] = uintptr(n)
	}
	checked := 0
	for _, l := range layouts {
		assert.Equal(t, got[l.Go], l.Size, "sizeof(%s)", l.C)
		checked++
		for _, f := range l.Fields {
			assert.Equal(t, got[l.Go+"."+f.Go], f.Off, "offsetof(%s, %s)", l.C, f.C)
			checked++
		}
	}
	t.Logf("%d structs, %d sizes and offsets match C (headers: %s)", len(layouts), checked, inc)
}
