//go:build linux

package fakedriver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

// What a host function or a graph's host node writes happens before the
// return of a wait that waited for it: Stream.Synchronize, Event.Synchronize
// of an event recorded after it, Context.Synchronize, and the synchronous
// copies on its stream. Each case writes plain Go memory (no atomics) in
// the callback and reads it after the wait; under -race (CI runs this
// package so) a missing happens-before edge is reported as a race.
func TestHostWritesVisibleAfterWaits(t *testing.T) {
	f := ltSetup(t)
	buf, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	defer buf.Close()
	ev, err := f.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer ev.Close()
	waits := map[string]func() error{
		"Stream.Synchronize":  f.s.Synchronize,
		"Context.Synchronize": f.ctx.Synchronize,
		"Event.Synchronize": func() error {
			if err := ev.Record(f.s); err != nil {
				return err
			}
			return ev.Synchronize()
		},
		"Buffer.ToHost": func() error { _, err := buf.ToHost(f.s); return err },
	}
	for name, wait := range waits {
		t.Run(name, func(t *testing.T) {
			for round := range 20 {
				var n int
				s := make([]int, 64)
				require.NoError(t, f.s.LaunchHostFunc(func() {
					n = round + 1
					for i := range s {
						s[i] = round
					}
				}))
				require.NoError(t, wait())
				assert.Equal(t, round+1, n)
				assert.Equal(t, round, s[63])
			}
		})
	}
}

// TestHostNodeWritesVisibleAfterSynchronize: the same for a graph's host
// node, replayed, and for a staged copy to a Go slice, which a host
// function writes.
func TestHostNodeWritesVisibleAfterSynchronize(t *testing.T) {
	f := ltSetup(t)
	g, err := graph.New(f.ctx)
	require.NoError(t, err)
	defer g.Close()
	var count int
	seen := make([]int, 16)
	_, err = g.HostFunc(func() {
		count++
		seen[count%16] = count
	})
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	buf, err := driver.AllocCopy(f.s, []int32{1, 2, 3, 4})
	require.NoError(t, err)
	defer buf.Close()
	for round := 1; round <= 20; round++ {
		require.NoError(t, exe.Launch(f.s))
		dst := make([]int32, 4)
		require.NoError(t, buf.CopyToHostAsync(f.s, dst))
		require.NoError(t, f.s.Synchronize())
		assert.Equal(t, round, count)
		assert.Equal(t, round, seen[round%16])
		assert.Equal(t, []int32{1, 2, 3, 4}, dst)
	}
}
