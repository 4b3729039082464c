// Command smoke checks that purecuda can reach the GPU: it opens the CUDA
// driver and NVRTC, reports where it found them and their versions, and
// resolves every driver entry point.
//
//	go run ./cmd/smoke
//
// Exit status: 0 when the driver loads and initialises, 2 when it cannot be
// found or started (the message lists every place that was tried), 1 when
// something else fails.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/rtc"
	"github.com/purecuda/cuda/loader"
)

func main() { os.Exit(run(os.Stdout, os.Stderr)) }

func run(stdout, stderr io.Writer) int {
	path, version, err := cu.Load()
	if err != nil {
		fmt.Fprintf(stderr, "smoke: the CUDA driver is not available:\n%v\n", err)
		if errors.Is(err, loader.ErrNotFound) {
			return 2
		}
		return 1
	}
	fmt.Fprintf(stdout, "driver:  %s (CUDA %s)\n", path, cu.FormatVersion(version))
	if err := cu.Init(0); err != nil {
		fmt.Fprintf(stderr, "smoke: cuInit failed: %v\n", err)
		return 2
	}
	var n int32
	if err := cu.DeviceGetCount(&n); err != nil {
		fmt.Fprintf(stderr, "smoke: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "devices: %d\n", n)
	resolved, failed := 0, 0
	for _, r := range cu.ResolveAll() {
		if r.Err != nil {
			failed++
			fmt.Fprintf(stdout, "  unresolved: %v\n", r.Err)
			continue
		}
		resolved++
	}
	fmt.Fprintf(stdout, "entry points: %d resolved, %d not available\n", resolved, failed)
	if p, err := rtc.Load(); err != nil {
		fmt.Fprintf(stdout, "nvrtc:   not available (%v)\n", err)
	} else {
		var major, minor int32
		if err := rtc.Version(&major, &minor); err != nil {
			fmt.Fprintf(stdout, "nvrtc:   %s (version unknown: %v)\n", p, err)
		} else {
			fmt.Fprintf(stdout, "nvrtc:   %s (%d.%d)\n", p, major, minor)
		}
	}
	return 0
}
