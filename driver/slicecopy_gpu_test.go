package driver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
)

// Stream copies of Go slices: CopyFromHostAsync reads the slice when it is
// called, CopyToHostAsync writes it when the stream reaches the copy, and
// neither waits for the stream. (CUDA's own copies of pageable memory read
// a large slice partly at the call and partly when the stream gets there,
// and make the caller of a device-to-host copy wait for the stream.)

const bigN = 1 << 20 // 4 MiB of int32: CUDA stages pageable copies in 2 MiB pieces

// TestGPUCopyFromHostAsyncReadsAtTheCall: a host function queued before the
// copy changes the slice after the call returned; the device gets the
// slice as it was at the call, all of it.
func TestGPUCopyFromHostAsyncReadsAtTheCall(t *testing.T) {
	gputest.Require(t)
	e, s := setup(t)
	mod, spin := loadSpin(t, e)
	defer mod.Close()
	dev, err := driver.Alloc[int32](e.ctx, bigN)
	require.NoError(t, err)
	defer dev.Close()
	src := make([]int32, bigN)
	for i := range src {
		src[i] = 1
	}
	scratch, err := driver.Alloc[int32](e.ctx, 1)
	require.NoError(t, err)
	defer scratch.Close()
	require.NoError(t, s.Launch(spin, driver.Grid(1), driver.Block(1), scratch, int32(0), int32(1), 2*spinCycles)) // ~100 ms
	require.NoError(t, s.LaunchHostFunc(func() {
		for i := range src {
			src[i] = 3
		}
	}))
	start := time.Now()
	require.NoError(t, dev.CopyFromHostAsync(s, src))
	took := time.Since(start)
	require.NoError(t, s.Synchronize())
	got, err := dev.ToHost(s)
	require.NoError(t, err)
	n, first := wrong(got, 1)
	assert.Zero(t, n, "elements not as the slice was at the call (first at %d)", first)
	assert.Less(t, took, 50*time.Millisecond, "the call waited for the stream")
	assert.EqualValues(t, 3, src[0], "the host function ran after the call")
}

// TestGPUCopyToHostAsyncDoesNotWait: a 4 MiB copy to a Go slice behind a
// ~100 ms kernel returns at once, and the slice holds the data once the
// stream is synchronised.
func TestGPUCopyToHostAsyncDoesNotWait(t *testing.T) {
	gputest.Require(t)
	e, s := setup(t)
	mod, spin := loadSpin(t, e)
	defer mod.Close()
	dev, err := driver.Alloc[int32](e.ctx, bigN)
	require.NoError(t, err)
	defer dev.Close()
	require.NoError(t, s.Launch(spin, driver.Grid(bigN/256), driver.Block(256), dev, int32(7), int32(bigN), 2*spinCycles))
	dst := make([]int32, bigN)
	start := time.Now()
	require.NoError(t, dev.CopyToHostAsync(s, dst))
	took := time.Since(start)
	require.NoError(t, s.Synchronize())
	n, first := wrong(dst, 7)
	assert.Zero(t, n, "elements not written (first at %d)", first)
	assert.Less(t, took, 50*time.Millisecond, "the call waited for the stream")
}

// TestGPUSliceCopiesBehindAWaitingHostFunction: a host function queued
// ahead waits for the caller; the copies must still return (a copy that
// waited for the stream would wait for good).
func TestGPUSliceCopiesBehindAWaitingHostFunction(t *testing.T) {
	gputest.Require(t)
	_, s := setup(t)
	dev, err := driver.AllocZeroed[int32](s, bigN)
	require.NoError(t, err)
	defer dev.Close()
	gate := make(chan struct{})
	require.NoError(t, s.LaunchHostFunc(func() { <-gate }))
	src, dst := make([]int32, bigN), make([]int32, bigN)
	for i := range src {
		src[i] = int32(i)
	}
	done := make(chan error, 1)
	go func() {
		err := dev.CopyFromHostAsync(s, src)
		if err == nil {
			err = dev.CopyToHostAsync(s, dst)
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		close(gate)
		t.Fatal("a copy waited for the host function queued before it")
	}
	close(gate)
	require.NoError(t, s.Synchronize())
	assert.Equal(t, src, dst)
}
