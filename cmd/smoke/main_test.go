package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
)

// runAsMain makes the test binary act as smoke itself, so that each case
// runs in a fresh process: the libraries are opened once per process, and
// PURECUDA_LIBCUDA / PURECUDA_LIBNVRTC are read then. It also means the
// bundled test binary needs no Go toolchain on the GPU machine.
const runAsMain = "PURECUDA_SMOKE_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	gputest.Main(m)
}

type outcome struct {
	code           int
	stdout, stderr string
}

// smoke runs the command in a new process with env added to this one's.
func smoke(t *testing.T, env []string, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), runAsMain+"=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	o := outcome{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		o.code = exit.ExitCode()
	default:
		t.Fatalf("smoke %v did not run to an exit status: %v\nstdout:\n%s\nstderr:\n%s", args, err, o.stdout, o.stderr)
	}
	assertNoPanic(t, o)
	return o
}

func assertNoPanic(t *testing.T, o outcome) {
	t.Helper()
	for _, s := range []string{o.stdout, o.stderr} {
		assert.NotContains(t, s, "panic:")
		assert.NotContains(t, s, "goroutine ")
		assert.NotContains(t, s, "SIGSEGV")
	}
}

// decode parses stdout as exactly one JSON report.
func decode(t *testing.T, stdout string) *Report {
	t.Helper()
	require.True(t, json.Valid([]byte(stdout)), "-json output is not valid JSON:\n%s", stdout)
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var rep Report
	require.NoError(t, dec.Decode(&rep))
	var extra json.RawMessage
	assert.ErrorIs(t, dec.Decode(&extra), io.EOF, "one report, nothing after it")
	return &rep
}

func stepStatus(rep *Report) map[string]StepReport {
	m := map[string]StepReport{}
	for _, s := range rep.Steps {
		m[s.Name] = s
	}
	return m
}

// missingLibs returns overrides that name files which do not exist.
func missingLibs(t *testing.T) (cuda, nvrtcPath string, env []string) {
	dir := t.TempDir()
	cuda, nvrtcPath = filepath.Join(dir, "libcuda.so.1"), filepath.Join(dir, "libnvrtc.so.13")
	return cuda, nvrtcPath, []string{"PURECUDA_LIBCUDA=" + cuda, "PURECUDA_LIBNVRTC=" + nvrtcPath}
}

func TestNoDriverText(t *testing.T) {
	cuda, nv, env := missingLibs(t)
	o := smoke(t, env)
	assert.Equal(t, exitNoGPU, o.code, "no driver: exit 2\n%s", o.stdout)
	assert.Empty(t, o.stderr)
	out := o.stdout
	// both libraries are reported, each with every place searched
	assert.Contains(t, out, "FAIL  driver")
	assert.Contains(t, out, cuda+": no such file")
	assert.Contains(t, out, "FAIL  nvrtc")
	assert.Contains(t, out, nv+": no such file")
	assert.Contains(t, out, "skip  devices")
	assert.Contains(t, out, "needs driver")
	assert.Contains(t, out, "skip  compile")
	assert.Contains(t, out, "skip  launch")
	// and what to install
	if runtime.GOOS == "linux" {
		assert.Contains(t, out, "libcuda.so.1 comes with the NVIDIA driver, not with the CUDA toolkit")
		assert.Contains(t, out, "--gpus all")
	}
	assert.Contains(t, out, "PURECUDA_LIBCUDA="+cuda+" is the only path tried")
	assert.Contains(t, out, "PURECUDA_LIBNVRTC="+nv+" is the only path tried")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	assert.Contains(t, out, "skip  graph")
	assert.True(t, strings.HasPrefix(last, "FAIL  0 passed, 2 failed, 8 skipped"), last)
	assert.Contains(t, last, "no usable GPU: no CUDA driver library found (exit 2)")
}

func TestNoDriverSearchesEveryPlace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the default search list is checked on Linux")
	}
	o := smoke(t, []string{"PURECUDA_LIBCUDA=", "LD_LIBRARY_PATH=" + t.TempDir()}, "-json")
	rep := decode(t, o.stdout)
	if rep.Driver.Found {
		t.Skipf("this machine has a driver at %s", rep.Driver.Path)
	}
	var paths []string
	for _, a := range rep.Driver.Searched {
		paths = append(paths, a.Path)
		assert.NotEmpty(t, a.Reason)
	}
	assert.Equal(t, []string{"libcuda.so.1", "libcuda.so", "/usr/lib/wsl/lib/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"}, paths)
	assert.Equal(t, exitNoGPU, rep.ExitCode)
	assert.Equal(t, exitNoGPU, o.code)
}

func TestNoDriverJSON(t *testing.T) {
	cuda, nv, env := missingLibs(t)
	o := smoke(t, env, "-json")
	assert.Equal(t, exitNoGPU, o.code)
	assert.Empty(t, o.stderr)
	rep := decode(t, o.stdout)

	assert.Equal(t, "FAIL", rep.Result)
	assert.Equal(t, exitNoGPU, rep.ExitCode)
	assert.Equal(t, "no usable GPU: no CUDA driver library found", rep.Reason)
	assert.Equal(t, [3]int{0, 2, 8}, [3]int{rep.Passed, rep.Failed, rep.Skipped})
	assert.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, rep.Platform)
	assert.Equal(t, runtime.Version(), rep.Go)

	assert.False(t, rep.Driver.Found)
	assert.Equal(t, "PURECUDA_LIBCUDA", rep.Driver.EnvVar)
	assert.Equal(t, cuda, rep.Driver.Override)
	assert.Equal(t, []Attempt{{Path: cuda, Reason: "no such file"}}, rep.Driver.Searched)
	assert.Contains(t, rep.Driver.Error, "CUDA driver library not found")
	assert.False(t, rep.NVRTC.Found)
	assert.Equal(t, "PURECUDA_LIBNVRTC", rep.NVRTC.EnvVar)
	assert.Equal(t, []Attempt{{Path: nv, Reason: "no such file"}}, rep.NVRTC.Searched)
	assert.NotNil(t, rep.Devices)
	assert.Empty(t, rep.Devices)

	var names, statuses []string
	for _, s := range rep.Steps {
		names, statuses = append(names, s.Name), append(statuses, s.Status)
	}
	assert.Equal(t, []string{"driver", "nvrtc", "devices", "compile", "launch", "graph", "lifetime", "peer", "nccl", "cublas"}, names)
	assert.Equal(t, []string{"fail", "fail", "skip", "skip", "skip", "skip", "skip", "skip", "skip", "skip"}, statuses)
	st := stepStatus(rep)
	assert.Equal(t, "no CUDA driver library found", st["driver"].NoGPU)
	assert.Empty(t, st["nvrtc"].NoGPU, "NVRTC missing alone is a failure, not 'no GPU'")
	assert.Equal(t, "needs devices and nvrtc", st["compile"].Summary)
	require.NotEmpty(t, rep.Advice)

	// the text report states the same facts
	text := smoke(t, env)
	for _, s := range rep.Steps {
		label := map[string]string{"pass": "ok", "fail": "FAIL", "skip": "skip"}[s.Status]
		assert.Regexp(t, `(?m)^  `+label+` +`+s.Name+` `, text.stdout)
	}
	for _, a := range append(rep.Driver.Searched, rep.NVRTC.Searched...) {
		assert.Contains(t, text.stdout, a.Path+": "+a.Reason)
	}
	for _, a := range rep.Advice {
		assert.Contains(t, text.stdout, a)
	}
	assert.Contains(t, text.stdout, rep.Reason)
}

func TestWrongLibraryOverride(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses libc.so.6")
	}
	var libc string
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			libc = p
			break
		}
	}
	if libc == "" {
		t.Skip("libc.so.6 not found")
	}
	o := smoke(t, []string{"PURECUDA_LIBCUDA=" + libc}, "-json")
	rep := decode(t, o.stdout)
	assert.Equal(t, exitNoGPU, o.code)
	require.Len(t, rep.Driver.Searched, 1)
	assert.Contains(t, rep.Driver.Searched[0].Reason, "not the CUDA driver library (no symbol cuInit)")
}

// TestBrokenNVRTCOverride: a PURECUDA_LIBNVRTC that names nothing is
// reported with the path; on a machine with a GPU it fails the run (exit 1),
// without one the missing driver decides (exit 2).
func TestBrokenNVRTCOverride(t *testing.T) {
	nv := filepath.Join(t.TempDir(), "lib", "libnvrtc.so.13")
	o := smoke(t, []string{"PURECUDA_LIBNVRTC=" + nv}, "-json")
	rep := decode(t, o.stdout)
	assert.Equal(t, rep.ExitCode, o.code)
	st := stepStatus(rep)
	assert.Equal(t, statusFail, st["nvrtc"].Status)
	assert.Contains(t, st["nvrtc"].Error, nv+": no such file")
	assert.Equal(t, statusSkip, st["compile"].Status)
	assert.Contains(t, st["compile"].Summary, "nvrtc")
	assert.Contains(t, strings.Join(rep.Advice, "\n"), "PURECUDA_LIBNVRTC="+nv+" is the only path tried")
	if st["devices"].Status == statusPass {
		assert.Equal(t, exitFail, o.code, "a GPU but no NVRTC: a failed step")
		assert.Equal(t, "step nvrtc failed: loader: NVRTC library not found (set PURECUDA_LIBNVRTC to its full path to choose one)", rep.Reason)
	} else {
		assert.Equal(t, exitNoGPU, o.code, "no GPU decides")
	}

	text := smoke(t, []string{"PURECUDA_LIBNVRTC=" + nv})
	assert.Contains(t, text.stdout, nv+": no such file")
}

// TestDeviceOutOfRange: -device beyond the machine's devices says how many
// there are and exits 2.
func TestDeviceOutOfRange(t *testing.T) {
	o := smoke(t, nil, "-json", "-device", "99")
	rep := decode(t, o.stdout)
	assert.Equal(t, exitNoGPU, o.code)
	assert.Equal(t, 99, rep.Device)
	st := stepStatus(rep)
	if st["driver"].Status != statusPass {
		requireNoGPU(t, rep)
		t.Skipf("no driver here, so -device is never looked at: %s", rep.Reason)
	}
	assert.Equal(t, statusFail, st["devices"].Status)
	assert.Contains(t, st["devices"].Error, "-device 99: this machine has ")
	assert.Equal(t, "no device 99", st["devices"].NoGPU)
	assert.NotEmpty(t, rep.Devices, "the devices that exist are still listed")

	text := smoke(t, nil, "-device", "99")
	assert.Contains(t, text.stdout, "-device 99: this machine has ")
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"-device"}, "flag needs an argument: -device"},
		{[]string{"-device", "one"}, `invalid value "one" for flag -device`},
		{[]string{"-device", "-1"}, "-device -1: a device ordinal is 0 or more"},
		{[]string{"extra"}, "unexpected arguments: extra"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			assert.Equal(t, exitNoGPU, code, "usage errors exit 2, as Go's tools do")
			assert.Empty(t, stdout.String())
			assert.Contains(t, stderr.String(), "smoke: "+tc.msg)
			assert.Contains(t, stderr.String(), "usage: smoke [-device N] [-json] [-v]")
		})
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{arg}, &stdout, &stderr)
		assert.Equal(t, exitPass, code, arg)
		assert.Empty(t, stderr.String())
		for _, want := range []string{"usage: smoke", "-device N", "-json", "-v", "Exit status:", "PURECUDA_LIBCUDA", "PURECUDA_LIBNVRTC"} {
			assert.Contains(t, stdout.String(), want, arg)
		}
	}
}

// TestOnThisMachine runs every step: on a machine with a GPU (and under
// PURECUDA_REQUIRE_GPU) all must pass; without one it must exit 2 and say
// why.
func TestOnThisMachine(t *testing.T) {
	o := smoke(t, nil, "-json", "-v")
	rep := decode(t, o.stdout)
	assert.Equal(t, rep.ExitCode, o.code)
	if o.code == exitNoGPU {
		requireNoGPU(t, rep)
		gputest.Skip(t, rep.Reason)
	}
	text := smoke(t, nil, "-v")
	t.Logf("smoke -v:\n%s", text.stdout)
	require.Equal(t, exitPass, o.code, "%s\n%s", rep.Reason, text.stdout)
	assert.Equal(t, "PASS", rep.Result)
	assert.Zero(t, rep.Failed)
	for _, st := range rep.Steps {
		switch {
		case st.Name == "peer" && len(rep.Devices) < 2:
			assert.Equal(t, statusSkip, st.Status, "one GPU: peer is skipped")
		case st.Name == "nccl" && st.Status == statusSkip && strings.Contains(st.Summary, "no libnccl"):
			t.Logf("nccl skipped: %s", st.Summary)
		case st.Name == "cublas" && st.Status == statusSkip && strings.Contains(st.Summary, "no libcublas"):
			t.Logf("cublas skipped: %s", st.Summary)
		default:
			assert.Equal(t, statusPass, st.Status, "step %s: %s", st.Name, st.Summary)
		}
	}
	assert.True(t, rep.Driver.Found)
	assert.GreaterOrEqual(t, rep.Driver.VersionCode, 11000)
	assert.True(t, rep.NVRTC.Found)
	assert.NotEmpty(t, rep.NVRTC.Version)
	require.NotEmpty(t, rep.Devices)
	for _, d := range rep.Devices {
		assert.NotEmpty(t, d.Name)
		assert.Regexp(t, `^sm_\d+$`, d.Arch)
		assert.NotZero(t, d.MemoryBytes)
		assert.NotZero(t, d.SMs)
	}
	assert.Contains(t, text.stdout, "every result exact")
	assert.Regexp(t, `(?m)^PASS  \d+ passed(, 0 failed, \d+ skipped)? in `, text.stdout, "a skipped step (peer on one GPU, nccl or cublas without the library) is counted")
}

func requireNoGPU(t *testing.T, rep *Report) {
	t.Helper()
	if os.Getenv("PURECUDA_REQUIRE_GPU") != "" {
		t.Fatalf("PURECUDA_REQUIRE_GPU is set but smoke found no usable GPU: %s", rep.Reason)
	}
	assert.Equal(t, exitNoGPU, rep.ExitCode)
	assert.True(t, strings.HasPrefix(rep.Reason, "no usable GPU: "), rep.Reason)
}

// TestStepRunner checks the runner with steps of its own: needs, skips,
// panics, and the exit status each kind of failure gives.
func TestStepRunner(t *testing.T) {
	ok := func(*state) (string, error) { return "fine", nil }
	list := []step{
		{name: "a", run: func(st *state) (string, error) { st.note("always"); st.detail("verbose only"); return "A", nil }},
		{name: "b", needs: []string{"a"}, run: func(*state) (string, error) { panic("boom") }},
		{name: "c", needs: []string{"a", "b"}, run: ok},
		{name: "d", run: func(*state) (string, error) { return "", errors.New("broke\nsecond line") }},
	}
	var buf bytes.Buffer
	rep := runSteps(config{}, list, &textWriter{w: &buf})
	assert.Equal(t, exitFail, rep.ExitCode)
	assert.Equal(t, [3]int{1, 2, 1}, [3]int{rep.Passed, rep.Failed, rep.Skipped})
	assert.Equal(t, "step b failed: panic: boom", rep.Reason)
	assert.Equal(t, []string{"always"}, rep.Steps[0].Details)
	assert.Equal(t, "needs b", rep.Steps[2].Summary)
	out := buf.String()
	assert.Contains(t, out, "  ok    a ")
	assert.Contains(t, out, "  FAIL  b ")
	assert.Contains(t, out, "  skip  c ")
	assert.Contains(t, out, indent+"second line\n")
	assert.NotContains(t, out, "verbose only")
	assert.Contains(t, out, "FAIL  1 passed, 2 failed, 1 skipped in ")

	list = append(list, step{name: "e", run: func(st *state) (string, error) {
		st.advise("install it")
		return "", noGPU("nothing here", errors.New("no device"))
	}})
	buf.Reset()
	rep = runSteps(config{verbose: true}, list, &textWriter{w: &buf, verbose: true})
	assert.Equal(t, exitNoGPU, rep.ExitCode, "no GPU outranks other failures")
	assert.Equal(t, "no usable GPU: nothing here", rep.Reason)
	assert.Equal(t, []string{"always", "verbose only"}, rep.Steps[0].Details)
	assert.Contains(t, buf.String(), "What to do:\n  - install it\n")

	buf.Reset()
	rep = runSteps(config{}, []step{{name: "a", run: ok}}, &textWriter{w: &buf})
	assert.Equal(t, exitPass, rep.ExitCode)
	assert.Equal(t, "PASS", rep.Result)
	assert.Regexp(t, `(?m)^PASS  1 passed in \d`, buf.String())

	rep = runSteps(config{}, nil, &textWriter{w: io.Discard})
	assert.Equal(t, exitFail, rep.ExitCode, "nothing run is not a pass")
}

// TestStepRunnerGPUFault: a step failing with an unrecoverable GPU fault
// (here a kernel's illegal address, as CUDA reports it at the next
// synchronisation) says so plainly, in its line, in the reason and in the
// advice, and the steps after it are skipped: CUDA fails every one of them
// in this process.
func TestStepRunnerGPUFault(t *testing.T) {
	fault := &driver.Error{Func: "cuStreamSynchronize", Code: driver.ErrIllegalAddress}
	ran := false
	list := []step{
		{name: "a", run: func(*state) (string, error) { return "A", nil }},
		{name: "launch", run: func(st *state) (string, error) {
			st.deferClose(func() error { return &driver.Error{Func: "cuModuleUnload", Code: driver.ErrIllegalAddress} })
			return "", fmt.Errorf("checking the result: %w", fault)
		}},
		{name: "graph", run: func(*state) (string, error) { ran = true; return "G", nil }},
	}
	var buf bytes.Buffer
	rep := runSteps(config{}, list, &textWriter{w: &buf})
	assert.False(t, ran, "no step runs after the fault")
	assert.Equal(t, exitFail, rep.ExitCode)
	assert.Equal(t, [3]int{1, 1, 2}, [3]int{rep.Passed, rep.Failed, rep.Skipped}, "the cleanup's failed closes are not a second failure")
	assert.Equal(t, "not judged after the GPU fault in step launch", rep.Steps[3].Summary)
	want := "the GPU hit an unrecoverable fault; the process must exit to use CUDA again: " +
		"checking the result: cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (700): illegal address"
	assert.Equal(t, want, rep.Steps[1].Error)
	assert.Equal(t, "step launch failed: "+want, rep.Reason)
	assert.Equal(t, "the GPU fault in step launch ended CUDA for this process", rep.Steps[2].Summary)
	out := buf.String()
	assert.Contains(t, out, "  FAIL  launch ")
	assert.Contains(t, out, "  skip  graph ")
	assert.Contains(t, out, "What to do:\n  - run smoke again: a GPU fault ends CUDA")

	// An error that is not a fault is reported as it is.
	list[1].run = func(*state) (string, error) {
		return "", &driver.Error{Func: "cuMemAlloc", Code: driver.ErrOutOfMemory}
	}
	rep = runSteps(config{}, list, &textWriter{w: io.Discard})
	assert.True(t, ran)
	assert.Equal(t, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", rep.Steps[1].Error)
	assert.Empty(t, rep.Advice)
}

// TestSteps pins the order of the built-in steps; graph steps are appended
// after launch.
func TestSteps(t *testing.T) {
	var names []string
	for _, s := range steps {
		names = append(names, s.name)
	}
	require.GreaterOrEqual(t, len(names), 5)
	assert.Equal(t, []string{"driver", "nvrtc", "devices", "compile", "launch", "graph", "lifetime"}, names[:7])
	assert.Empty(t, steps[0].needs, "driver and nvrtc are both reported, whatever the other finds")
	assert.Empty(t, steps[1].needs)
}

func TestFormatting(t *testing.T) {
	assert.Equal(t, "0.25ms", formatDuration(250*time.Microsecond))
	assert.Equal(t, "38.2ms", formatDuration(38200*time.Microsecond))
	assert.Equal(t, "1.50s", formatDuration(1500*time.Millisecond))
	assert.Equal(t, "79.1 GiB", formatBytes(84929216512))
	assert.Equal(t, "3.0 KiB", formatBytes(3072))
	assert.Equal(t, "loader: x (y)", firstLine("loader: x (y); tried:\n\ta: b"))
	assert.Equal(t, "one", firstLine("one"))
	assert.Equal(t, "1 device", plural(1, "device"))
	assert.Equal(t, "2 devices", plural(2, "device"))
}

func TestDriverRelease(t *testing.T) {
	assert.Equal(t, "580.159.04", driverRelease("/usr/local/nvidia/lib64/libcuda.so.580.159.04"))
	assert.Equal(t, "", driverRelease("/usr/lib/x86_64-linux-gnu/libcuda.so.1"), "a soname, not a release")
	assert.Equal(t, "", driverRelease("libcuda.so"))
	assert.Equal(t, "", driverRelease(""))
	assert.Equal(t, "", driverRelease("/x/libcuda.so.580.1x"))
}
