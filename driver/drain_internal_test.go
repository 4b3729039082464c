package driver

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
)

// The list of a context's streams, which a free's wait records events on,
// forgets destroyed and dropped streams (a closed stream still held is
// waited for): when it is walked, and as it grows (a program that makes
// and closes streams and frees nothing keeps it small). Streams without CUDA: only the list is tested.
func TestLiveStreamsForgetsClosedAndDropped(t *testing.T) {
	c := &Context{h: cu.CUcontext(0xfeed0001)}
	defer func() {
		liveStreams.mu.Lock()
		delete(liveStreams.byCtx, c.h)
		liveStreams.mu.Unlock()
	}()
	newStream := func() *Stream {
		s := &Stream{ctx: c}
		s.obj.Init(func() error { return nil })
		noteStream(s)
		return s
	}
	count := func() int {
		liveStreams.mu.Lock()
		defer liveStreams.mu.Unlock()
		return len(liveStreams.byCtx[c.h])
	}
	for range 1000 {
		s := newStream()
		require.NoError(t, s.obj.Close())
	}
	assert.LessOrEqual(t, count(), 64, "closed streams are forgotten as the list grows")

	kept := newStream()
	for range 10 {
		newStream() // dropped without Close
	}
	closed := newStream()
	require.NoError(t, closed.obj.Close())
	busy := newStream() // closed, still held (a host function queued on it)
	require.True(t, busy.obj.Retain())
	require.NoError(t, busy.obj.Close())
	runtime.GC()
	runtime.GC()
	held := streamsOf(c)
	assert.Equal(t, []*Stream{kept, busy}, held, "the open stream, and the closed one still held, are waited for")
	for _, s := range held {
		require.NoError(t, s.obj.Release())
	}
	assert.Equal(t, 2, count(), "destroyed and dropped streams are forgotten when the list is walked")
	require.NoError(t, busy.obj.Release())
	held = streamsOf(c)
	assert.Equal(t, []*Stream{kept}, held, "a closed stream is forgotten once its last holder let go")
	for _, s := range held {
		require.NoError(t, s.obj.Release())
	}
	assert.Equal(t, 1, count())
	runtime.KeepAlive(kept)
}
