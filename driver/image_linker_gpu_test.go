package driver_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/loader"
	"github.com/purecuda/cuda/nvrtc"
)

// The image check must accept what NVIDIA's linkers and offline compiler
// write, not only NVRTC's CUBINs: nvJitLink's output (linked from
// relocatable CUBINs, from PTX with and without -lineinfo and -g, and from
// LTO-IR) and nvcc's (-cubin, with -G, -lineinfo and -rdc), for every
// architecture each supports. With $PURECUDA_IMAGE_CORPUS set, every image
// is written there too, for the CPU tests' test data (testdata/cubins).

// jitLink is a minimal binding of nvJitLink for this test (package nvjitlink
// is yet to come): link inputs into a CUBIN for arch.
type jitLink struct {
	create, destroy, add, complete, size, get, logSize, log uintptr
}

type jitInput struct {
	kind int // NVJITLINK_INPUT_CUBIN 1, _PTX 2, _LTOIR 3
	data []byte
}

func openJitLink(t *testing.T) *jitLink {
	lib, err := loader.Open(loader.KindNVJitLink)
	if err != nil {
		t.Logf("no nvJitLink: %v", err)
		return nil
	}
	sym := func(name string) uintptr {
		for _, v := range []string{"_13_0", "_12_0", ""} {
			if p, err := lib.Lookup("__" + name + v); err == nil && p != 0 {
				return p
			}
			if v == "" {
				if p, err := lib.Lookup(name); err == nil && p != 0 {
					return p
				}
			}
		}
		t.Fatalf("nvJitLink at %s has no %s", lib.Path, name)
		return 0
	}
	return &jitLink{
		create: sym("nvJitLinkCreate"), destroy: sym("nvJitLinkDestroy"), add: sym("nvJitLinkAddData"),
		complete: sym("nvJitLinkComplete"), size: sym("nvJitLinkGetLinkedCubinSize"), get: sym("nvJitLinkGetLinkedCubin"),
		logSize: sym("nvJitLinkGetErrorLogSize"), log: sym("nvJitLinkGetErrorLog"),
	}
}

func cstr(s string) *byte { b := append([]byte(s), 0); return &b[0] }

// link runs one link; a failure returns nvJitLink's error log.
func (j *jitLink) link(opts []string, in []jitInput) ([]byte, error) {
	copts := make([]*byte, len(opts))
	for i, o := range opts {
		copts[i] = cstr(o)
	}
	var h uintptr
	if r, _, _ := purego.SyscallN(j.create, uintptr(unsafe.Pointer(&h)), uintptr(len(copts)), uintptr(unsafe.Pointer(&copts[0]))); r != 0 {
		return nil, fmt.Errorf("nvJitLinkCreate %v: result %d", opts, r)
	}
	defer func() { _, _, _ = purego.SyscallN(j.destroy, uintptr(unsafe.Pointer(&h))) }()
	fail := func(what string, r uintptr) error {
		var n uintptr
		_, _, _ = purego.SyscallN(j.logSize, h, uintptr(unsafe.Pointer(&n)))
		log := make([]byte, n+1)
		_, _, _ = purego.SyscallN(j.log, h, uintptr(unsafe.Pointer(&log[0])))
		return fmt.Errorf("%s %v: result %d: %s", what, opts, r, bytes.TrimRight(log, "\x00"))
	}
	name := cstr("input")
	for _, x := range in {
		if r, _, _ := purego.SyscallN(j.add, h, uintptr(x.kind), uintptr(unsafe.Pointer(&x.data[0])), uintptr(len(x.data)), uintptr(unsafe.Pointer(name))); r != 0 {
			return nil, fail("nvJitLinkAddData", r)
		}
	}
	if r, _, _ := purego.SyscallN(j.complete, h); r != 0 {
		return nil, fail("nvJitLinkComplete", r)
	}
	var n uintptr
	if r, _, _ := purego.SyscallN(j.size, h, uintptr(unsafe.Pointer(&n))); r != 0 || n == 0 {
		return nil, fail("nvJitLinkGetLinkedCubinSize", r)
	}
	out := make([]byte, n)
	if r, _, _ := purego.SyscallN(j.get, h, uintptr(unsafe.Pointer(&out[0]))); r != 0 {
		return nil, fail("nvJitLinkGetLinkedCubin", r)
	}
	runtime.KeepAlive(copts)
	runtime.KeepAlive(in)
	runtime.KeepAlive(name)
	return out, nil
}

// checkToolCubin loads b, a CUBIN an NVIDIA tool wrote: the check must not
// refuse it (CUDA may, for an architecture other than the device's).
func checkToolCubin(t *testing.T, ctx *driver.Context, name string, b []byte) {
	if dir := os.Getenv("PURECUDA_IMAGE_CORPUS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		file := strings.NewReplacer(" -", "_", " ", "_", "=", "", ",", "_").Replace(name) + ".cubin"
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), b, 0o644))
	}
	mod, lib := loadModule(ctx, b), loadLibrary(b)
	t.Logf("%-36s %6d bytes: module %s, library %s", name, len(b), mod, lib)
	if mod == "refused-by-check" || lib == "refused-by-check" {
		_, err := ctx.LoadModule(b)
		t.Errorf("%s: the check refuses a CUBIN of NVIDIA's: %v", name, err)
	}
}

func TestImageLinkedCubinsPassTheCheck(t *testing.T) {
	e, _ := setup(t)
	j := openJitLink(t)
	if j == nil {
		t.Skip("nvJitLink is not installed (PURECUDA_LIBNVJITLINK)")
	}
	archs, err := nvrtc.SupportedArchs()
	require.NoError(t, err)
	linked := 0
	for _, a := range archs {
		arch := fmt.Sprintf("sm_%d", a)
		for _, src := range []struct{ name, code string }{{"plain", imageSrc}, {"rich", imageRichSrc}} {
			rdc, err := nvrtc.Compile(src.code, nvrtc.Options{Arch: arch, RelocatableDeviceCode: true})
			if err != nil || len(rdc.CUBIN) == 0 {
				t.Logf("%s %s: NVRTC makes no relocatable CUBIN: %v", arch, src.name, err)
				continue
			}
			lto, _ := nvrtc.Compile(src.code, nvrtc.Options{Arch: arch, LTO: true})
			links := []struct {
				name string
				opts []string
				in   []jitInput
			}{
				{"cubin", nil, []jitInput{{1, rdc.CUBIN}}},
				{"ptx", nil, []jitInput{{2, append(bytes.Clone(rdc.PTX), 0)}}},
				{"ptx -lineinfo", []string{"-lineinfo"}, []jitInput{{2, append(bytes.Clone(rdc.PTX), 0)}}},
				{"ptx -g", []string{"-g"}, []jitInput{{2, append(bytes.Clone(rdc.PTX), 0)}}},
			}
			if lto != nil && len(lto.LTOIR) > 0 {
				links = append(links, struct {
					name string
					opts []string
					in   []jitInput
				}{"lto", []string{"-lto"}, []jitInput{{3, lto.LTOIR}}})
			}
			for _, l := range links {
				name := fmt.Sprintf("nvjitlink %s %s %s", arch, l.name, src.name)
				b, err := j.link(append([]string{"-arch=" + arch}, l.opts...), l.in)
				if err != nil {
					t.Logf("%s: nvJitLink makes no CUBIN: %v", name, err)
					continue
				}
				linked++
				checkToolCubin(t, e.ctx, name, b)
			}
		}
	}
	require.NotZero(t, linked, "nvJitLink linked nothing")
}

// nvcc's CUBINs for every real architecture it lists, plain, -G,
// -lineinfo and -rdc, of both sources.
func TestImageNvccCubinsPassTheCheck(t *testing.T) {
	e, _ := setup(t)
	bin := nvcc()
	if bin == "" {
		t.Skip("nvcc is not installed")
	}
	out, err := exec.Command(bin, "--list-gpu-code").Output()
	require.NoError(t, err)
	dir := t.TempDir()
	made := 0
	for _, arch := range strings.Fields(string(out)) {
		if !strings.HasPrefix(arch, "sm_") {
			continue
		}
		for _, src := range []struct{ name, code string }{{"plain", imageSrc}, {"rich", imageRichSrc}} {
			cu := filepath.Join(dir, src.name+".cu")
			require.NoError(t, os.WriteFile(cu, []byte(src.code), 0o644))
			for _, v := range [][]string{nil, {"-G"}, {"-lineinfo"}, {"-rdc=true"}} {
				name := strings.TrimSpace(fmt.Sprintf("nvcc %s %s %s", arch, strings.Join(v, " "), src.name))
				o := filepath.Join(dir, "out.cubin")
				args := append([]string{"-cubin", "-arch=" + arch, "-o", o}, v...)
				if msg, err := exec.Command(bin, append(args, cu)...).CombinedOutput(); err != nil {
					t.Logf("%s: nvcc makes no CUBIN: %v %s", name, err, msg)
					continue
				}
				b, err := os.ReadFile(o)
				require.NoError(t, err)
				made++
				checkToolCubin(t, e.ctx, name, b)
			}
		}
	}
	require.NotZero(t, made, "nvcc compiled nothing")
}
