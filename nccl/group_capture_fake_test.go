//go:build linux

package nccl_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/nccl"
)

// TestGroupTwoOpsRacingCaptureFromFake: a Group queuing two operations
// on one stream while another goroutine begins a capture on that stream
// ends (the capture waits for the group, or the group's second operation
// goes into the capture): no deadlock.
func TestGroupTwoOpsRacingCaptureFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := zeros[int32](t, s, 4)
	require.NoError(t, nccl.AllReduce(c, s, b, b, nccl.Sum))
	done := make(chan error, 1)
	capDone := make(chan struct{})
	go func() {
		done <- nccl.Group(func() error {
			if err := nccl.AllReduce(c, s, b, b, nccl.Sum); err != nil {
				return err
			}
			go func() {
				defer close(capDone)
				g, err := graph.Capture(s, graph.CaptureRelaxed, func(*driver.Stream) error { return nil })
				if err == nil {
					_ = g.Close()
				}
			}()
			time.Sleep(50 * time.Millisecond) // the capture is installed, waiting for the group
			return nccl.AllReduce(c, s, b, b, nccl.Sum)
		})
	}()
	untilDone(t, done, "the group", 1)
	<-capDone
	require.NoError(t, s.Synchronize())
}

// TestGroupTwoOpsRacingCaptureEndFromFake: a Group queuing two
// operations into a capture begun before it on another goroutine, which
// ends the capture while the group is open: the end waits for the group,
// whose second operation goes into the capture too: no deadlock.
func TestGroupTwoOpsRacingCaptureEndFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := zeros[int32](t, s, 4)
	require.NoError(t, nccl.AllReduce(c, s, b, b, nccl.Sum))
	require.NoError(t, s.Synchronize())
	begun, recorded := make(chan struct{}), make(chan struct{})
	capDone := make(chan error, 1)
	go func() {
		g, err := graph.Capture(s, graph.CaptureRelaxed, func(*driver.Stream) error {
			close(begun)
			<-recorded
			return nil
		})
		if err == nil {
			_ = g.Close()
		}
		capDone <- err
	}()
	<-begun
	done := make(chan error, 1)
	go func() {
		done <- nccl.Group(func() error {
			if err := nccl.AllReduce(c, s, b, b, nccl.Sum); err != nil {
				return err
			}
			close(recorded)
			time.Sleep(50 * time.Millisecond) // the capture is ending, waiting for the group
			return nccl.AllReduce(c, s, b, b, nccl.Sum)
		})
	}()
	untilDone(t, done, "the group", 1)
	untilDone(t, capDone, "the capture", 1)
	require.NoError(t, s.Synchronize())
}

// TestCaptureInsideGroupRefusedFromFake: inside a Group's function, a
// capture cannot begin, nor end, on a stream the group's operations hold
// until it ends (each would wait for the group, which waits for the
// function): both are refused with an error naming the Group, nothing
// hangs, and both work once the group is over.
func TestCaptureInsideGroupRefusedFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	b := zeros[int32](t, s, 4)
	require.NoError(t, nccl.AllReduce(c, s, b, b, nccl.Sum)) // the quick path's stream from now on
	other, err := c.Context().NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer other.Close()

	run := func(f func() error) error {
		done := make(chan error, 1)
		go func() { done <- nccl.Group(f) }()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("the Group hangs")
			return nil
		}
	}
	// Begin, on the group's stream (quick-held) and on another stream.
	require.NoError(t, run(func() error { // on the group's goroutine: errors returned, not required
		if err := nccl.AllReduce(c, s, b, b, nccl.Sum); err != nil {
			return err
		}
		_, err := graph.BeginCapture(s, graph.CaptureRelaxed)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		assert.ErrorContains(t, err, "Group")
		sc, err := graph.BeginCapture(other, graph.CaptureRelaxed) // not the group's: fine
		if err != nil {
			return err
		}
		g, err := sc.End()
		if err != nil {
			return err
		}
		return g.Close()
	}))
	// End, of a capture the group's operation went into.
	sc, err := graph.BeginCapture(s, graph.CaptureRelaxed)
	require.NoError(t, err)
	require.NoError(t, run(func() error {
		if err := nccl.AllReduce(c, s, b, b, nccl.Sum); err != nil { // captured: held with the capture
			return err
		}
		_, err := sc.End()
		assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		assert.ErrorContains(t, err, "Group")
		assert.ErrorIs(t, sc.Abort(), driver.ErrInvalidArgument, "Abort too: the capture goes on")
		return nil
	}))
	g, err := sc.End() // after the group: ends, with the operation in it
	require.NoError(t, err)
	require.NoError(t, g.Close())
	// And a capture begins once the group is over.
	sc, err = graph.BeginCapture(s, graph.CaptureRelaxed)
	require.NoError(t, err)
	require.NoError(t, sc.Abort())
	require.NoError(t, s.Synchronize())
}
