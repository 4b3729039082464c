//go:build linux

package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// What purecuda keeps per CUDA context for frees' waits and captures (the
// list of its streams, its capture gate) goes with the context: a program
// that makes and closes contexts keeps none of it (fakecuda never reuses a
// handle, so each context is a new key).
func TestFakeContextsLeaveNoPerContextState(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	require.NoError(t, Init())
	dev, err := DeviceByOrdinal(0)
	require.NoError(t, err)
	sizes := func() (int, int) {
		liveStreams.mu.Lock()
		n := len(liveStreams.byCtx)
		liveStreams.mu.Unlock()
		captures.mu.Lock()
		defer captures.mu.Unlock()
		return n, len(captures.gates)
	}
	streams0, gates0 := sizes()
	for i := range 50 {
		c, err := dev.NewContext(0)
		require.NoError(t, err)
		s, err := c.NewStream(StreamNonBlocking)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		if i%2 == 0 { // a free walks the list of streams, and makes the gate
			b, err := Alloc[int32](c, 16)
			require.NoError(t, err)
			require.NoError(t, b.Close())
		}
		require.NoError(t, c.Close())
	}
	lifetime.Flush()
	streams, gates := sizes()
	assert.Equal(t, streams0, streams, "stream lists of destroyed contexts")
	assert.Equal(t, gates0, gates, "capture gates of destroyed contexts")
}
