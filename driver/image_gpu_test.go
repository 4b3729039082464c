package driver_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/nvrtc"
)

// imageSrc has what a loader must relocate and lay out: a __device__
// global, __constant__ data, shared memory and two kernels.
const imageSrc = `
extern "C" {
__device__ int counter;
__constant__ float scale[4] = {1, 2, 3, 4};
__global__ void scaled(float* out, const float* in, int n) {
	__shared__ float tile[128];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	tile[threadIdx.x % 128] = i < n ? in[i] : 0;
	__syncthreads();
	if (i < n) { out[i] = tile[threadIdx.x % 128] * scale[i % 4]; atomicAdd(&counter, 1); }
}
__global__ void nothing() {}
}
`

// imageRichSrc uses more of what ptxas records in a CUBIN's .nv.info
// records and relocations: printf (a system call), a recursive device
// function (a call stack and frame size), a function pointer (an indirect
// call), launch bounds, a register limit, warp shuffles, system-scope
// atomics, a trap, dynamic shared memory and a local array.
const imageRichSrc = `
extern "C" {
__device__ unsigned long long total;
__device__ __noinline__ int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
__device__ __noinline__ int twice(int x) { return 2 * x; }
__device__ __noinline__ int thrice(int x) { return 3 * x; }
__device__ int (*pick[2])(int) = {twice, thrice};
__global__ void __launch_bounds__(256, 2) rich(int* out, int n, int which) {
	extern __shared__ int dyn[];
	int local[32];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	for (int k = 0; k < 32; k++) local[k] = k * i;
	dyn[threadIdx.x] = local[i % 32] + fact(i % 6) + pick[which & 1](i);
	__syncthreads();
	int v = __shfl_down_sync(0xffffffff, dyn[threadIdx.x], 1);
	if (i < n) out[i] = v;
	atomicAdd_system(&total, 1ull);
	if (i == 0 && n < 0) { printf("n %d\n", n); __trap(); }
}
__global__ void __maxnreg__(32) narrow(float* x) { x[threadIdx.x] = __sinf(x[threadIdx.x]); }
}
`

// realImages compiles imageSrc for the device: a CUBIN and its PTX, and
// fatbins made of them.
type realImages struct {
	arch                      int
	cubin, ptx                []byte
	fatCubin, fatPTX, fatBoth []byte
}

func compileImages(t *testing.T, dev *driver.Device) *realImages {
	t.Helper()
	res, err := nvrtc.Compile(imageSrc, nvrtc.Options{Arch: dev.Arch()})
	require.NoError(t, err)
	require.NotEmpty(t, res.CUBIN)
	major, minor := dev.ComputeCapability()
	im := &realImages{arch: major*10 + minor, cubin: res.CUBIN, ptx: res.PTX}
	cubinEntry := fatEntry{kind: 2, arch: im.arch, major: 1, minor: uint16(res.CUBIN[8]), payload: res.CUBIN}
	pmaj, pmin := ptxVersion(res.PTX)
	ptxEntry := fatEntry{kind: 1, arch: im.arch, major: pmaj, minor: pmin, payload: append(bytes.Clone(res.PTX), 0)}
	im.fatCubin = wrapFatbin(cubinEntry)
	im.fatPTX = wrapFatbin(ptxEntry)
	im.fatBoth = wrapFatbin(cubinEntry, ptxEntry)
	return im
}

// ptxVersion reads PTX's ".version X.Y".
func ptxVersion(ptx []byte) (uint16, uint16) {
	m := regexp.MustCompile(`\.version (\d+)\.(\d+)`).FindSubmatch(ptx)
	if m == nil {
		return 0, 0
	}
	a, _ := strconv.Atoi(string(m[1]))
	b, _ := strconv.Atoi(string(m[2]))
	return uint16(a), uint16(b)
}

// fatEntry is one entry of a fatbin made by wrapFatbin.
type fatEntry struct {
	kind         uint16 // 1 PTX, 2 ELF
	arch         int
	major, minor uint16
	payload      []byte
}

// wrapFatbin lays out a fatbin (magic 0xBA55ED50, version 1, 16-byte
// header) as nvcc's fatbinary does: each entry a 64-byte header (72 for
// PTX, whose empty options block follows at offset 64) and its payload,
// padded to 8 bytes.
func wrapFatbin(entries ...fatEntry) []byte {
	le := binary.LittleEndian
	var body []byte
	for _, e := range entries {
		hsize := 64
		if e.kind == 1 {
			hsize = 72
		}
		h := make([]byte, hsize)
		p := bytes.Clone(e.payload)
		for len(p)%8 != 0 {
			p = append(p, 0)
		}
		le.PutUint16(h[0:], e.kind)
		le.PutUint16(h[2:], 0x0101)
		le.PutUint32(h[4:], uint32(hsize))
		le.PutUint64(h[8:], uint64(len(p)))
		if e.kind == 1 {
			le.PutUint32(h[20:], 64)
		}
		le.PutUint16(h[24:], e.minor)
		le.PutUint16(h[26:], e.major)
		le.PutUint32(h[28:], uint32(e.arch))
		le.PutUint64(h[40:], 0x15) // 64-bit, produced by CUDA, Linux host
		body = append(append(body, h...), p...)
	}
	b := make([]byte, 16, 16+len(body))
	le.PutUint32(b, 0xBA55ED50)
	le.PutUint16(b[4:], 1)
	le.PutUint16(b[6:], 16)
	le.PutUint64(b[8:], uint64(len(body)))
	return append(b, body...)
}

// nvcc returns the path of nvcc, or "" when the machine has none.
func nvcc() string {
	if p, err := exec.LookPath("nvcc"); err == nil {
		return p
	}
	for _, d := range []string{os.Getenv("CUDA_PATH"), "/usr/local/cuda"} {
		if p := filepath.Join(d, "bin", "nvcc"); d != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return ""
}

// TestImageRealImagesLoad: the check accepts what NVRTC makes, and fatbins
// laid out as wrapFatbin does, in both LoadModule and LoadLibrary; their
// kernels run.
func TestImageRealImagesLoad(t *testing.T) {
	e, s := setup(t)
	im := compileImages(t, e.dev)
	for _, c := range []struct {
		name string
		img  []byte
	}{
		{"CUBIN", im.cubin}, {"PTX", im.ptx}, {"fatbin of the CUBIN", im.fatCubin},
		{"fatbin of the PTX", im.fatPTX}, {"fatbin of both", im.fatBoth},
	} {
		t.Run(c.name, func(t *testing.T) {
			mod, err := e.ctx.LoadModule(c.img)
			require.NoError(t, err, "a fatbin failing here may mean wrapFatbin's layout is wrong, not the check")
			defer mod.Close()
			lib, err := driver.LoadLibrary(c.img)
			require.NoError(t, err)
			defer lib.Close()
			for _, fn := range []func() (*driver.Function, error){
				func() (*driver.Function, error) { return mod.Function("nothing") },
				func() (*driver.Function, error) { return lib.Function("nothing") },
			} {
				f, err := fn()
				require.NoError(t, err)
				require.NoError(t, s.Launch(f, driver.Grid(1), driver.Block(32)))
			}
			require.NoError(t, s.Synchronize())
		})
	}
}

// TestImageNvccOutputLoads: nvcc's own fatbin (compressed, where nvcc
// compresses) and CUBIN pass the check and load. Skips without a working
// nvcc.
func TestImageNvccOutputLoads(t *testing.T) {
	e, _ := setup(t)
	bin := nvcc()
	if bin == "" {
		t.Skip("nvcc not found (PATH, $CUDA_PATH/bin, /usr/local/cuda/bin)")
	}
	fat, cubin, err := nvccImages(t, bin, e.dev)
	if err != nil {
		t.Skipf("nvcc does not work here: %v", err)
	}
	for name, img := range map[string][]byte{"fatbin": fat, "CUBIN": cubin} {
		mod, err := e.ctx.LoadModule(img)
		require.NoError(t, err, name)
		_, err = mod.Function("scaled")
		assert.NoError(t, err, name)
		require.NoError(t, mod.Close())
		lib, err := driver.LoadLibrary(img)
		require.NoError(t, err, name)
		_, err = lib.Function("scaled")
		assert.NoError(t, err, name)
		require.NoError(t, lib.Close())
	}
}

// nvccImages compiles imageSrc with nvcc into a fatbin (SASS and PTX for
// the device) and a CUBIN.
func nvccImages(t *testing.T, bin string, dev *driver.Device) (fatbin, cubin []byte, err error) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "k.cu")
	if err := os.WriteFile(src, []byte(imageSrc), 0o644); err != nil {
		return nil, nil, err
	}
	major, minor := dev.ComputeCapability()
	cc := fmt.Sprintf("%d%d", major, minor)
	run := func(out string, args ...string) ([]byte, error) {
		cmd := exec.Command(bin, append(args, "-o", filepath.Join(dir, out), src)...)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", cmd, err, msg)
		}
		return os.ReadFile(filepath.Join(dir, out))
	}
	if fatbin, err = run("k.fatbin", "-fatbin", "-gencode=arch=compute_"+cc+",code=[sm_"+cc+",compute_"+cc+"]"); err != nil {
		return nil, nil, err
	}
	if cubin, err = run("k.cubin", "-cubin", "-arch=sm_"+cc); err != nil {
		return nil, nil, err
	}
	return fatbin, cubin, nil
}

// TestLoadLibraryReportsJITErrors: a library that cannot load fails in
// LoadLibrary, not at its first kernel lookup: PTX with a syntax error as a
// *ModuleError with the JIT log (as LoadModule reports it), random bytes
// with ErrInvalidImage before CUDA sees them.
func TestLoadLibraryReportsJITErrors(t *testing.T) {
	e, _ := setup(t)
	const broken = ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry k() { bogus.instruction; }\n"
	lib, err := driver.LoadLibrary([]byte(broken))
	assert.Nil(t, lib)
	var me *driver.ModuleError
	require.ErrorAs(t, err, &me, "LoadLibrary of PTX with a syntax error: %v", err)
	assert.ErrorIs(t, err, driver.ErrInvalidPtx)
	assert.NotEmpty(t, me.Log, "the JIT log")
	t.Logf("LoadLibrary: %v", err)

	_, err = e.ctx.LoadModule([]byte(broken))
	var mme *driver.ModuleError
	require.ErrorAs(t, err, &mme)
	assert.NotEmpty(t, mme.Log)

	junk := make([]byte, 4096)
	r := rand.New(rand.NewPCG(18, 14))
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	junk[0] = 0x9c // not a magic number, not text
	lib, err = driver.LoadLibrary(junk)
	assert.Nil(t, lib)
	assert.ErrorIs(t, err, driver.ErrInvalidImage)
	_, err = e.ctx.LoadModule(junk)
	assert.ErrorIs(t, err, driver.ErrInvalidImage)

	lib, err = driver.LoadLibrary([]byte("this is text, but not PTX"))
	assert.Nil(t, lib)
	require.ErrorAs(t, err, &me)
	t.Logf("LoadLibrary of text that is not PTX: %v", err)
}

// TestImageNVRTCCubinsPassTheCheck: the CUBINs NVRTC writes for every
// architecture it supports, plain, relocatable (-rdc), with -G and with
// -lineinfo, and as the "a" and "f" variants, pass the check: each loads,
// or CUDA refuses it (a CUBIN for another architecture), never the check.
// It logs each one's identification and e_flags, the values the check
// knows (image_cudaelf.go).
func TestImageNVRTCCubinsPassTheCheck(t *testing.T) {
	e, _ := setup(t)
	archs, err := nvrtc.SupportedArchs()
	require.NoError(t, err)
	for _, a := range archs {
		type variant struct {
			name string
			o    nvrtc.Options
		}
		arch := fmt.Sprintf("sm_%d", a)
		vs := []variant{
			{arch, nvrtc.Options{Arch: arch}},
			{arch + " -rdc", nvrtc.Options{Arch: arch, RelocatableDeviceCode: true}},
			{arch + " -G", nvrtc.Options{Arch: arch, Debug: true}},
			{arch + " -lineinfo", nvrtc.Options{Arch: arch, LineInfo: true}},
		}
		if a >= 90 {
			vs = append(vs, variant{arch + "a", nvrtc.Options{Arch: arch + "a"}})
		}
		if a >= 100 {
			vs = append(vs, variant{arch + "f", nvrtc.Options{Arch: arch + "f"}})
		}
		for _, v := range vs {
			for _, src := range []struct{ name, code string }{{"plain", imageSrc}, {"rich", imageRichSrc}} {
				checkNVRTCCubin(t, e.ctx, v.name+" "+src.name, src.code, v.o)
			}
		}
	}
}

// checkNVRTCCubin compiles code with o and loads the CUBIN: the check
// must not refuse it. With $PURECUDA_IMAGE_CORPUS set, the CUBIN is
// written there too (name.cubin), for the CPU tests' test data.
func checkNVRTCCubin(t *testing.T, ctx *driver.Context, name, code string, o nvrtc.Options) {
	le := binary.LittleEndian
	res, err := nvrtc.Compile(code, o)
	if err != nil || len(res.CUBIN) < 64 {
		t.Logf("%-24s NVRTC makes no CUBIN: %v", name, err)
		return
	}
	b := res.CUBIN
	if dir := os.Getenv("PURECUDA_IMAGE_CORPUS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		file := strings.NewReplacer(" -", "_", " ", "_").Replace(name) + ".cubin"
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), b, 0o644))
	}
	mod := loadModule(ctx, b)
	lib := loadLibrary(b)
	t.Logf("%-24s OS ABI 0x%02x, ABI version %d, e_type %d, e_version 0x%x, e_flags 0x%08x: module %s, library %s",
		name, b[7], b[8], le.Uint16(b[16:]), le.Uint32(b[20:]), le.Uint32(b[48:]), mod, lib)
	if mod == "refused-by-check" || lib == "refused-by-check" {
		_, err := ctx.LoadModule(b)
		t.Errorf("%s: NVRTC's CUBIN is refused by the check: %v", name, err)
	}
}
