package graph

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/lifetime"
)

// Must show: memory closed while a stream is being captured, in any mode,
// in the capturing context or in another, is freed without invalidating
// the capture: in the capturing context after the capture ends (the free
// waits for the context's work, which would fail), elsewhere at once with
// the releasing thread's capture mode relaxed (a global capture refuses
// cuMemFree on every thread otherwise). Buffer.Close frees on the release
// queue, so this is what any Close just before or during a capture meets.
func TestCloseMemoryDuringCapture(t *testing.T) {
	e, s := setup(t)
	other, err := e.dev.NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer other.Close()
	out, err := driver.Alloc[int32](e.ctx, 4)
	require.NoError(t, err)
	defer out.Close()
	g1, b4 := driver.Grid(1), driver.Block(4)
	for _, mode := range modes {
		for _, where := range []*driver.Context{e.ctx, other} {
			msg := fmt.Sprintf("%v, capturing context %v", mode, where == e.ctx)
			_ = lifetime.Errors()
			collect()
			st0 := lifetime.ReadStats()
			buf, err := driver.Alloc[int32](where, 1<<20)
			require.NoError(t, err, msg)
			hb, err := driver.AllocHost[int32](where, 1<<10, 0)
			require.NoError(t, err, msg)

			s2, err := e.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err, msg)
			c, err := BeginCapture(s2, mode)
			require.NoError(t, err, msg)
			require.NoError(t, s2.Launch(e.fn["fill"], g1, b4, out, int32(10), int32(4)), msg)
			ptr := buf.Ptr()
			require.NoError(t, errors.Join(buf.Close(), hb.Close()), msg+": Close during a capture")
			lifetime.Flush() // the frees (or their hand-off to the capture's end) have run
			assert.Equal(t, where == e.ctx, deviceAllocated(ptr), msg+": freed at once in another context, after the capture in its own")
			require.NoError(t, s2.Launch(e.fn["fill"], g1, b4, out, int32(20), int32(4)), msg+": the capture goes on")
			g, err := c.End()
			require.NoError(t, err, msg+": the capture ends")
			nodes, err := g.Nodes()
			require.NoError(t, err, msg)
			assert.Len(t, nodes, 2, msg+": the frees are not captured")
			x, err := g.Instantiate()
			require.NoError(t, err, msg)
			require.NoError(t, x.Launch(s2), msg)
			require.NoError(t, s2.Synchronize(), msg)
			got, err := out.ToHost(s2)
			require.NoError(t, err, msg)
			assert.Equal(t, []int32{20, 21, 22, 23}, got, msg)
			require.NoError(t, errors.Join(x.Close(), g.Close(), s2.Close()), msg)
			eventually(t, func() bool { return lifetime.ReadStats().Objects <= st0.Objects && !deviceAllocated(ptr) }, msg+": the memory is freed")
			assert.Empty(t, lifetime.Errors(), msg+": no release failed")
		}
	}
	requireIdle(t, e, s, "after")
}

// deviceAllocated reports whether the driver still knows ptr as an
// allocation.
func deviceAllocated(ptr driver.DevicePtr) bool { return gputest.Allocated(uintptr(ptr)) }

// Must show: a release (a Buffer's free, a HostBuffer's, a module's
// unload) waits for the context's work without keeping a capture from
// beginning: closed while a host function waits for the test, it waits on
// purecuda's release goroutine (or Close's), and a capture begun meanwhile
// on another stream of the context begins at once, is not invalidated when
// the wait ends during it, and ends; the release runs after it, and
// nothing fails. (A BeginCapture that waited for the release would wait
// for the host function, which waits for BeginCapture's caller.)
func TestBeginCaptureDuringAWaitingRelease(t *testing.T) {
	e, s := setup(t)
	out, err := driver.Alloc[int32](e.ctx, 4)
	require.NoError(t, err)
	defer out.Close()
	g1, b4 := driver.Grid(1), driver.Block(4)
	kinds := []struct {
		name string
		make func() (func() error, error)
	}{
		{"Buffer", func() (func() error, error) {
			b, err := driver.Alloc[int32](e.ctx, 1<<20)
			return b.Close, err
		}},
		{"HostBuffer", func() (func() error, error) {
			h, err := driver.AllocHost[int32](e.ctx, 1<<10, 0)
			return h.Close, err
		}},
		{"Module", func() (func() error, error) {
			m, err := e.ctx.LoadModule(e.ptx)
			return m.Close, err
		}},
	}
	for _, k := range kinds {
		for _, mode := range modes {
			msg := fmt.Sprintf("%s, %v", k.name, mode)
			_ = lifetime.Errors()
			closeIt, err := k.make()
			require.NoError(t, err, msg)
			s2, err := e.ctx.NewStream(driver.StreamNonBlocking)
			require.NoError(t, err, msg)
			gate, ran := make(chan struct{}), make(chan struct{})
			require.NoError(t, s.LaunchHostFunc(func() { <-gate }), msg)
			require.NoError(t, s.LaunchHostFunc(func() { close(ran) }), msg)
			closed := make(chan error, 1)
			go func() { closed <- closeIt() }()
			time.Sleep(100 * time.Millisecond) // the release waits for the context's work
			began := make(chan *StreamCapture, 1)
			go func() {
				c, err := BeginCapture(s2, mode)
				assert.NoError(t, err, msg)
				began <- c
			}()
			var c *StreamCapture
			select {
			case c = <-began:
			case <-time.After(5 * time.Second):
				close(gate)
				stackWithin(t, flushWait, msg+": BeginCapture after the host function ran", func() {
					if c := <-began; c != nil {
						_ = c.Abort()
					}
				})
				t.Fatalf("%s: BeginCapture waited for a release that waits for a host function", msg)
			}
			require.NotNil(t, c, msg)
			defer func() { _ = c.Abort() }() // a no-op after End; after a failure, no capture is left behind
			require.NoError(t, s2.Launch(e.fn["fill"], g1, b4, out, int32(30), int32(4)), msg)
			close(gate) // the release's wait ends during the capture
			// (no Synchronize: a capture in global mode elsewhere refuses it)
			stackWithin(t, flushWait, msg+": the host functions run", func() { <-ran })
			stackWithin(t, flushWait, msg+": the Close returns", func() { err = <-closed })
			require.NoError(t, err, msg)
			flush(t)
			time.Sleep(20 * time.Millisecond)
			require.NoError(t, s2.Launch(e.fn["fill"], g1, b4, out, int32(40), int32(4)), msg+": the capture goes on")
			var g *Graph
			stackWithin(t, flushWait, msg+": End", func() { g, err = c.End() })
			require.NoError(t, err, msg+": the capture was not invalidated")
			x, err := g.Instantiate()
			require.NoError(t, err, msg)
			require.NoError(t, x.Launch(s2), msg)
			got, err := out.ToHost(s2)
			require.NoError(t, err, msg)
			assert.Equal(t, []int32{40, 41, 42, 43}, got, msg)
			require.NoError(t, errors.Join(x.Close(), g.Close(), s2.Close()), msg)
			flush(t) // the release, handed to the capture's end, has run
			assert.Empty(t, lifetime.Errors(), msg+": no release failed")
		}
	}
	requireIdle(t, e, s, "after")
}

// Must show: the same with the host function on a stream closed right after
// it was queued (defer s.Close()): CUDA still runs it, and the free waits
// for it without keeping a capture from beginning.
func TestBeginCaptureDuringAReleaseWaitingOnAClosedStream(t *testing.T) {
	e, s := setup(t)
	out, err := driver.Alloc[int32](e.ctx, 4)
	require.NoError(t, err)
	defer out.Close()
	g1, b4 := driver.Grid(1), driver.Block(4)
	for _, mode := range modes {
		msg := fmt.Sprint(mode)
		_ = lifetime.Errors()
		b, err := driver.Alloc[int32](e.ctx, 1<<20)
		require.NoError(t, err, msg)
		s1, err := e.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err, msg)
		gate, ran := make(chan struct{}), make(chan struct{})
		require.NoError(t, s1.LaunchHostFunc(func() { <-gate }), msg)
		require.NoError(t, s1.LaunchHostFunc(func() { close(ran) }), msg)
		require.NoError(t, s1.Close(), msg)
		ptr := b.Ptr()
		require.NoError(t, b.Close(), msg)
		time.Sleep(100 * time.Millisecond) // the free waits for the closed stream's host function
		s2, err := e.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err, msg)
		began := make(chan *StreamCapture, 1)
		go func() {
			c, err := BeginCapture(s2, mode)
			assert.NoError(t, err, msg)
			began <- c
		}()
		var c *StreamCapture
		select {
		case c = <-began:
		case <-time.After(5 * time.Second):
			close(gate)
			stackWithin(t, flushWait, msg+": BeginCapture after the host function ran", func() {
				if c := <-began; c != nil {
					_ = c.Abort()
				}
			})
			t.Fatalf("%s: BeginCapture waited for a free that waits for a host function of a closed stream", msg)
		}
		require.NotNil(t, c, msg)
		defer func() { _ = c.Abort() }() // a no-op after End; after a failure, no capture is left behind
		require.NoError(t, s2.Launch(e.fn["fill"], g1, b4, out, int32(50), int32(4)), msg)
		close(gate) // the free's wait ends during the capture
		stackWithin(t, flushWait, msg+": the host functions run", func() { <-ran })
		flush(t)
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, s2.Launch(e.fn["fill"], g1, b4, out, int32(60), int32(4)), msg+": the capture goes on")
		var g *Graph
		stackWithin(t, flushWait, msg+": End", func() { g, err = c.End() })
		require.NoError(t, err, msg+": the capture was not invalidated")
		x, err := g.Instantiate()
		require.NoError(t, err, msg)
		require.NoError(t, x.Launch(s2), msg)
		got, err := out.ToHost(s2)
		require.NoError(t, err, msg)
		assert.Equal(t, []int32{60, 61, 62, 63}, got, msg)
		require.NoError(t, errors.Join(x.Close(), g.Close(), s2.Close()), msg)
		eventually(t, func() bool { return !deviceAllocated(ptr) }, msg+": the memory is freed after the capture")
		assert.Empty(t, lifetime.Errors(), msg+": no release failed")
	}
	requireIdle(t, e, s, "after")
}
