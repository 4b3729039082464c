package loadspec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/loadspec"
)

// fakeFS is a directory tree under a temporary root that stands for "/":
// its Glob answers for absolute Linux paths as if the tree were the
// machine's file system.
type fakeFS struct{ root string }

func newFS(t *testing.T, files ...string) fakeFS {
	fs := fakeFS{t.TempDir()}
	for _, f := range files {
		p := filepath.Join(fs.root, filepath.FromSlash(f))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("not a library"), 0o644))
	}
	return fs
}

func (fs fakeFS) glob(pattern string) ([]string, error) {
	m, err := filepath.Glob(fs.root + pattern)
	for i := range m {
		m[i] = strings.TrimPrefix(m[i], fs.root)
	}
	return m, err
}

func (fs fakeFS) env(goarch string, kv map[string]string) loadspec.Env {
	return loadspec.Env{GOOS: "linux", GOARCH: goarch, Getenv: func(k string) string { return kv[k] }, Glob: fs.glob}
}

func paths(cs []loadspec.Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Path)
	}
	return out
}

// found is the candidates that are something to open (not looked-for and
// missing).
func found(cs []loadspec.Candidate) []string {
	var out []string
	for _, c := range cs {
		if c.Missing == "" {
			out = append(out, c.Path)
		}
	}
	return out
}

func TestDriverSearch(t *testing.T) {
	fs := newFS(t, "/usr/local/nvidia/lib64/libcuda.so.1")
	s := loadspec.Search(&loadspec.Driver, fs.env("amd64", map[string]string{"VIRTUAL_ENV": "/venv", "CUDA_PATH": "/opt/cuda"}))
	assert.False(t, s.Override)
	assert.Equal(t, []loadspec.Candidate{
		{Path: "libcuda.so.1"}, {Path: "libcuda.so"},
		{Path: "/usr/lib/wsl/lib/libcuda.so.1", Missing: "no such file"},
		{Path: "/usr/local/nvidia/lib64/libcuda.so.1"},
	}, s.Candidates, "the driver comes with the NVIDIA driver: no toolkit, no wheels")

	win := loadspec.Search(&loadspec.Driver, loadspec.Env{GOOS: "windows", GOARCH: "amd64", Getenv: func(string) string { return "" }, Glob: fs.glob})
	assert.Equal(t, []string{"nvcuda.dll"}, paths(win.Candidates))
}

func TestOverrideIsTheOnlyCandidate(t *testing.T) {
	fs := newFS(t, "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13")
	for _, d := range []*loadspec.Desc{&loadspec.Driver, &loadspec.NVRTC, &loadspec.NCCL, &loadspec.CUBLAS, &loadspec.CUBLASLt, &loadspec.NVJitLink} {
		s := loadspec.Search(d, fs.env("amd64", map[string]string{d.EnvVar: "/x/lib.so", "VIRTUAL_ENV": "/venv"}))
		assert.True(t, s.Override, d.Name)
		assert.Equal(t, []loadspec.Candidate{{Path: "/x/lib.so"}}, s.Candidates, "%s: not even checked: the open reports what is wrong with it", d.Name)
	}
}

func TestNVRTCToolkitOrder(t *testing.T) {
	fs := newFS(t, "/usr/local/cuda/lib64/libnvrtc.so.12")
	s := loadspec.Search(&loadspec.NVRTC, fs.env("amd64", map[string]string{"CUDA_PATH": "/opt/cuda", "CUDA_HOME": "/opt/home"}))
	p := paths(s.Candidates)
	require.GreaterOrEqual(t, len(p), 4*4+4)
	assert.Equal(t, "/opt/cuda/lib64/libnvrtc.so.13", p[0])
	assert.Equal(t, "/opt/cuda/lib64/libnvrtc.so", p[3])
	assert.Equal(t, "/opt/home/lib64/libnvrtc.so.13", p[4])
	assert.Equal(t, "/usr/local/cuda/lib64/libnvrtc.so.12", p[9])
	assert.Equal(t, "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.11.2", p[14])
	assert.Equal(t, []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}, p[16:20])
	assert.Equal(t, []string{"/usr/local/cuda/lib64/libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}, found(s.Candidates))
	for _, c := range s.Candidates[:16] {
		if c.Path != "/usr/local/cuda/lib64/libnvrtc.so.12" {
			assert.Equal(t, "no such file", c.Missing, c.Path)
		}
	}

	same := paths(loadspec.Search(&loadspec.NVRTC, fs.env("amd64", map[string]string{"CUDA_PATH": "/usr/local/cuda", "CUDA_HOME": "/usr/local/cuda/"})).Candidates)
	assert.Equal(t, "/usr/local/cuda/lib64/libnvrtc.so.13", same[0])
	assert.Equal(t, "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13", same[4], "a directory named twice is searched once")

	arm := paths(loadspec.Search(&loadspec.NVRTC, fs.env("arm64", nil)).Candidates)
	assert.Equal(t, "/usr/local/cuda/lib64/libnvrtc.so.13", arm[0])
	assert.Contains(t, arm, "/usr/local/cuda/targets/sbsa-linux/lib/libnvrtc.so.13")
	assert.Contains(t, arm, "/usr/local/cuda/targets/aarch64-linux/lib/libnvrtc.so")
}

// TestWheelSearchOrder builds a machine with NVRTC in a virtual
// environment (CUDA 13 and 12 wheels), a conda environment (conda's own
// package), the user's site-packages and the system's dist-packages, and
// checks every place looked in, in order, after the toolkit and the
// system's search.
func TestWheelSearchOrder(t *testing.T) {
	fs := newFS(t,
		"/home/u/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
		"/home/u/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc-builtins.so.13.0", // not a candidate
		"/home/u/venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
		"/home/u/venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.alt.so.12", // nor this
		"/opt/conda/lib/python3.11/site-packages/numpy/__init__.py",
		"/opt/conda/lib/libnvrtc.so.12",
		"/home/u/.local/lib/python3.10/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
		"/home/u/.local/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
		"/usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libnvrtc.so.13",
		"/usr/lib/python3/dist-packages/six.py",
	)
	env := fs.env("amd64", map[string]string{"VIRTUAL_ENV": "/home/u/venv", "CONDA_PREFIX": "/opt/conda/", "HOME": "/home/u"})
	s := loadspec.Search(&loadspec.NVRTC, env)
	i := 0
	for i < len(s.Candidates) && !strings.HasPrefix(s.Candidates[i].Path, "/home/u/venv") {
		i++
	}
	assert.Equal(t, 2*4+4, i, "toolkit directories and the system's search come first")
	assert.Equal(t, []loadspec.Candidate{
		{Path: "/home/u/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13"},
		{Path: "/home/u/venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"},
		{Path: "/opt/conda/lib/python3.11/site-packages/nvidia", Missing: "no such directory"},
		{Path: "/opt/conda/lib/libnvrtc.so.12"},
		{Path: "/home/u/.local/lib/python3.10/site-packages/nvidia/cu13/lib", Missing: "no such directory"},
		{Path: "/home/u/.local/lib/python3.10/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"},
		{Path: "/home/u/.local/lib/python3.12/site-packages/nvidia/cu13/lib", Missing: "no such directory"},
		{Path: "/home/u/.local/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib", Missing: "no such directory"},
		{Path: "/usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libnvrtc.so.13"},
		{Path: "/usr/local/lib/python3.12/dist-packages/nvidia/cuda_nvrtc/lib", Missing: "no such directory"},
		{Path: "/usr/local/lib/python3*/site-packages", Missing: "no such directory"},
		{Path: "/usr/lib/python3/dist-packages/nvidia", Missing: "no such directory"},
		{Path: "/usr/lib/python3*/site-packages", Missing: "no such directory"},
		{Path: "/usr/lib64/python3*/site-packages", Missing: "no such directory"},
	}, s.Candidates[i:])

	// PYTHONUSERBASE replaces ~/.local; one environment named twice is searched once
	env = fs.env("amd64", map[string]string{"VIRTUAL_ENV": "/home/u/venv", "CONDA_PREFIX": "/home/u/venv", "HOME": "/nowhere", "PYTHONUSERBASE": "/home/u/.local"})
	p := found(loadspec.Search(&loadspec.NVRTC, env).Candidates)
	assert.Equal(t, []string{
		"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so",
		"/home/u/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
		"/home/u/venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
		"/home/u/.local/lib/python3.10/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
		"/usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libnvrtc.so.13",
	}, p)
	all := paths(loadspec.Search(&loadspec.NVRTC, env).Candidates)
	assert.Contains(t, all, "/home/u/venv/lib", "conda's lib directory is looked in")
	assert.NotContains(t, strings.Join(all, "\n"), "/nowhere", "PYTHONUSERBASE wins over HOME")
	n := 0
	for _, c := range all {
		if strings.HasPrefix(c, "/home/u/venv/lib/python3") {
			n++
		}
	}
	assert.Equal(t, 2, n, "VIRTUAL_ENV and CONDA_PREFIX naming one environment: searched once")
}

// TestEachLibraryWheels: NCCL, cuBLAS, cuBLASLt and nvJitLink are found in
// their own wheels' directories and in CUDA 13's nvidia/cu13/lib.
func TestEachLibraryWheels(t *testing.T) {
	fs := newFS(t,
		"/v/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
		"/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13",
		"/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
		"/v/lib/python3.12/site-packages/nvidia/cu13/lib/libnvJitLink.so.13",
		"/v/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"/v/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
		"/v/lib/python3.12/site-packages/nvidia/nvjitlink/lib/libnvJitLink.so.12",
		"/usr/local/cuda/lib64/libcublas.so.13",
	)
	env := fs.env("amd64", map[string]string{"VIRTUAL_ENV": "/v"})
	site := "/v/lib/python3.12/site-packages/nvidia/"
	for _, tc := range []struct {
		d    *loadspec.Desc
		want []string
	}{
		{&loadspec.NCCL, []string{"libnccl.so.2", site + "nccl/lib/libnccl.so.2"}},
		{&loadspec.CUBLAS, []string{"/usr/local/cuda/lib64/libcublas.so.13", "libcublas.so.13", "libcublas.so.12", site + "cu13/lib/libcublas.so.13", site + "cublas/lib/libcublas.so.12"}},
		{&loadspec.CUBLASLt, []string{"libcublasLt.so.13", "libcublasLt.so.12", site + "cu13/lib/libcublasLt.so.13", site + "cublas/lib/libcublasLt.so.12"}},
		{&loadspec.NVJitLink, []string{"libnvJitLink.so.13", "libnvJitLink.so.12", site + "cu13/lib/libnvJitLink.so.13", site + "nvjitlink/lib/libnvJitLink.so.12"}},
	} {
		assert.Equal(t, tc.want, found(loadspec.Search(tc.d, env).Candidates), tc.d.Name)
		assert.NotEmpty(t, tc.d.Probe)
		assert.True(t, strings.HasPrefix(tc.d.EnvVar, "PURECUDA_LIB"), tc.d.EnvVar)
	}
	assert.NotContains(t, strings.Join(paths(loadspec.Search(&loadspec.NCCL, env).Candidates), "\n"), "/usr/local/cuda",
		"NCCL is not part of the toolkit")
	assert.True(t, loadspec.NCCL.Unsupported("windows"), "NVIDIA ships NCCL for Linux only")
	assert.False(t, loadspec.NCCL.Unsupported("linux"))
	assert.False(t, loadspec.CUBLAS.Unsupported("windows"))
	assert.True(t, loadspec.Driver.Unsupported("darwin"))
}

// TestEscapedEnvironmentPath: a directory whose name holds glob
// metacharacters is taken literally.
func TestEscapedEnvironmentPath(t *testing.T) {
	fs := newFS(t,
		"/home/u/env[1]/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
		"/home/u/env1/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.12",
	)
	s := loadspec.Search(&loadspec.NVRTC, fs.env("amd64", map[string]string{"VIRTUAL_ENV": "/home/u/env[1]"}))
	assert.Contains(t, found(s.Candidates), "/home/u/env[1]/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13")
	assert.NotContains(t, strings.Join(paths(s.Candidates), "\n"), "/home/u/env1/")
}

// winFS maps Windows paths (C:\…) into a temporary tree.
type winFS struct{ root string }

func (fs winFS) glob(pattern string) ([]string, error) {
	p := strings.ReplaceAll(strings.TrimPrefix(pattern, `C:`), `\`, "/")
	m, err := filepath.Glob(fs.root + p)
	for i := range m {
		m[i] = `C:` + strings.ReplaceAll(strings.TrimPrefix(m[i], fs.root), "/", `\`)
	}
	return m, err
}

func TestWindowsSearch(t *testing.T) {
	ufs := newFS(t,
		"/CUDA/bin/x64/nvrtc64_130_0.dll",
		"/venv/Lib/site-packages/nvidia/cu13/bin/x86_64/nvrtc64_130_0.dll",
		"/venv/Lib/site-packages/nvidia/cuda_nvrtc/bin/nvrtc64_120_0.dll",
		"/conda/Library/bin/nvrtc64_120_0.dll",
		"/Users/u/AppData/Roaming/Python/Python312/site-packages/nvidia/cublas/bin/cublas64_12.dll",
	)
	fs := winFS(ufs)
	kv := map[string]string{
		"CUDA_PATH": `C:\CUDA\`, "VIRTUAL_ENV": `C:\venv`, "CONDA_PREFIX": `C:\conda`,
		"APPDATA": `C:\Users\u\AppData\Roaming`, "LOCALAPPDATA": `C:\Users\u\AppData\Local`, "ProgramFiles": `C:\Program Files`,
	}
	env := loadspec.Env{GOOS: "windows", GOARCH: "amd64", Getenv: func(k string) string { return kv[k] }, Glob: fs.glob}
	s := loadspec.Search(&loadspec.NVRTC, env)
	assert.Equal(t, []string{
		`C:\CUDA\bin\x64\nvrtc64_130_0.dll`, `C:\CUDA\bin\x64\nvrtc64_120_0.dll`, `C:\CUDA\bin\x64\nvrtc64_112_0.dll`,
		`C:\CUDA\bin\nvrtc64_130_0.dll`, `C:\CUDA\bin\nvrtc64_120_0.dll`, `C:\CUDA\bin\nvrtc64_112_0.dll`,
		"nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll",
		`C:\venv\Lib\site-packages\nvidia\cu13\bin\x86_64\nvrtc64_130_0.dll`,
		`C:\venv\Lib\site-packages\nvidia\cuda_nvrtc\bin\nvrtc64_120_0.dll`,
		`C:\conda\Lib\site-packages`,
		`C:\conda\Library\bin\nvrtc64_120_0.dll`,
		`C:\Users\u\AppData\Roaming\Python\Python312\site-packages\nvidia\cu13\bin\x86_64`,
		`C:\Users\u\AppData\Roaming\Python\Python312\site-packages\nvidia\cuda_nvrtc\bin`,
		`C:\Users\u\AppData\Local\Programs\Python\Python3*\Lib\site-packages`,
		`C:\Program Files\Python3*\Lib\site-packages`,
	}, paths(s.Candidates))
	assert.Equal(t, []string{
		`C:\CUDA\bin\x64\nvrtc64_130_0.dll`, "nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll",
		`C:\venv\Lib\site-packages\nvidia\cu13\bin\x86_64\nvrtc64_130_0.dll`,
		`C:\venv\Lib\site-packages\nvidia\cuda_nvrtc\bin\nvrtc64_120_0.dll`,
		`C:\conda\Library\bin\nvrtc64_120_0.dll`,
	}, found(s.Candidates))
	assert.Contains(t, found(loadspec.Search(&loadspec.CUBLAS, env).Candidates),
		`C:\Users\u\AppData\Roaming\Python\Python312\site-packages\nvidia\cublas\bin\cublas64_12.dll`)

	none := loadspec.Search(&loadspec.NVRTC, loadspec.Env{GOOS: "windows", GOARCH: "amd64", Getenv: func(string) string { return "" }, Glob: fs.glob})
	assert.Equal(t, []string{"nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll"}, paths(none.Candidates))
}

func TestOSEnv(t *testing.T) {
	env := loadspec.OS()
	assert.NotEmpty(t, env.GOOS)
	t.Setenv("PURECUDA_LIBNVRTC", "/some/where.so")
	assert.Equal(t, "/some/where.so", env.Getenv("PURECUDA_LIBNVRTC"))
	m, err := env.Glob(filepath.Join(t.TempDir(), "*"))
	assert.NoError(t, err)
	assert.Empty(t, m)
}

func TestCompanionsOf(t *testing.T) {
	fs := newFS(t,
		"/v/nvidia/cu13/lib/libnvrtc.so.13",
		"/v/nvidia/cu13/lib/libnvrtc-builtins.so.13.0",
		"/v/nvidia/cu13/lib/libnvrtc.alt.so.13",
		"/W/bin/nvrtc64_130_0.dll",
		"/W/bin/nvrtc-builtins64_130.dll",
	)
	env := fs.env("amd64", nil)
	assert.Equal(t, []string{"/v/nvidia/cu13/lib/libnvrtc-builtins.so.13.0"}, loadspec.CompanionsOf(&loadspec.NVRTC, env, "/v/nvidia/cu13/lib/libnvrtc.so.13"))
	assert.Empty(t, loadspec.CompanionsOf(&loadspec.NVRTC, env, "libnvrtc.so.13"), "the system's search finds the builtins itself")
	assert.Empty(t, loadspec.CompanionsOf(&loadspec.CUBLAS, env, "/v/nvidia/cu13/lib/libcublas.so.13"))

	win := loadspec.Env{GOOS: "windows", GOARCH: "amd64", Getenv: func(string) string { return "" }, Glob: winFS(fs).glob}
	assert.Equal(t, []string{`C:\W\bin\nvrtc-builtins64_130.dll`}, loadspec.CompanionsOf(&loadspec.NVRTC, win, `C:\W\bin\nvrtc64_130_0.dll`))
}

// TestNeedsOf: libcublas opened by its full path has libcublasLt of the
// same version beside it opened first; nothing for a bare name, a missing
// file or another library.
func TestNeedsOf(t *testing.T) {
	fs := newFS(t,
		"/v/nvidia/cublas/lib/libcublas.so.12",
		"/v/nvidia/cublas/lib/libcublasLt.so.12",
		"/v/nvidia/cu13/lib/libcublas.so.13",
		"/c/lib64/libcublas.so.13.1.0.3",
		"/c/lib64/libcublasLt.so.13.1.0.3",
		"/W/bin/cublas64_13.dll",
		"/W/bin/cublasLt64_13.dll",
	)
	env := fs.env("amd64", nil)
	assert.Equal(t, []string{"/v/nvidia/cublas/lib/libcublasLt.so.12"}, loadspec.NeedsOf(&loadspec.CUBLAS, env, "/v/nvidia/cublas/lib/libcublas.so.12"))
	assert.Equal(t, []string{"/c/lib64/libcublasLt.so.13.1.0.3"}, loadspec.NeedsOf(&loadspec.CUBLAS, env, "/c/lib64/libcublas.so.13.1.0.3"))
	assert.Empty(t, loadspec.NeedsOf(&loadspec.CUBLAS, env, "/v/nvidia/cu13/lib/libcublas.so.13"), "no libcublasLt beside it")
	assert.Empty(t, loadspec.NeedsOf(&loadspec.CUBLAS, env, "libcublas.so.13"), "the system's search finds it itself")
	assert.Empty(t, loadspec.NeedsOf(&loadspec.CUBLASLt, env, "/v/nvidia/cublas/lib/libcublasLt.so.12"))
	assert.Empty(t, loadspec.NeedsOf(&loadspec.NVRTC, env, "/v/nvidia/cublas/lib/libcublas.so.12"))

	win := loadspec.Env{GOOS: "windows", GOARCH: "amd64", Getenv: func(string) string { return "" }, Glob: winFS(fs).glob}
	assert.Equal(t, []string{`C:\W\bin\cublasLt64_13.dll`}, loadspec.NeedsOf(&loadspec.CUBLAS, win, `C:\W\bin\cublas64_13.dll`))
}
