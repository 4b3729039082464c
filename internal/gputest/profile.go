package gputest

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
)

// Profile starts a CPU profile of the benchmark at 4000 samples a second
// (go test's -cpuprofile takes 100, too few to see a call's few hundred
// nanoseconds of Go) when PURECUDA_PROFILE_DIR names a directory, writing
// name.prof there; the returned function stops it. Without the variable,
// and in a benchmark's first round (b.N 1, so also under -benchtime=1x),
// it does nothing.
func Profile(b *testing.B, name string) (stop func()) {
	dir := os.Getenv("PURECUDA_PROFILE_DIR")
	// Not the first round of a benchmark (b.N 1, before the timed one): a
	// profile just stopped cannot be followed at once by another rate.
	if dir == "" || b.N <= 1 {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".prof"))
	if err != nil {
		b.Fatal(err)
	}
	runtime.SetCPUProfileRate(4000) // kept by StartCPUProfile, which asks for 100 only when none is set
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		runtime.SetCPUProfileRate(0)
		_ = f.Close()
	}
}
