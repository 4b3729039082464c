//go:build linux

package fakedriver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

// TestStreamCloseRacesCalls: Stream.Close racing every call on the stream
// destroys it only after the last call returns (I3): no call reaches
// fakecuda with the destroyed handle. Were Close to destroy the stream at
// once, calls that had passed the open check would name a dead handle (on
// the H200, SIGSEGV).
func TestStreamCloseRacesCalls(t *testing.T) {
	f := ltSetup(t)
	streams := fcall(t, "fake_live_streams")
	buf, err := driver.Alloc[int32](f.ctx, 64)
	require.NoError(t, err)
	defer buf.Close()
	ev, err := f.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer ev.Close()
	args, err := f.fill.NewArgs(buf, int32(1), int32(64))
	require.NoError(t, err)
	defer args.Close()
	for round := 0; round < 40; round++ {
		// A slice of its own each round: a copy into it is written when its
		// stream gets there, and the streams of two rounds are not ordered.
		host := make([]int32, 8)
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		ltRace(8, func(g int) {
			var err error
			switch g {
			case 0:
				err = s.Launch(f.fill, g1, b1, buf, int32(2), int32(64))
			case 1:
				err = s.LaunchArgs(args, g1, b1)
			case 2:
				err = ev.Record(s)
			case 3:
				err = s.WaitEvent(ev)
			case 4:
				err = s.LaunchHostFunc(func() {})
			case 5:
				err = buf.CopyToHostAsync(s, host)
			case 6:
				err = buf.Memset32Async(s, 3)
			case 7:
				if _, err = s.Query(); err == nil {
					if _, err = s.Priority(); err == nil {
						err = s.Synchronize()
					}
				}
			}
			ltClosedOr(t, "stream call", err)
		}, func() { assert.NoError(t, s.Close()) })
	}
	require.NoError(t, f.ctx.Synchronize())
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_streams") == streams }), "every stream destroyed")
	ltNoBadUses(t)
}

// TestEventCloseRacesCalls: the same for Event.Close.
func TestEventCloseRacesCalls(t *testing.T) {
	f := ltSetup(t)
	events := fcall(t, "fake_live_events")
	for round := 0; round < 200; round++ {
		e, err := f.ctx.NewEvent(driver.EventDefault)
		require.NoError(t, err)
		require.NoError(t, e.Record(f.s))
		ltRace(8, func(g int) {
			var err error
			switch g % 5 {
			case 0:
				err = e.Record(f.s)
			case 1:
				_, err = e.Query()
			case 2:
				err = e.Synchronize()
			case 3:
				err = f.s.WaitEvent(e)
			case 4:
				_, err = driver.Elapsed(e, e)
			}
			ltClosedOr(t, "event call", err)
		}, func() { assert.NoError(t, e.Close()) })
	}
	require.NoError(t, f.s.Synchronize())
	assert.Equal(t, events, fcall(t, "fake_live_events"))
	ltNoBadUses(t)
}

// TestMemPoolCloseRacesCalls: the same for MemPool.Close, with
// buffers allocated from the pool holding it until they are freed.
func TestMemPoolCloseRacesCalls(t *testing.T) {
	f := ltSetup(t)
	pools, allocs := fcall(t, "fake_live_pools"), fcall(t, "fake_live_allocations")
	for round := 0; round < 40; round++ {
		p, err := f.ctx.NewMemPool()
		require.NoError(t, err)
		ltRace(8, func(g int) {
			var err error
			switch g % 4 {
			case 0:
				_, err = p.Attribute(driver.PoolAttrReleaseThreshold)
			case 1:
				err = p.SetAttribute(driver.PoolAttrReleaseThreshold, 1<<20)
			case 2:
				err = p.Trim(0)
			case 3:
				var b *driver.Buffer[int32]
				if b, err = driver.AllocFromPool[int32](f.s, p, 16); err == nil {
					err = b.Memset32Async(f.s, 1)
					assert.NoError(t, b.Close())
				}
			}
			ltClosedOr(t, "pool call", err)
		}, func() { assert.NoError(t, p.Close()) })
	}
	require.NoError(t, f.s.Synchronize())
	assert.Equal(t, pools, fcall(t, "fake_live_pools"))
	assert.Equal(t, allocs, fcall(t, "fake_live_allocations"))
	ltNoBadUses(t)
}
