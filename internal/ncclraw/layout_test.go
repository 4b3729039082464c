package ncclraw_test

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

	"github.com/purecuda/cuda/internal/ncclraw"
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

// ncclHeaderDir finds nccl.h: $PURECUDA_NCCL_INCLUDE, else the shared copy
// beside the repository (../shared/nccl-include/2.28), else "" with where
// it looked.
func ncclHeaderDir(t *testing.T) (dir, looked string) {
	if p := os.Getenv("PURECUDA_NCCL_INCLUDE"); p != "" {
		_, err := os.Stat(filepath.Join(p, "nccl.h"))
		require.NoError(t, err, "PURECUDA_NCCL_INCLUDE=%s holds no nccl.h", p)
		return p, p
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			c := filepath.Join(filepath.Dir(d), "shared", "nccl-include", "2.28")
			if _, err := os.Stat(filepath.Join(c, "nccl.h")); err == nil {
				return c, c
			}
			return "", c
		}
	}
	return "", wd
}

// cudaStubs are the CUDA headers nccl.h includes, reduced to what it uses:
// cudaStream_t. cuda_bf16.h is included only with a CUDART_VERSION, which
// the stubs leave undefined.
var cudaStubs = map[string]string{
	"cuda_runtime.h": "typedef struct CUstream_st *cudaStream_t;\n",
	"cuda_fp16.h":    "",
}

// TestStructLayout compiles a C program against nccl.h that prints sizeof
// and offsetof for every generated struct, and compares them with Go's.
func TestStructLayout(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the layout check needs a C compiler")
	}
	inc, looked := ncclHeaderDir(t)
	if inc == "" {
		t.Skipf("nccl.h not found: PURECUDA_NCCL_INCLUDE is unset and %s has none", looked)
	}
	text, err := os.ReadFile(filepath.Join(inc, "nccl.h"))
	require.NoError(t, err)
	code := regexp.MustCompile(`(?m)^#define NCCL_VERSION_CODE ([0-9]+)`).FindSubmatch(text)
	require.NotNil(t, code, "nccl.h defines no NCCL_VERSION_CODE")
	if string(code[1]) != strconv.Itoa(ncclraw.NCCL_VERSION_CODE) && os.Getenv("PURECUDA_NCCL_INCLUDE") == "" {
		t.Skipf("%s/nccl.h is NCCL_VERSION_CODE %s, not the %d the table was generated from; set PURECUDA_NCCL_INCLUDE to compare with it anyway",
			inc, code[1], ncclraw.NCCL_VERSION_CODE)
	}
	require.NotEmpty(t, layouts)
	dir := t.TempDir()
	for name, text := range cudaStubs {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	var src bytes.Buffer
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include <nccl.h>\nint main(void) {\n")
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
	t.Logf("%d structs, %d sizes and offsets match C (header: %s)", len(layouts), checked, inc)
}
