package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allocation.usedOn records the stream s that a call (a launch, an async
// copy) uses stream-ordered memory on, even when a Stream.Close racing the
// call marked s closed after the call's Acquire: the call still queues its
// work on s, whose handle it keeps alive, so the memory's free on its own
// stream must wait for s, or the device would use freed memory. (usedOn
// takes its reference with s.obj.Hold, which works after Close while the
// caller holds s; s.Hold would refuse.) Here the race is played step by
// step: s held by a call, then closed, then usedOn.
func TestUsedOnRecordsStreamClosedDuringCall(t *testing.T) {
	own := &Stream{} // the allocating stream
	own.obj.Init(nil)
	s := &Stream{ctx: &Context{}} // the launch's stream (Close ignores a Stream without a context)
	s.obj.Init(nil)
	a := &allocation{stream: own, ctx: s.ctx} // memory of the launch's context

	require.True(t, s.obj.Acquire(), "the launch holds s")
	require.NoError(t, s.Close(), "a Close racing the launch")
	a.usedOn(s) // the launch goes on: its kernel is queued on s
	a.fmu.Lock()
	n := len(a.foreign)
	a.fmu.Unlock()
	assert.Equal(t, 1, n, "s was not recorded: the free will not wait for the kernel queued on s")
	for _, f := range a.foreign {
		_ = f.ref.Release()
	}
	_ = s.obj.Release()
	_ = own.obj.Close()
}
