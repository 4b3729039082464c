//go:build (linux || darwin) && (amd64 || arm64)

package hostfn_test

import (
	"github.com/purecuda/cuda/internal/hostfn"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// Invariants I6, I7: the trampoline HostFn returns is a real C function:
// called through C's calling convention (purego.SyscallN, as CUDA would
// call it) with a callback id as its only argument, it dispatches to that
// callback — from many goroutines at once, with Once and repeating
// callbacks, and with panics and Goexit contained on the way back to C.
func TestHostFnDispatchesThroughC_I6_I7(t *testing.T) {
	fn, err := hostfn.HostFn()
	require.NoError(t, err)
	require.NotZero(t, fn)
	before := lifetime.ReadStats()

	var got atomic.Int64
	id := hostfn.Register(hostfn.Callback{Fn: func() { got.Add(7) }, Once: true})
	purego.SyscallN(fn, id)
	assert.EqualValues(t, 7, got.Load())
	purego.SyscallN(fn, id) // ran already: nothing
	purego.SyscallN(fn, 0)  // unknown: nothing
	assert.EqualValues(t, 7, got.Load())

	var wg sync.WaitGroup
	var sum atomic.Int64
	rep := hostfn.Register(hostfn.Callback{Fn: func() { sum.Add(1) }})
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				v := int64(g*1000 + i)
				id := hostfn.Register(hostfn.Callback{Fn: func() { sum.Add(v) }, Once: true})
				purego.SyscallN(fn, id)
				purego.SyscallN(fn, rep)
			}
		}()
	}
	wg.Wait()
	want := int64(0)
	for g := range 16 {
		for i := range 50 {
			want += int64(g*1000+i) + 1
		}
	}
	assert.Equal(t, want, sum.Load(), "every id reached its own callback")
	require.True(t, hostfn.Unregister(rep))

	sink := &recordingSink{}
	purego.SyscallN(fn, hostfn.Register(hostfn.Callback{Fn: panickyCallback, Once: true, Sink: sink}))
	purego.SyscallN(fn, hostfn.Register(hostfn.Callback{Fn: func() { runtime.Goexit() }, Once: true, Sink: sink}))
	vals, _ := sink.got()
	require.Len(t, vals, 2)
	assert.Equal(t, "host function failed", vals[0])
	assert.IsType(t, &hostfn.Goexited{}, vals[1])
	assert.Equal(t, before.Callbacks, lifetime.ReadStats().Callbacks)
}
