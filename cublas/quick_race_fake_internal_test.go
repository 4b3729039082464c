//go:build linux

package cublas

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/faketest"
)

// TestGemmQuickPathRacesFromFake: Gemm on four goroutines (the quick path)
// while another captures Gemm on the handle's stream, output buffers
// closed at once or on other goroutines, and Gemm racing the close of its
// C: no deadlock within a minute, no bad use of the fake driver.
func TestGemmQuickPathRacesFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	h, s := quickEnv(t)
	a := quickUp(t, s, make([]float32, 16))
	b := quickUp(t, s, make([]float32, 16))
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				c, err := driver.Alloc[float32](h.Context(), 16)
				if err != nil {
					t.Error(err)
					return
				}
				_ = Gemm(h, 1, ColMajorMatrix(a, 4, 4), ColMajorMatrix(b, 4, 4), 0, ColMajorMatrix(c, 4, 4))
				if i%3 == 0 {
					go func() { _ = c.Close() }()
				} else {
					_ = c.Close()
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			c, _ := driver.Alloc[float32](h.Context(), 16)
			g, err := graph.Capture(s, graph.CaptureRelaxed, func(*driver.Stream) error {
				return Gemm(h, 1, ColMajorMatrix(a, 4, 4), ColMajorMatrix(b, 4, 4), 0, ColMajorMatrix(c, 4, 4))
			})
			_ = c.Close()
			if err == nil {
				_ = g.Close()
			}
		}
	}()
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("deadlock")
	}
	h2, s2 := quickEnv(t)
	var wg2 sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg2.Add(2)
		c := quickUp(t, s2, make([]float32, 16))
		go func() {
			defer wg2.Done()
			_ = Gemm(h2, 1, ColMajorMatrix(a, 4, 4), ColMajorMatrix(b, 4, 4), 0, ColMajorMatrix(c, 4, 4))
		}()
		go func() { defer wg2.Done(); _ = c.Close() }()
	}
	wg2.Wait()
	require.NoError(t, h2.Close())
	require.NoError(t, s.Synchronize())
	faketest.NoBadUses(t)
}
