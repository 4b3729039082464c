// Command smoke is the first thing to run on a new machine: it checks, with
// purecuda's public API only, that Go can reach the GPU, and says what is
// missing when it cannot.
//
//	go run github.com/purecuda/cuda/cmd/smoke@latest
//	go run github.com/purecuda/cuda/cmd/smoke@latest -json
//
// It runs these steps, each timed and reported on its own line:
//
//	driver    find and open libcuda (nvcuda.dll), cuInit: its path and CUDA version
//	nvrtc     find and open NVRTC: its path and version
//	devices   list every device: name, sm_XX, memory, multiprocessors
//	compile   compile a small kernel with NVRTC for the chosen device
//	launch    load it, launch it over a million elements and check every result exactly
//	graph     build, replay and check a graph with a host callback
//	lifetime  check that a graph keeps what it names alive after Close
//	peer      with several GPUs: the peer access matrix and a checked copy to another GPU and back
//	nccl      where libnccl is found: an all-reduce over every GPU from this process, checked
//	cublas    where libcublas is found: its version and a checked SGEMM on row-major matrices
//
// The peer, nccl and cublas steps are skipped, with the reason, on a
// machine with one GPU, without NCCL or without cuBLAS; a skip does not
// fail the run.
// and ends with PASS or FAIL and the counts. The driver and NVRTC are both
// reported even when one of them is missing.
//
// # Flags
//
//	-device N   the device to compile for and launch on (default 0)
//	-json       print one JSON report on stdout instead of text (same facts)
//	-v          more detail: the places searched, the NVRTC options and log
//	-h          print this usage
//
// # Exit status
//
//	0  every step passed
//	1  a step failed: the report names it and the CUDA or NVRTC error; this
//	   includes NVRTC missing or a broken PURECUDA_LIBNVRTC on a machine that
//	   has a GPU. A step that hits an unrecoverable GPU fault (an illegal
//	   address, say) says so: CUDA then fails every later call of the
//	   process, so the steps after it are skipped
//	2  no usable GPU: no CUDA driver library (the report lists every place
//	   searched and what to install), an unsupported operating system, no CUDA
//	   device, or a -device that this machine does not have; also a usage error
//
// go run reports any non-zero status of the program as 1 (it prints "exit
// status 2" on stderr first), so a script that tells "no GPU" from "failed"
// runs the installed binary:
//
//	go install github.com/purecuda/cuda/cmd/smoke@latest
//	smoke; echo $?
//
// The binary needs no Go and no CUDA toolkit where it runs: build it with
// CGO_ENABLED=0 (GOOS=linux GOARCH=arm64 for Grace or Jetson machines) and copy
// it to the GPU machine. It needs the NVIDIA driver (libcuda) and, for the
// compile and launch steps, NVRTC.
//
// Environment: PURECUDA_LIBCUDA and PURECUDA_LIBNVRTC name a library's full
// path; when set, that path is the only one tried (see package loader).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit statuses.
const (
	exitPass  = 0
	exitFail  = 1
	exitNoGPU = 2 // also usage errors, as Go's own tools use 2
)

// config is what the flags chose.
type config struct {
	device  int
	json    bool
	verbose bool
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usageText = `usage: smoke [-device N] [-json] [-v]

smoke checks that purecuda can use this machine's GPU: it opens the CUDA
driver and NVRTC, lists the devices, compiles a kernel with NVRTC, launches
it and checks the result. Each step is timed and reported on its own line.

Flags:
`

const exitText = `
Exit status:
  0  every step passed
  1  a step failed (the report names it and the CUDA or NVRTC error);
     NVRTC missing, or a broken PURECUDA_LIBNVRTC, on a machine with a GPU
  2  no usable GPU: no CUDA driver, an unsupported OS, no device, or no
     device -device N; also a usage error
Under go run every non-zero status is 1: scripts run the installed binary
(go install github.com/purecuda/cuda/cmd/smoke@latest).

Environment:
  PURECUDA_LIBCUDA   full path of libcuda.so.1 / nvcuda.dll (the only one tried)
  PURECUDA_LIBNVRTC  full path of libnvrtc.so.13 / nvrtc64_130_0.dll (likewise)
`

// run is the whole command: it parses args, runs the steps and writes the
// report, and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	var cfg config
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	fs.IntVar(&cfg.device, "device", 0, "the device `N` to compile for and launch on")
	fs.BoolVar(&cfg.json, "json", false, "print one machine-readable JSON report instead of text")
	fs.BoolVar(&cfg.verbose, "v", false, "more detail: places searched, NVRTC options and log")
	usage := func(w io.Writer) {
		fmt.Fprint(w, usageText)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fmt.Fprint(w, exitText)
	}
	fs.SetOutput(io.Discard) // errors are printed below, once
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return exitPass
		}
		fmt.Fprintf(stderr, "smoke: %v\n", err)
		usage(stderr)
		return exitNoGPU
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "smoke: unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		usage(stderr)
		return exitNoGPU
	}
	if cfg.device < 0 {
		fmt.Fprintf(stderr, "smoke: -device %d: a device ordinal is 0 or more\n", cfg.device)
		usage(stderr)
		return exitNoGPU
	}

	var out io.Writer = stdout
	if cfg.json {
		out = io.Discard // the JSON report is written once, at the end
	}
	rep := runSteps(cfg, steps, &textWriter{w: out, verbose: cfg.verbose})
	if cfg.json {
		if err := writeJSON(stdout, rep); err != nil {
			fmt.Fprintf(stderr, "smoke: writing the report: %v\n", err)
			return exitFail
		}
	}
	return rep.ExitCode
}
