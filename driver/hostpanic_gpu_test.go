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
	// cuCtxDestroy waits for the context's queued work, the host functions
	// included, and so does cuStreamDestroy under compute-sanitizer: close
	// s2 and c on goroutines of their own, and open the gate once both are
	// marked closed.
	s2closed, closed := make(chan error, 1), make(chan error, 1)
	go func() { s2closed <- s2.Close() }()
	waitClosed(t, func() error { return s2.LaunchHostFunc(func() {}) })
	go func() { closed <- c.Close() }()
	waitClosed(t, func() error { _, _, err := c.MemGetInfo(); return err })
	close(gate)
	defer func() { assert.NoError(t, <-s2closed); assert.NoError(t, <-closed) }()
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

// waitClosed calls probe until it fails with ErrClosed. Each probe runs on
// a goroutine of its own: a probe that holds the object when Close marks
// it is its last user, and destroys it when it returns (which may wait for
// queued work); the next probe sees it closed.
func waitClosed(t *testing.T, probe func() error) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		done := make(chan error, 1)
		go func() { done <- probe() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(100 * time.Millisecond):
		}
		if errors.Is(err, driver.ErrClosed) {
			return
		}
		require.Less(t, time.Since(start), 10*time.Second, "Close did not mark the object closed")
	}
}
