package cublasraw_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cublasraw"
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

// cublasHeaderDir finds cublas_api.h: $PURECUDA_CUBLAS_INCLUDE, else the
// shared copy beside the repository (../shared/cuda-include/13.0), else
// "" with where it looked.
func cublasHeaderDir(t *testing.T) (dir, looked string) {
	if p := os.Getenv("PURECUDA_CUBLAS_INCLUDE"); p != "" {
		_, err := os.Stat(filepath.Join(p, "cublas_api.h"))
		require.NoError(t, err, "PURECUDA_CUBLAS_INCLUDE=%s holds no cublas_api.h", p)
		return p, p
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			c := filepath.Join(filepath.Dir(d), "shared", "cuda-include", "13.0")
			if _, err := os.Stat(filepath.Join(c, "cublas_api.h")); err == nil {
				return c, c
			}
			return "", c
		}
	}
	return "", wd
}

// halfStubs are the C++ headers cublas_api.h includes, reduced to the two
// half types as the generator declares them (their storage).
var halfStubs = map[string]string{
	"cuda_fp16.h": "typedef struct __half { unsigned short x; } __half;\n",
	"cuda_bf16.h": "typedef struct __nv_bfloat16 { unsigned short x; } __nv_bfloat16;\n",
}

// TestStructLayout compiles a C program against cublasLt.h (which includes
// cublas_api.h) that prints sizeof and offsetof for every generated
// struct, and compares them with Go's.
func TestStructLayout(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the layout check needs a C compiler")
	}
	inc, looked := cublasHeaderDir(t)
	if inc == "" {
		t.Skipf("cublas_api.h not found: PURECUDA_CUBLAS_INCLUDE is unset and %s has none", looked)
	}
	text, err := os.ReadFile(filepath.Join(inc, "cublas_api.h"))
	require.NoError(t, err)
	var ver [4]int
	for i, m := range []string{"MAJOR", "MINOR", "PATCH", "BUILD"} {
		v := regexp.MustCompile(`(?m)^#define CUBLAS_VER_` + m + ` ([0-9]+)`).FindSubmatch(text)
		require.NotNil(t, v, "cublas_api.h defines no CUBLAS_VER_%s", m)
		ver[i], _ = strconv.Atoi(string(v[1]))
	}
	want := [4]int{cublasraw.CUBLAS_VER_MAJOR, cublasraw.CUBLAS_VER_MINOR, cublasraw.CUBLAS_VER_PATCH, cublasraw.CUBLAS_VER_BUILD}
	if ver != want && os.Getenv("PURECUDA_CUBLAS_INCLUDE") == "" {
		t.Skipf("%s/cublas_api.h is cuBLAS %v, not the %v the table was generated from; set PURECUDA_CUBLAS_INCLUDE to compare with it anyway", inc, ver, want)
	}
	require.NotEmpty(t, layouts)
	dir := t.TempDir()
	for name, text := range halfStubs {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	var src bytes.Buffer
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include <cublasLt.h>\nint main(void) {\n")
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
