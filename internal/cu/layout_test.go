package cu_test

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

type layoutField struct {
	Go, C string
	Off   uintptr
}

type layout struct {
	Go, C  string
	Size   uintptr
	Fields []layoutField
}

// headerDir finds cuda.h: $PURECUDA_CUDA_INCLUDE, the shared copy beside the
// repository (CI), $CUDA_PATH/include, /usr/local/cuda/include.
func headerDir() string {
	var cands []string
	if p := os.Getenv("PURECUDA_CUDA_INCLUDE"); p != "" {
		cands = append(cands, p)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				cands = append(cands, filepath.Join(d, "..", "shared", "cuda-include", "13.0"))
				break
			}
		}
	}
	if p := os.Getenv("CUDA_PATH"); p != "" {
		cands = append(cands, filepath.Join(p, "include"))
	}
	cands = append(cands, "/usr/local/cuda/include")
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, "cuda.h")); err == nil {
			return c
		}
	}
	return ""
}

// TestStructLayout compiles a C program that prints sizeof and offsetof for
// every generated struct and union and compares with unsafe.Sizeof/Offsetof.
func TestStructLayout(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the layout check needs a C compiler")
	}
	inc := headerDir()
	if inc == "" {
		t.Skip("cuda.h not found (set PURECUDA_CUDA_INCLUDE)")
	}
	require.NotEmpty(t, layouts)
	var src bytes.Buffer
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include <cuda.h>\nint main(void) {\n")
	for _, l := range layouts {
		fmt.Fprintf(&src, "\tprintf(\"%s %%zu\\n\", sizeof(%s));\n", l.Go, l.C)
		for _, f := range l.Fields {
			fmt.Fprintf(&src, "\tprintf(\"%s.%s %%zu\\n\", offsetof(%s, %s));\n", l.Go, f.Go, l.C, f.C)
		}
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	cfile := filepath.Join(dir, "layout.c")
	bin := filepath.Join(dir, "layout")
	require.NoError(t, os.WriteFile(cfile, src.Bytes(), 0o644))
	out, err := exec.Command(gcc, "-std=gnu11", "-I", inc, "-o", bin, cfile).CombinedOutput()
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
	t.Logf("%d structs and unions, %d sizes and offsets match C (headers: %s)", len(layouts), checked, inc)
}
