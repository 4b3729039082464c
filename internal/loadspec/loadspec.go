// Package loadspec describes the shared libraries package loader finds (the
// CUDA driver, NVRTC, NCCL, cuBLAS, cuBLASLt, nvJitLink) and computes, for
// one operating system and environment, the ordered list of places to try.
// It only reads the environment and globs paths, through the hooks in Env,
// so that tests can run the whole search over a fake directory tree; it
// opens nothing and never runs a program. Package loader's doc states the
// order for users.
package loadspec

import (
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
)

// Desc describes one library.
type Desc struct {
	Name   string // for messages: "CUDA driver", "NVRTC", "cuBLAS"
	EnvVar string // full-path override: the only candidate when set
	Probe  string // a symbol every real copy exports

	Sonames []string // Linux file names, preferred first
	DLLs    []string // Windows file names, preferred first; none: not shipped for Windows

	// SystemPaths are full Linux paths tried after the names (the driver's
	// WSL2 and container locations).
	SystemPaths []string
	// Toolkit: look in the CUDA toolkit's library directories
	// ($CUDA_PATH, $CUDA_HOME, /usr/local/cuda) before the system's search.
	Toolkit bool
	// Wheels are the directories under site-packages/nvidia/ that NVIDIA's
	// Python wheels install the library into on Linux ("cu13/lib",
	// "cuda_nvrtc/lib"), and WheelsWindows those on Windows
	// ("cu13/bin/x86_64", "cuda_nvrtc/bin"). A library with wheels is also
	// looked for in a conda environment's own library directory.
	Wheels, WheelsWindows []string
	// Companions are glob patterns, in the directory of a copy opened by
	// its full path, of libraries that copy opens later by file name alone
	// (NVRTC's builtins, at its first compile): the loader opens them
	// first, so that the system finds them loaded. NVIDIA's CUDA 13 wheels
	// and a toolkit outside the system's search need it.
	Companions, CompanionsWindows []string
	// Needs pairs a file-name prefix of d with the prefix of a library it
	// links against ({"libcublas.so.", "libcublasLt.so."}): a copy opened
	// by its full path has that library from its own directory opened
	// first (libcublas.so.13 needs libcublasLt.so.13 beside it), so that
	// the dynamic loader finds it loaded even where the directory is in
	// no search path.
	Needs [][2]string
}

// The libraries. Sonames and DLLs are newest first: CUDA 13, then 12 (and
// NVRTC's 11.2, whose ABI newer NVRTCs keep).
var (
	Driver = Desc{
		Name: "CUDA driver", EnvVar: "PURECUDA_LIBCUDA", Probe: "cuInit",
		Sonames:     []string{"libcuda.so.1", "libcuda.so"},
		DLLs:        []string{"nvcuda.dll"},
		SystemPaths: []string{"/usr/lib/wsl/lib/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"},
	}
	NVRTC = Desc{
		Name: "NVRTC", EnvVar: "PURECUDA_LIBNVRTC", Probe: "nvrtcVersion",
		Sonames:           []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"},
		DLLs:              []string{"nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll"},
		Toolkit:           true,
		Wheels:            []string{"cu13/lib", "cuda_nvrtc/lib"},
		WheelsWindows:     []string{`cu13\bin\x86_64`, `cuda_nvrtc\bin`},
		Companions:        []string{"libnvrtc-builtins.so.*"},
		CompanionsWindows: []string{"nvrtc-builtins64_*.dll"},
	}
	NCCL = Desc{
		Name: "NCCL", EnvVar: "PURECUDA_LIBNCCL", Probe: "ncclGetVersion",
		Sonames: []string{"libnccl.so.2"}, // NVIDIA ships NCCL for Linux only
		Wheels:  []string{"nccl/lib"},     // cu12 and cu13 alike
	}
	CUBLAS = Desc{
		Name: "cuBLAS", EnvVar: "PURECUDA_LIBCUBLAS", Probe: "cublasGetVersion_v2",
		Sonames:       []string{"libcublas.so.13", "libcublas.so.12"},
		DLLs:          []string{"cublas64_13.dll", "cublas64_12.dll"},
		Toolkit:       true,
		Wheels:        []string{"cu13/lib", "cublas/lib"},
		WheelsWindows: []string{`cu13\bin\x86_64`, `cublas\bin`},
		Needs:         [][2]string{{"libcublas.so.", "libcublasLt.so."}, {"cublas64_", "cublasLt64_"}},
	}
	CUBLASLt = Desc{
		Name: "cuBLASLt", EnvVar: "PURECUDA_LIBCUBLASLT", Probe: "cublasLtGetVersion",
		Sonames:       []string{"libcublasLt.so.13", "libcublasLt.so.12"},
		DLLs:          []string{"cublasLt64_13.dll", "cublasLt64_12.dll"},
		Toolkit:       true,
		Wheels:        []string{"cu13/lib", "cublas/lib"},
		WheelsWindows: []string{`cu13\bin\x86_64`, `cublas\bin`},
	}
	NVJitLink = Desc{
		Name: "nvJitLink", EnvVar: "PURECUDA_LIBNVJITLINK", Probe: "nvJitLinkVersion",
		Sonames:       []string{"libnvJitLink.so.13", "libnvJitLink.so.12"},
		DLLs:          []string{"nvJitLink_130_0.dll", "nvJitLink_120_0.dll"},
		Toolkit:       true,
		Wheels:        []string{"cu13/lib", "nvjitlink/lib"},
		WheelsWindows: []string{`cu13\bin\x86_64`, `nvjitlink\bin`},
	}
)

// Env is what a search reads: the target system, its environment and its
// file system. Glob is filepath.Glob's contract: the sorted paths matching
// pattern, so a pattern without wildcards names a path that exists.
type Env struct {
	GOOS, GOARCH string
	Getenv       func(string) string
	Glob         func(pattern string) ([]string, error)
}

// OS is the environment of this process.
func OS() Env {
	return Env{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Getenv: os.Getenv, Glob: filepath.Glob}
}

// Candidate is one place in a search: a full path, or a bare name for the
// system's own search. Missing, when not empty, says why there is nothing
// to open there (the search looked and found no such file or directory).
type Candidate struct {
	Path    string
	Missing string
}

// Spec is a library's search in one environment.
type Spec struct {
	Desc       *Desc
	Override   bool // the candidates are the override alone
	Candidates []Candidate
}

// CompanionsOf lists the companions (see Desc.Companions) beside the copy
// of d at path, a full path; none for a bare name.
func CompanionsOf(d *Desc, env Env, path string) []string {
	pats, sep := d.Companions, "/"
	if env.GOOS == "windows" {
		pats, sep = d.CompanionsWindows, `\`
	}
	i := strings.LastIndex(path, sep)
	if i < 0 {
		return nil
	}
	var out []string
	for _, p := range pats {
		out = append(out, glob(env, escape(env, path[:i+1])+p)...)
	}
	return out
}

// NeedsOf lists the libraries (see Desc.Needs) that the copy of d at path,
// a full path, needs from its own directory and that are there; none for
// a bare name.
func NeedsOf(d *Desc, env Env, path string) []string {
	sep := "/"
	if env.GOOS == "windows" {
		sep = `\`
	}
	i := strings.LastIndex(path, sep)
	if i < 0 {
		return nil
	}
	dir, base := path[:i+1], path[i+1:]
	var out []string
	for _, n := range d.Needs {
		if rest, ok := strings.CutPrefix(base, n[0]); ok && exists(env, dir+n[1]+rest) {
			out = append(out, dir+n[1]+rest)
		}
	}
	return out
}

// Unsupported reports whether NVIDIA ships d for goos at all (NCCL has no
// Windows build; macOS and the BSDs have no CUDA).
func (d *Desc) Unsupported(goos string) bool {
	switch goos {
	case "linux":
		return len(d.Sonames) == 0
	case "windows":
		return len(d.DLLs) == 0
	}
	return true
}

// Search lists where to look for d in env, in order. With d's override
// variable set it is the only candidate, taken as given (a wrong override is
// reported, never silently replaced by another copy).
func Search(d *Desc, env Env) Spec {
	s := Spec{Desc: d}
	if p := env.Getenv(d.EnvVar); p != "" {
		s.Override = true
		s.Candidates = []Candidate{{Path: p}}
		return s
	}
	if env.GOOS == "windows" {
		s.Candidates = windows(d, env)
	} else {
		s.Candidates = linux(d, env)
	}
	return s
}

func linux(d *Desc, env Env) []Candidate {
	var c []Candidate
	if d.Toolkit {
		var dirs []string
		for _, v := range []string{"CUDA_PATH", "CUDA_HOME"} {
			if p := env.Getenv(v); p != "" {
				dirs = append(dirs, path.Join(p, "lib64"))
			}
		}
		dirs = append(dirs, "/usr/local/cuda/lib64")
		switch env.GOARCH {
		case "amd64":
			dirs = append(dirs, "/usr/local/cuda/targets/x86_64-linux/lib")
		case "arm64":
			dirs = append(dirs, "/usr/local/cuda/targets/sbsa-linux/lib", "/usr/local/cuda/targets/aarch64-linux/lib")
		}
		for _, dir := range dedupe(dirs) { // CUDA_PATH and CUDA_HOME are often both /usr/local/cuda
			for _, n := range d.Sonames {
				c = append(c, file(env, path.Join(dir, n)))
			}
		}
	}
	// The dynamic loader's own search: LD_LIBRARY_PATH, the ld.so cache.
	for _, n := range d.Sonames {
		c = append(c, Candidate{Path: n})
	}
	for _, p := range d.SystemPaths {
		c = append(c, file(env, p))
	}
	if len(d.Wheels) == 0 {
		return c
	}
	var places []place
	if p := env.Getenv("VIRTUAL_ENV"); p != "" {
		places = append(places, place{base: path.Clean(p), rest: "/lib/python3*/site-packages", wheels: true})
	}
	if p := env.Getenv("CONDA_PREFIX"); p != "" {
		p = path.Clean(p)
		places = append(places,
			place{base: p, rest: "/lib/python3*/site-packages", wheels: true},
			// conda's own packages (conda-forge's cuda-nvrtc, nccl, …)
			// install into the environment's lib directory.
			place{base: p + "/lib"})
	}
	user := env.Getenv("PYTHONUSERBASE")
	if user == "" && env.Getenv("HOME") != "" {
		user = path.Join(env.Getenv("HOME"), ".local")
	}
	if user != "" {
		places = append(places, place{base: path.Clean(user), rest: "/lib/python3*/site-packages", wheels: true})
	}
	for _, p := range []string{
		"/usr/local/lib/python3*/dist-packages", // Debian and Ubuntu: pip as root
		"/usr/local/lib/python3*/site-packages", // other distributions, Python built from source
		"/usr/lib/python3/dist-packages",        // Debian and Ubuntu packages
		"/usr/lib/python3*/site-packages",       // Fedora, Arch
		"/usr/lib64/python3*/site-packages",     // Fedora, RHEL
	} {
		places = append(places, place{rest: p, wheels: true})
	}
	return append(c, search(d.Sonames, d.Wheels, env, places, "/")...)
}

func windows(d *Desc, env Env) []Candidate {
	var c []Candidate
	if p := strings.TrimRight(env.Getenv("CUDA_PATH"), `\/`); d.Toolkit && p != "" {
		for _, sub := range []string{`\bin\x64\`, `\bin\`} {
			for _, n := range d.DLLs {
				c = append(c, file(env, p+sub+n))
			}
		}
	}
	// The system's search: the program's directory, System32, PATH.
	for _, n := range d.DLLs {
		c = append(c, Candidate{Path: n})
	}
	if len(d.WheelsWindows) == 0 {
		return c
	}
	var places []place
	if p := strings.TrimRight(env.Getenv("VIRTUAL_ENV"), `\/`); p != "" {
		places = append(places, place{base: p, rest: `\Lib\site-packages`, wheels: true})
	}
	if p := strings.TrimRight(env.Getenv("CONDA_PREFIX"), `\/`); p != "" {
		places = append(places,
			place{base: p, rest: `\Lib\site-packages`, wheels: true},
			place{base: p + `\Library\bin`}) // conda's own packages' DLLs
	}
	if p := strings.TrimRight(env.Getenv("APPDATA"), `\/`); p != "" { // pip install --user
		places = append(places, place{base: p, rest: `\Python\Python3*\site-packages`, wheels: true})
	}
	if p := strings.TrimRight(env.Getenv("LOCALAPPDATA"), `\/`); p != "" { // python.org's installer
		places = append(places, place{base: p, rest: `\Programs\Python\Python3*\Lib\site-packages`, wheels: true})
	}
	if p := strings.TrimRight(env.Getenv("ProgramFiles"), `\/`); p != "" { // installed for all users
		places = append(places, place{base: p, rest: `\Python3*\Lib\site-packages`, wheels: true})
	}
	return append(c, search(d.DLLs, d.WheelsWindows, env, places, `\`)...)
}

// place is a directory to look in: base (taken literally) followed by rest
// (which may hold wildcards). A site-packages directory (wheels) is looked
// in under nvidia/; any other directly.
type place struct {
	base, rest string
	wheels     bool
}

// search looks in each place in turn; every place looked in and found
// empty is listed too, so that a failed search can say where it looked.
func search(names, subdirs []string, env Env, places []place, sep string) []Candidate {
	var c []Candidate
	seen := map[string]bool{}
	for _, pl := range places {
		shown := pl.base + pl.rest
		if seen[shown] {
			continue // VIRTUAL_ENV and CONDA_PREFIX naming one environment
		}
		seen[shown] = true
		if !pl.wheels {
			c = append(c, inDir(names, env, shown, sep)...)
			continue
		}
		dirs := glob(env, escape(env, pl.base)+pl.rest)
		if len(dirs) == 0 {
			c = append(c, Candidate{Path: shown, Missing: "no such directory"})
			continue
		}
		for _, dir := range dirs {
			nv := dir + sep + "nvidia"
			if !exists(env, nv) {
				c = append(c, Candidate{Path: nv, Missing: "no such directory"})
				continue
			}
			for _, sub := range subdirs {
				c = append(c, inDir(names, env, nv+sep+sub, sep)...)
			}
		}
	}
	return c
}

// inDir is each of names that dir holds, or one entry saying why none.
func inDir(names []string, env Env, dir, sep string) []Candidate {
	if !exists(env, dir) {
		return []Candidate{{Path: dir, Missing: "no such directory"}}
	}
	var c []Candidate
	for _, n := range names {
		if p := dir + sep + n; exists(env, p) {
			c = append(c, Candidate{Path: p})
		}
	}
	if len(c) == 0 {
		return []Candidate{{Path: dir, Missing: "has none of " + strings.Join(names, ", ")}}
	}
	return c
}

// file is a full path to try, or why not.
func file(env Env, p string) Candidate {
	if !exists(env, p) {
		return Candidate{Path: p, Missing: "no such file"}
	}
	return Candidate{Path: p}
}

func exists(env Env, p string) bool { return len(glob(env, escape(env, p))) > 0 }

func glob(env Env, pattern string) []string {
	m, err := env.Glob(pattern)
	if err != nil {
		return nil // a malformed pattern matches nothing
	}
	return m
}

// escape makes p match only itself in a glob pattern. Windows has no
// escape character in patterns (the backslash separates directories);
// there a path holding *, ? or [ is looked for as a pattern.
func escape(env Env, p string) string {
	if env.GOOS == "windows" || !strings.ContainsAny(p, `*?[\`) {
		return p
	}
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func dedupe(dirs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range dirs {
		if d = path.Clean(d); !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}
