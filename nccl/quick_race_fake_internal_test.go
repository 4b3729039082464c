//go:build linux

package nccl

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestEnqueueQuickPathRacesFromFake: operations on four goroutines (the
// quick path, and Groups) while another captures an operation on the same
// stream, receive buffers closed on other goroutines; then the
// communicator, stream and buffer closed racing operations: no deadlock
// within a minute, no bad use of the fake driver.
func TestEnqueueQuickPathRacesFromFake(t *testing.T) {
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, ctx, c, s := oneRank(t)
	send, err := driver.AllocCopy(s, []int32{1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, AllReduce(c, s, send, send, Sum))
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				r, err := driver.Alloc[int32](ctx, 3)
				if err != nil {
					t.Error(err)
					return
				}
				_ = AllReduce(c, s, send, r, Sum)
				if i%7 == 0 {
					_ = Group(func() error { return AllReduce(c, s, send, r, Sum) })
				}
				go func() { _ = r.Close() }()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			g, err := graph.Capture(s, graph.CaptureRelaxed, func(*driver.Stream) error {
				return AllReduce(c, s, send, send, Sum)
			})
			if err == nil {
				_ = g.Close()
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("deadlock")
	}
	// Close racing operations.
	var wg2 sync.WaitGroup
	wg2.Add(3)
	go func() { defer wg2.Done(); _ = c.Close() }()
	go func() { defer wg2.Done(); _ = s.Close() }()
	go func() { defer wg2.Done(); _ = send.Close() }()
	for i := 0; i < 50; i++ {
		_ = AllReduce(c, s, send, send, Sum)
	}
	wg2.Wait()
	faketest.NoBadUses(t)
}
