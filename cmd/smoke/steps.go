package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/loader"
	"github.com/purecuda/cuda/nvrtc"
)

// steps are smoke's checks, in order. Each is timed and reported on its own
// line; a step whose needs did not pass is skipped.
var steps = []step{
	{name: "driver", run: stepDriver},
	{name: "nvrtc", run: stepNVRTC},
	{name: "devices", needs: []string{"driver"}, run: stepDevices},
	{name: "compile", needs: []string{"devices", "nvrtc"}, run: stepCompile},
	{name: "launch", needs: []string{"compile"}, run: stepLaunch},

	{name: "graph", needs: []string{"launch"}, run: stepGraph},
	{name: "lifetime", needs: []string{"graph"}, run: stepGraphLifetime},

	{name: "peer", needs: []string{"launch"}, run: stepPeer},
	{name: "nccl", needs: []string{"launch"}, run: stepNCCL},
	{name: "cublas", needs: []string{"launch"}, run: stepCUBLAS},
}

// gpu is what the steps hand on to later ones; state embeds it and closes
// what it holds after the last step.
type gpu struct {
	dev *driver.Device  // the -device chosen, from "devices"
	ctx *driver.Context // its primary context, from "launch"
	res *nvrtc.Output   // the compiled kernel, from "compile"
}

// stepDriver opens libcuda and initialises it.
func stepDriver(st *state) (string, error) {
	lib := &st.rep.Driver
	lib.Override = os.Getenv(lib.EnvVar)
	path, err := driver.LibraryPath()
	if err != nil {
		recordNotFound(lib, err)
		adviseDriver(st, err)
		why := "no CUDA driver library found"
		if errors.Is(err, driver.ErrStubLibrary) {
			why = "a stub libcuda, not the driver"
		}
		return "", noGPUIf(err, why)
	}
	lib.Found, lib.Path, lib.File = true, path, mappedFile(path, "libcuda.so")
	detailTried(st, loader.Driver)
	if lib.Override != "" {
		st.detail("%s=%s (the only candidate)", lib.EnvVar, lib.Override)
	}
	if err := driver.Init(); err != nil {
		lib.Error = err.Error()
		switch {
		case errors.Is(err, driver.ErrNoDevice):
			st.advise("The driver library loaded but cuInit reports no CUDA device: check that nvidia-smi lists one; in a container, run with --gpus all (NVIDIA Container Toolkit).")
			return "", noGPUIf(fmt.Errorf("%s loaded, but: %w", path, err), "no CUDA device")
		case errors.Is(err, driver.ErrStubLibrary):
			st.advise("%s is the CUDA toolkit's stub, which only lets programs link: install the NVIDIA driver, or remove the stubs directory from LD_LIBRARY_PATH.", path)
			return "", noGPUIf(fmt.Errorf("%s loaded, but: %w", path, err), "a stub libcuda, not the driver")
		case errors.Is(err, driver.ErrNoGPU):
			st.advise("This driver is too old for purecuda: install NVIDIA driver R525 (CUDA 12.0) or newer.")
			return "", noGPUIf(err, "the driver is older than CUDA 12.0")
		}
		st.advise("The driver library loaded but cuInit failed: check nvidia-smi; a driver/kernel-module version mismatch needs a reboot or a reinstall of the NVIDIA driver.")
		return "", fmt.Errorf("%s loaded, but: %w", path, err)
	}
	major, minor, err := driver.Version()
	if err != nil {
		lib.Error = err.Error()
		return "", err
	}
	lib.VersionCode, lib.Version = major*1000+minor*10, fmt.Sprintf("%d.%d", major, minor)
	lib.Release = driverRelease(lib.File)
	where := path
	if lib.File != "" && lib.File != path {
		where += " → " + lib.File
	}
	if lib.Release != "" {
		return fmt.Sprintf("%s, CUDA %s (driver %s)", where, lib.Version, lib.Release), nil
	}
	return fmt.Sprintf("%s, CUDA %s", where, lib.Version), nil
}

// stepNVRTC opens NVRTC; it runs even when the driver is missing, so both
// are reported.
func stepNVRTC(st *state) (string, error) {
	lib := &st.rep.NVRTC
	lib.Override = os.Getenv(lib.EnvVar)
	path, err := nvrtc.LibraryPath()
	if err != nil {
		recordNotFound(lib, err)
		adviseNVRTC(st, lib)
		return "", err
	}
	lib.Found, lib.Path, lib.File = true, path, mappedFile(path, "libnvrtc.so")
	detailTried(st, loader.NVRTC)
	major, minor, err := nvrtc.Version()
	if err != nil {
		lib.Error = err.Error()
		return "", fmt.Errorf("%s opened, but: %w", path, err)
	}
	lib.Version = fmt.Sprintf("%d.%d", major, minor)
	if archs, err := nvrtc.SupportedArchs(); err == nil && len(archs) > 0 {
		st.detail("targets sm_%d … sm_%d", archs[0], archs[len(archs)-1])
	}
	where := path
	if lib.File != "" && lib.File != path {
		where += " → " + lib.File
	}
	return fmt.Sprintf("%s, NVRTC %s", where, lib.Version), nil
}

// stepDevices lists every device and picks -device.
func stepDevices(st *state) (string, error) {
	n, err := driver.DeviceCount()
	if err != nil {
		return "", err
	}
	if n == 0 {
		st.advise("The driver reports no CUDA device: check that nvidia-smi lists one; in a container, run with --gpus all.")
		return "", noGPU("no CUDA device", errors.New("the driver reports no CUDA device"))
	}
	for i := 0; i < n; i++ {
		dev, err := driver.DeviceByOrdinal(i)
		if err != nil {
			return "", fmt.Errorf("device %d: %w", i, err)
		}
		d := Device{Ordinal: i, Arch: dev.Arch()}
		if d.Name, err = dev.Name(); err != nil {
			return "", fmt.Errorf("device %d: %w", i, err)
		}
		mem, err := dev.TotalMemory()
		if err != nil {
			return "", fmt.Errorf("device %d: %w", i, err)
		}
		d.MemoryBytes = int64(mem)
		if d.SMs, err = dev.SMCount(); err != nil {
			return "", fmt.Errorf("device %d: %w", i, err)
		}
		st.rep.Devices = append(st.rep.Devices, d)
		mark := ""
		if i == st.cfg.device {
			mark, st.dev = "   ← -device", dev
		}
		st.note("%d: %s, %s, %s, %d SMs%s", i, d.Name, d.Arch, formatBytes(d.MemoryBytes), d.SMs, mark)
	}
	if st.dev == nil {
		ordinals, choice := fmt.Sprintf("ordinals 0 … %d", n-1), fmt.Sprintf("-device 0 … -device %d", n-1)
		if n == 1 {
			ordinals, choice = "ordinal 0", "-device 0"
		}
		st.advise("Choose a device that exists (listed above): %s.", choice)
		return "", noGPU(fmt.Sprintf("no device %d", st.cfg.device),
			fmt.Errorf("-device %d: this machine has %s (%s)", st.cfg.device, plural(n, "CUDA device"), ordinals))
	}
	return fmt.Sprintf("%s, using %d", plural(n, "device"), st.cfg.device), nil
}

// kernelSource is the kernel smoke compiles: every element of out becomes
// a*in[i] + b, so a wrong index, a missing block or a bad argument shows up.
const kernelSource = `
extern "C" __global__ void axpb(int *out, const int *in, int a, int b, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a * in[i] + b;
}
`

// stepCompile compiles kernelSource for the chosen device with NVRTC.
func stepCompile(st *state) (string, error) {
	opts := nvrtc.Options{Arch: st.dev.Arch(), Name: "smoke.cu"}
	if args, err := opts.Args(); err == nil {
		st.detail("nvrtcCompileProgram %s", strings.Join(args, " "))
	}
	res, err := nvrtc.Compile(kernelSource, opts)
	if err != nil {
		return "", fmt.Errorf("compiling for %s: %w", opts.Arch, err) // a CompileError's text carries NVRTC's log
	}
	st.res = res
	if log := strings.TrimSpace(res.Log); log != "" {
		st.detail("NVRTC log:\n%s", log)
	} else {
		st.detail("NVRTC log: empty")
	}
	kind, image := "CUBIN", res.CUBIN
	if len(image) == 0 {
		kind, image = "PTX", res.PTX
	}
	return fmt.Sprintf("axpb for %s: %s, %s", opts.Arch, kind, formatBytes(int64(len(image)))), nil
}

// launchN is the number of elements the launch step checks: not a multiple
// of the block, so the last block is partial.
const launchN = 1<<20 + 3

// stepLaunch loads the kernel into the device's primary context, runs it
// over launchN elements and checks every one.
func stepLaunch(st *state) (summary string, err error) {
	ctx, err := st.dev.PrimaryContext()
	if err != nil {
		return "", fmt.Errorf("primary context of device %d: %w", st.cfg.device, err)
	}
	st.ctx = ctx
	st.deferClose(ctx.Close)
	// closeNow closes what this step made and keeps the first error.
	closeNow := func(c interface{ Close() error }) {
		if cerr := c.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}

	mod, err := ctx.LoadModule(st.res.Image())
	if err != nil {
		return "", err
	}
	defer closeNow(mod)
	fn, err := mod.Function("axpb")
	if err != nil {
		return "", err
	}
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		return "", err
	}
	defer closeNow(s)

	const a, b = 3, -7
	in := make([]int32, launchN)
	for i := range in {
		in[i] = int32(i ^ 0x5a5a)
	}
	dIn, err := driver.Alloc[int32](ctx, launchN)
	if err != nil {
		return "", err
	}
	defer closeNow(dIn)
	dOut, err := driver.Alloc[int32](ctx, launchN)
	if err != nil {
		return "", err
	}
	defer closeNow(dOut)
	if err := dOut.Memset32(s, 0xdeadbeef); err != nil { // so an element the kernel skips cannot pass by luck
		return "", err
	}
	if err := dIn.CopyFromHost(s, in); err != nil {
		return "", err
	}
	const block = 256
	grid := (launchN + block - 1) / block
	if err := s.Launch(fn, driver.Grid(grid), driver.Block(block), dOut, dIn, int32(a), int32(b), uint32(launchN)); err != nil {
		return "", err
	}
	wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.SynchronizeContext(wait); err != nil {
		return "", fmt.Errorf("waiting for the kernel: %w", err)
	}
	out := make([]int32, launchN)
	if err := dOut.CopyToHost(s, out); err != nil {
		return "", err
	}
	wrong, first := 0, -1
	for i, v := range out {
		if v != a*in[i]+b {
			if first < 0 {
				first = i
			}
			wrong++
		}
	}
	if wrong > 0 {
		return "", fmt.Errorf("%d of %d results wrong; the first at [%d]: got %d, want %d", wrong, launchN, first, out[first], a*in[first]+b)
	}
	return fmt.Sprintf("axpb<<<%d, %d>>> over %d ints: every result exact", grid, block, launchN), nil
}

// noGPUIf marks err as meaning no usable GPU here (exit 2) when it matches
// driver.ErrNoGPU, with why as the short reason, or with the platform's
// name when the operating system has no CUDA.
func noGPUIf(err error, why string) error {
	if !errors.Is(err, driver.ErrNoGPU) {
		return err
	}
	var up *loader.UnsupportedPlatformError
	if errors.As(err, &up) {
		why = "unsupported platform " + up.GOOS + "/" + up.GOARCH
	}
	return noGPU(why, err)
}

// detailTried lists, under -v, the places the loader tried before the copy
// it opened.
func detailTried(st *state, open func() (*loader.Library, error)) {
	lib, err := open()
	if err != nil {
		return
	}
	for _, a := range lib.Tried {
		st.detail("tried first: %s: %s", a.Path, a.Reason)
	}
}

// recordNotFound fills lib from a loader error.
func recordNotFound(lib *Library, err error) {
	lib.Error = err.Error()
	var nf *loader.NotFoundError
	if errors.As(err, &nf) {
		for _, a := range nf.Tried {
			lib.Searched = append(lib.Searched, Attempt{Path: a.Path, Reason: a.Reason})
		}
	}
}

func adviseDriver(st *state, err error) {
	if errors.Is(err, loader.ErrUnsupportedPlatform) {
		st.advise("CUDA needs Linux or Windows with an NVIDIA GPU; purecuda supports %s.", loader.SupportedPlatforms)
		return
	}
	lib := &st.rep.Driver
	if lib.Override != "" {
		st.advise("%s=%s is the only path tried: correct it, or unset it to search the usual places.", lib.EnvVar, lib.Override)
	}
	if runtime.GOOS == "windows" {
		st.advise("nvcuda.dll comes with the NVIDIA display driver (it installs into System32), not with the CUDA toolkit: install the driver for your GPU from https://www.nvidia.com/drivers.")
		return
	}
	st.advise("libcuda.so.1 comes with the NVIDIA driver, not with the CUDA toolkit: install the driver for your GPU (Ubuntu: sudo ubuntu-drivers install, or apt install nvidia-driver-580; others: https://www.nvidia.com/drivers). Under WSL2, install the Windows driver on the host; it provides /usr/lib/wsl/lib/libcuda.so.1.")
	st.advise("In a container, the host's driver is mounted in by the NVIDIA Container Toolkit: run with --gpus all (docker, podman) or request nvidia.com/gpu (Kubernetes).")
	if lib.Override == "" {
		st.advise("If libcuda.so.1 is installed somewhere not searched, set %s to its full path.", lib.EnvVar)
	}
}

func adviseNVRTC(st *state, lib *Library) {
	if len(lib.Searched) == 0 {
		return // not a failed search: unsupported platform, which adviseDriver explains
	}
	if lib.Override != "" {
		st.advise("%s=%s is the only path tried: correct it, or unset it to search the usual places.", lib.EnvVar, lib.Override)
		return
	}
	if runtime.GOOS == "windows" {
		st.advise("NVRTC (nvrtc64_130_0.dll) comes with the CUDA toolkit (%%CUDA_PATH%%\\bin\\x64) or the pip wheel nvidia-cuda-nvrtc (found in the active virtual or conda environment and the user's and system's site-packages); set %s to its full path if it is elsewhere.", lib.EnvVar)
		return
	}
	st.advise("NVRTC (libnvrtc.so.13) comes with the CUDA toolkit: apt install cuda-nvrtc-13-0 from NVIDIA's repository puts it in /usr/local/cuda/lib64; so does the pip wheel nvidia-cuda-nvrtc, found in the active virtual or conda environment, in ~/.local and in the system's site-packages. Set %s to its full path if it is somewhere not searched.", lib.EnvVar)
}

// mappedFile finds, on Linux, the file the process mapped for a library
// opened by name (libcuda.so.1 is usually a symlink to
// libcuda.so.<driver version>). It returns "" where it cannot tell.
func mappedFile(path, stem string) string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		file := fields[len(fields)-1]
		if strings.HasPrefix(filepath.Base(file), stem) {
			return file
		}
	}
	if filepath.IsAbs(path) {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			return real
		}
	}
	return ""
}

// driverRelease reads the NVIDIA driver's release from the file libcuda.so.1
// points at, libcuda.so.580.159.04; "" when the name does not tell.
func driverRelease(file string) string {
	rel, ok := strings.CutPrefix(filepath.Base(file), "libcuda.so.")
	if !ok || strings.Count(rel, ".") < 1 {
		return ""
	}
	for _, r := range rel {
		if (r < '0' || r > '9') && r != '.' {
			return ""
		}
	}
	return rel
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
