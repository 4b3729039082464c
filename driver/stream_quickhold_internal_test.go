package driver

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
)

// Invariant I3a: the protocol between Event.Record's quick holders of a
// stream (quickHold/endQuick) and the stream's destroy, on a Stream value
// whose CUDA destroy is counted instead of called.

// quickStream is an open owned Stream (no CUDA stream behind it) whose
// destroys go to *destroys; inside counts the quick holders between a
// successful quickHold and their endQuick, and a destroy that runs while
// one is inside is counted in *early.
func quickStream(t *testing.T) (s *Stream, destroys, inside, early *atomic.Int32) {
	destroys, inside, early = new(atomic.Int32), new(atomic.Int32), new(atomic.Int32)
	old := destroyStreamFn
	destroyStreamFn = func(cu.CUstream, *Context) error {
		if inside.Load() != 0 {
			early.Add(1)
		}
		destroys.Add(1)
		return nil
	}
	t.Cleanup(func() { destroyStreamFn = old })
	s = &Stream{cap: new(capState)}
	s.obj.Init(s.destroy)
	return s, destroys, inside, early
}

func TestQuickHoldDestroyOnce(t *testing.T) {
	t.Run("no holder: Close destroys", func(t *testing.T) {
		s, destroys, _, _ := quickStream(t)
		require.NoError(t, s.obj.Close())
		assert.EqualValues(t, 1, destroys.Load())
		assert.False(t, s.quickHold(), "closed")
		assert.EqualValues(t, 1, destroys.Load(), "a late holder destroys nothing")
	})
	t.Run("a holder inside: it destroys when it leaves", func(t *testing.T) {
		s, destroys, _, _ := quickStream(t)
		require.True(t, s.quickHold())
		require.NoError(t, s.obj.Close())
		assert.Zero(t, destroys.Load(), "not under the holder")
		assert.False(t, s.quickHold(), "closed")
		assert.Zero(t, destroys.Load(), "a late holder does not destroy under the first")
		s.endQuick()
		assert.EqualValues(t, 1, destroys.Load())
		assert.False(t, s.quickHold())
		assert.EqualValues(t, 1, destroys.Load())
	})
	t.Run("a late holder arrives between the last holder's drop and its claim", func(t *testing.T) {
		s, destroys, _, _ := quickStream(t)
		require.True(t, s.quickHold())
		require.NoError(t, s.obj.Close())
		// endQuick of the holder, taken apart: its drop sees the count
		// at zero ...
		require.EqualValues(t, streamDying, s.inflight.Add(-1))
		// ... a late holder adds itself before the claim ...
		s.inflight.Add(1)
		// ... so the claim fails, and the late holder, leaving, claims.
		s.destroyLate()
		assert.Zero(t, destroys.Load(), "claimed while another holder counted")
		s.endQuick()
		assert.EqualValues(t, 1, destroys.Load())
	})
	t.Run("captured or zero streams are never held quickly", func(t *testing.T) {
		s, _, _, _ := quickStream(t)
		s.capture.Store(&captureHook{})
		assert.False(t, s.quickHold())
		assert.Zero(t, s.inflight.Load()&streamCount)
		assert.False(t, new(Stream).quickHold())
		assert.False(t, (*Stream)(nil).quickHold())
	})
}

// Quick holders racing Close: the destroy runs exactly once, never while a
// holder that found the stream open is inside.
func TestQuickHoldRacesClose(t *testing.T) {
	for round := range 2000 {
		s, destroys, inside, early := quickStream(t)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range 50 {
					if s.quickHold() {
						inside.Add(1)
						inside.Add(-1)
						s.endQuick()
					}
				}
			}()
		}
		close(start)
		if round%2 == 1 {
			wg.Wait()
		}
		require.NoError(t, s.obj.Close())
		wg.Wait()
		require.EqualValues(t, 1, destroys.Load(), "round %d: destroyed once", round)
		require.Zero(t, early.Load(), "round %d: destroyed under a holder", round)
	}
}
