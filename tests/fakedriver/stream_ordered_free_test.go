//go:build linux

package fakedriver_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// TestStreamOrderedFreeAfterStreamClose: memory allocated in stream order
// is freed in order on its stream, which the buffer holds, even when the
// stream was closed first. A plain cuMemFree for a closed stream would not
// wait for queued work on stream-ordered memory: the slowed kernel still
// queued would then write freed memory.
func TestStreamOrderedFreeAfterStreamClose(t *testing.T) {
	f := ltSetup(t)
	allocs, streams := fcall(t, "fake_live_allocations"), fcall(t, "fake_live_streams")
	s, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	b, err := driver.AllocAsync[int32](s, 256)
	require.NoError(t, err)
	fcall(t, "fake_set_kernel_delay_us", 20000)
	require.NoError(t, s.Launch(f.fill, g1, b1, b, int32(5), int32(256)))
	require.NoError(t, s.Close())
	require.NoError(t, b.Close())
	require.NoError(t, f.ctx.Synchronize())
	fcall(t, "fake_set_kernel_delay_us", 0)
	assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000))
	assert.Equal(t, allocs, fcall(t, "fake_live_allocations"), "the buffer was freed")
	assert.Equal(t, streams, fcall(t, "fake_live_streams"), "and then its stream destroyed")
	ltNoBadUses(t)
}

// TestStreamOrderedFreeWaitsForOtherStreams: a stream-ordered buffer used
// on another stream is freed only after that stream's work: the free on the
// allocating stream waits for it, rather than running at once while a
// slowed kernel, copy or memset on the other stream still uses the memory.
func TestStreamOrderedFreeWaitsForOtherStreams(t *testing.T) {
	f := ltSetup(t)
	allocs := fcall(t, "fake_live_allocations")
	other, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer other.Close()
	pool, err := f.ctx.NewMemPool()
	require.NoError(t, err)
	defer pool.Close()
	plain, err := driver.Alloc[int32](f.ctx, 256)
	require.NoError(t, err)
	defer plain.Close()
	uses := map[string]func(b *driver.Buffer[int32]) error{
		"Launch": func(b *driver.Buffer[int32]) error {
			return other.Launch(f.fill, g1, b1, b, int32(1), int32(256))
		},
		"LaunchArgs": func(b *driver.Buffer[int32]) error {
			a, err := f.fill.NewArgs(b, int32(1), int32(256))
			if err != nil {
				return err
			}
			defer a.Close()
			return other.LaunchArgs(a, g1, b1)
		},
		"CopyToHostAsync": func(b *driver.Buffer[int32]) error { return b.CopyToHostAsync(other, make([]int32, 256)) },
		"CopyFromAsync":   func(b *driver.Buffer[int32]) error { return b.CopyFromAsync(other, plain) },
		"CopyFromAsync (as src)": func(b *driver.Buffer[int32]) error {
			return plain.CopyFromAsync(other, b)
		},
		"Memset32Async": func(b *driver.Buffer[int32]) error { return b.Memset32Async(other, 4) },
	}
	for name, use := range uses {
		for _, fromPool := range []bool{false, true} {
			var b *driver.Buffer[int32]
			if fromPool {
				b, err = driver.AllocFromPool[int32](f.s, pool, 256)
			} else {
				b, err = driver.AllocAsync[int32](f.s, 256)
			}
			require.NoError(t, err)
			require.NoError(t, f.s.Synchronize()) // the allocation has happened
			fcall(t, "fake_set_kernel_delay_us", 10000)
			fcall(t, "fake_set_copy_delay_us", 10000)
			// Something slow first, so that the use is still queued on
			// other when the buffer is closed.
			require.NoError(t, other.Launch(f.empty, g1, b1))
			require.NoError(t, use(b), name)
			require.NoError(t, b.Close())
			require.NoError(t, other.Synchronize())
			require.NoError(t, f.s.Synchronize())
			fcall(t, "fake_set_kernel_delay_us", 0)
			fcall(t, "fake_set_copy_delay_us", 0)
			if fcall(t, "fake_bad_ptr_uses") != 0 {
				t.Errorf("%s (pool %v): the memory was freed while the other stream used it: %s", name, fromPool, faketest.LastBadUse(t))
				fcall(t, "fake_reset_counters")
			}
		}
	}
	assert.Equal(t, allocs+1, fcall(t, "fake_live_allocations"), "only plain is left")
	ltNoBadUses(t)
}

// TestStreamOrderedFreeRacingStreamClose: Buffer.Close racing Stream.Close
// never loses the free. A release that checked that the stream was open and
// then freed on it would, with a Stream.Close in between, have
// cuMemFreeAsync fail on a dead handle, and the memory leak.
func TestStreamOrderedFreeRacingStreamClose(t *testing.T) {
	f := ltSetup(t)
	allocs, streams := fcall(t, "fake_live_allocations"), fcall(t, "fake_live_streams")
	lifetime.Errors()
	relErrs := lifetime.ReadStats().ReleaseErrors
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16)) // preemption anywhere (see TestContextCloseNeverRevives)
	for i := 0; i < 10000; i++ {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		b, err := driver.AllocAsync[int32](s, 64)
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); assert.NoError(t, s.Close()) }()
		go func() { defer wg.Done(); assert.NoError(t, b.Close()) }()
		wg.Wait()
	}
	require.NoError(t, f.ctx.Synchronize())
	assert.True(t, ltSettle(func() bool {
		return fcall(t, "fake_live_allocations") == allocs && fcall(t, "fake_live_streams") == streams
	}), "every buffer freed and every stream destroyed")
	assert.Equal(t, relErrs, lifetime.ReadStats().ReleaseErrors, "no release failed: %v", lifetime.Errors())
	ltNoBadUses(t)
}
