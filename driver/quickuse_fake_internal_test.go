//go:build linux

package driver

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/seam"
)

// quickOf is a seam.Quick naming bufs (*Buffer values of any type).
func quickOf(bufs ...unsafe.Pointer) *seam.Quick {
	q := &seam.Quick{N: len(bufs)}
	copy(q.Buf[:], bufs)
	return q
}

// TestFakeQuickUse: seam.Use, the quick hold of another library's call,
// holds the stream by its in-flight count and each buffer's memory by a
// reference, with the addresses and sizes the general path (UseOn)
// gives; and it refuses, holding nothing, whatever the general path must
// handle or explain.
func TestFakeQuickUse(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	x := newTwoContexts(t, false)
	s := x.sa
	a, err := Alloc[float32](x.ca, 16)
	require.NoError(t, err)
	defer a.Close()
	b, err := Alloc[int8](x.ca, 5)
	require.NoError(t, err)
	defer b.Close()
	view, err := a.Slice(4, 12) // a view: its own address and size
	require.NoError(t, err)
	other, err := Alloc[float32](x.cb, 4)
	require.NoError(t, err)
	defer other.Close()
	refs := func() [2]int64 { return [2]int64{a.a.obj.Refs(), b.a.obj.Refs()} }
	before := refs()

	t.Run("held", func(t *testing.T) {
		q := quickOf(unsafe.Pointer(view), unsafe.Pointer(b), unsafe.Pointer(a))
		require.True(t, seam.Use(unsafe.Pointer(s), q))
		assert.NotZero(t, s.inflight.Load()&streamCount, "the stream, by its count")
		assert.Equal(t, [2]int64{before[0] + 2, before[1] + 1}, refs(), "a reference per buffer named")
		assert.Equal(t, [3]uintptr{uintptr(view.Ptr()), uintptr(b.Ptr()), uintptr(a.Ptr())}, [3]uintptr(q.Ptr[:3]))
		assert.Equal(t, [3]uintptr{8 * 4, 5, 16 * 4}, [3]uintptr(q.Bytes[:3]))
		assert.Equal(t, uintptr(x.ca.h), q.Ctx)
		assert.Equal(t, uintptr(s.h), q.Strm)
		p, bytes, ref, err := seam.UseOn("test", view, s)
		require.NoError(t, err)
		assert.Equal(t, [2]uintptr{p, bytes}, [2]uintptr{q.Ptr[0], q.Bytes[0]}, "as the general path gives them")
		require.NoError(t, ref.Release())
		seam.Leave(unsafe.Pointer(s))
		seam.Release(q)
		assert.Equal(t, before, refs(), "released")
		assert.Nil(t, q.Held[0])
	})
	t.Run("no buffer", func(t *testing.T) {
		q := quickOf()
		require.True(t, seam.Use(unsafe.Pointer(s), q))
		seam.Leave(unsafe.Pointer(s))
		seam.Release(q)
		assert.Eventually(t, func() bool { return s.inflight.Load()&streamCount == 0 }, 10*time.Second, time.Millisecond)
	})

	closedBuf, err := Alloc[float32](x.ca, 4)
	require.NoError(t, err)
	require.NoError(t, closedBuf.Close())
	closedStream, err := x.ca.NewStream(StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, closedStream.Close())
	captured, err := x.ca.NewStream(StreamNonBlocking)
	require.NoError(t, err)
	defer captured.Close()
	captured.capture.Store(&captureHook{})
	defer captured.capture.Store(nil)
	legacy := x.ca.LegacyStream()
	for _, c := range []struct {
		name string
		s    *Stream
		q    *seam.Quick
	}{
		{"nil stream", nil, quickOf(unsafe.Pointer(a))},
		{"zero stream", new(Stream), quickOf(unsafe.Pointer(a))},
		{"legacy stream", legacy, quickOf(unsafe.Pointer(a))},
		{"closed stream", closedStream, quickOf(unsafe.Pointer(a))},
		{"captured stream", captured, quickOf(unsafe.Pointer(a))},
		{"nil buffer", s, quickOf(unsafe.Pointer(a), nil)},
		{"zero buffer", s, quickOf(unsafe.Pointer(a), unsafe.Pointer(new(Buffer[float32])))},
		{"closed buffer", s, quickOf(unsafe.Pointer(a), unsafe.Pointer(closedBuf))},
		{"another context's buffer", s, quickOf(unsafe.Pointer(b), unsafe.Pointer(other))},
		{"too many", s, &seam.Quick{N: seam.QuickBufs + 1}},
		{"negative count", s, &seam.Quick{N: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.False(t, seam.Use(unsafe.Pointer(c.s), c.q))
			assert.Equal(t, before, refs(), "nothing held")
			// Other holders (the release worker's event records) come
			// and go on s: its count falls back to zero.
			assert.Eventually(t, func() bool { return s.inflight.Load()&streamCount == 0 }, 10*time.Second, time.Millisecond)
			assert.Zero(t, captured.inflight.Load()&streamCount)
		})
	}
	faketest.NoBadUses(t)
}

// TestFakeQuickUseHoldsThroughClose: a buffer and the stream closed while
// a quick holder has them stay alive until it lets go: the buffer's memory
// until Release, the CUDA stream until Leave.
func TestFakeQuickUseHoldsThroughClose(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	x := newTwoContexts(t, false)
	s, err := x.ca.NewStream(StreamNonBlocking)
	require.NoError(t, err)
	buf, err := Alloc[float32](x.ca, 4)
	require.NoError(t, err)
	al := buf.a
	q := quickOf(unsafe.Pointer(buf))
	require.True(t, seam.Use(unsafe.Pointer(s), q))
	require.NoError(t, buf.Close())
	require.NoError(t, s.Close())
	assert.False(t, al.obj.Destroyed(), "the memory is held")
	assert.Zero(t, s.inflight.Load()&streamDone, "the stream is not destroyed under the holder")
	seam.Leave(unsafe.Pointer(s))
	assert.NotZero(t, s.inflight.Load()&streamDone, "the holder destroyed the stream as it left")
	seam.Release(q)
	// The free itself may wait for the context's streams.
	assert.Eventually(t, al.obj.Destroyed, 10*time.Second, time.Millisecond, "the memory is released")
	faketest.NoBadUses(t)
}

// TestFakeQuickUseNotesStreamOrderedMemory: stream-ordered memory that a
// quick holder's work uses on another stream is freed after that work, as
// with the general path: the stream is noted among the memory's users.
func TestFakeQuickUseNotesStreamOrderedMemory(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	x := newTwoContexts(t, false)
	s2, err := x.ca.NewStream(StreamNonBlocking)
	require.NoError(t, err)
	defer s2.Close()
	buf, err := AllocAsync[float32](s2, 4)
	require.NoError(t, err)
	q := quickOf(unsafe.Pointer(buf))
	require.True(t, seam.Use(unsafe.Pointer(x.sa), q))
	seam.Leave(unsafe.Pointer(x.sa))
	seam.Release(q)
	buf.a.fmu.Lock()
	users := len(buf.a.foreign)
	noted := users == 1 && buf.a.foreign[0].s == x.sa
	buf.a.fmu.Unlock()
	assert.True(t, noted, "the using stream is noted (%d users)", users)
	require.NoError(t, buf.Close())
	require.NoError(t, s2.Synchronize())
	require.NoError(t, x.sa.Synchronize())
	faketest.NoBadUses(t)
}
