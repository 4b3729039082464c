package driver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// TestGPUHostFuncPanicAfterStreamClose: a host function queued behind a
// kernel panics after its stream was closed: the context's Synchronize
// returns the panic, once. When the context is closed as well before the
// host function runs, lifetime.Errors reports it.
func TestGPUHostFuncPanicAfterStreamClose(t *testing.T) {
	e, _ := setup(t)
	s, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, s.Launch(e.fn["spin"], driver.Grid(1), driver.Block(1), spinCycles)) // about 50 ms
	require.NoError(t, s.LaunchHostFunc(func() { panic("after close") }))
	require.NoError(t, s.Close())
	err = e.ctx.Synchronize()
	assert.ErrorContains(t, err, "host function panicked: after close")
	assert.NoError(t, e.ctx.Synchronize(), "returned once")

	c, err := e.dev.NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	s2, err := c.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	_ = lifetime.Errors()
	gate, ran := make(chan struct{}), make(chan struct{})
	require.NoError(t, s2.LaunchHostFunc(func() { <-gate; panic("orphan") }))
	require.NoError(t, s2.LaunchHostFunc(func() { close(ran) }))
	require.NoError(t, s2.Close())
	// cuCtxDestroy waits for the context's queued work, the host functions
	// included: close c on a goroutine of its own, and open the gate once
	// c is marked closed.
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if _, _, err := c.MemGetInfo(); errors.Is(err, driver.ErrClosed) {
			break
		}
		require.Less(t, time.Since(start), 10*time.Second, "Close did not mark the context closed")
	}
	close(gate)
	defer func() { assert.NoError(t, <-closed) }()
	select {
	case <-ran: // the panic was reported before the next host function ran
	case <-time.After(10 * time.Second):
		t.Fatal("the host functions did not run")
	}
	errs := lifetime.Errors()
	var found bool
	for _, err := range errs {
		found = found || strings.Contains(err.Error(), "host function panicked: orphan")
	}
	assert.True(t, found, "lifetime.Errors reports the panic: %v", errs)
}
