package driver_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/nvrtc"
)

// stickyChildEnv makes TestGPUStickyFaultPoisonsEveryContext run as the
// child that faults: a fault ends CUDA for the whole process, so it must
// not happen in the test binary that runs the other tests.
const stickyChildEnv = "PURECUDA_STICKY_FAULT_CHILD"

// faultSrc's kernel stores to an address no allocation has.
const faultSrc = `extern "C" __global__ void fault() { *(volatile int*)(0x10) = 1; }`

// TestGPUStickyFaultPoisonsEveryContext: a kernel that faults in one
// context makes CUDA fail with the same error everywhere in the process:
// its stream, its context, another retain of the primary context and a
// context created afterwards (seen on an H200: cuCtxCreate returns 700);
// what an idle context made before the fault returns is logged.
// Every one of those errors matches ErrSticky. The fault happens in a
// child process (the test binary run again), which reports what it saw.
func TestGPUStickyFaultPoisonsEveryContext(t *testing.T) {
	gputest.Require(t)
	if os.Getenv(stickyChildEnv) != "" {
		stickyChild(t)
		return
	}
	// A child that hangs after the fault (a call CUDA never returns from)
	// fails with its goroutines dumped, instead of holding the test
	// binary until its own timeout.
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestGPUStickyFaultPoisonsEveryContext$", "-test.v", "-test.count=1", "-test.timeout=90s")
	cmd.Env = append(os.Environ(), stickyChildEnv+"=1")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("the child:\n%s", out)
	require.NoError(t, err, "the child failed")
	assert.Contains(t, string(out), "STICKY-CHILD-DONE")
}

// stickyChild is the faulting side of TestGPUStickyFaultPoisonsEveryContext.
func stickyChild(t *testing.T) {
	res, err := nvrtc.Compile(faultSrc, nvrtc.Options{Arch: "compute_75"})
	require.NoError(t, err)
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	defer ctx.Close()
	mod, err := ctx.LoadModule(res.PTX)
	require.NoError(t, err)
	defer mod.Close()
	fn, err := mod.Function("fault")
	require.NoError(t, err)
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer s.Close()
	// Made before the fault: a second context, idle.
	before, err := dev.NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer before.Close()

	if err := s.Launch(fn, driver.Grid(1), driver.Block(1)); err != nil {
		require.ErrorIs(t, err, driver.ErrSticky, "a launch that fails at once fails with the fault")
	}
	err = s.Synchronize()
	require.ErrorIs(t, err, driver.ErrSticky, "the stream reports the fault")
	var de *driver.Error
	require.True(t, errors.As(err, &de))
	t.Logf("the fault: %v", err)

	assert.ErrorIs(t, ctx.Synchronize(), driver.ErrSticky, "its context")
	// Another context, idle since before the fault: what CUDA says of it
	// is recorded (an error there must be the fault).
	berr := before.Synchronize()
	if berr != nil {
		assert.ErrorIs(t, berr, driver.ErrSticky, "a context made before the fault")
	}
	t.Logf("an idle context made before the fault: Synchronize returns %v", berr)
	p2, err := dev.PrimaryContext()
	if err == nil {
		defer p2.Close()
		err = p2.Synchronize()
	}
	assert.ErrorIs(t, err, driver.ErrSticky, "the primary context, retained again")

	// A context made after the fault: its creation fails, or, where a
	// driver still creates it, its first synchronisation does.
	after, err := dev.NewContext(driver.ContextSchedAuto)
	how := "cuCtxCreate"
	if err == nil {
		how = "the new context's first synchronisation"
		defer after.Close()
		err = after.Synchronize()
	}
	require.ErrorIs(t, err, driver.ErrSticky, "a context made after the fault (%s)", how)
	t.Logf("a new context: %s fails: %v", how, err)
	if !t.Failed() {
		t.Log("STICKY-CHILD-DONE code=" + de.Code.String())
	}
}
