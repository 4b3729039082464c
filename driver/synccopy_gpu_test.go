package driver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
)

// The synchronous copies and memsets run on the stream they name, after
// everything queued there before them, and return once done. Each case
// below queues a slow kernel (about 50 ms) on a non-blocking stream that
// writes 9 to every element, and calls the synchronous operation right
// after it, with no Synchronize in between: on the legacy default stream
// (which does not wait for non-blocking streams) the operation would run
// before the kernel and lose or miss its writes.

const raceN = 1024

// slowNine queues, on s, a kernel that spins for about 50 ms and then sets
// every element of b to 9.
func slowNine(t *testing.T, e *testEnv, s *driver.Stream, b *driver.Buffer[int32]) {
	t.Helper()
	mod, f := loadSpin(t, e)
	t.Cleanup(func() { _ = mod.Close() })
	require.NoError(t, s.Launch(f, driver.Grid(raceN/256), driver.Block(256), b, int32(9), int32(raceN), spinCycles))
}

func raceSetup(t *testing.T) (*testEnv, *driver.Stream, *driver.Buffer[int32]) {
	gputest.Require(t)
	e, _ := setup(t)
	s, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	b, err := driver.AllocZeroed[int32](s, raceN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return e, s, b
}

// TestSyncReadsWaitForTheStream: ToHost and CopyToHost see every element
// the slow kernel wrote.
func TestSyncReadsWaitForTheStream(t *testing.T) {
	t.Run("ToHost", func(t *testing.T) {
		e, s, b := raceSetup(t)
		slowNine(t, e, s, b)
		got, err := b.ToHost(s)
		require.NoError(t, err)
		n, first := wrong(got, 9)
		assert.Zero(t, n, "elements not written when ToHost returned (first at %d)", first)
	})
	t.Run("CopyToHost", func(t *testing.T) {
		e, s, b := raceSetup(t)
		slowNine(t, e, s, b)
		got := make([]int32, raceN)
		require.NoError(t, b.CopyToHost(s, got))
		n, first := wrong(got, 9)
		assert.Zero(t, n, "elements not written when CopyToHost returned (first at %d)", first)
	})
}

// TestSyncWritesWaitForTheStream: a synchronous write queued after the slow
// kernel lands after it, so it is what the buffer holds at the end.
func TestSyncWritesWaitForTheStream(t *testing.T) {
	ones := make([]int32, raceN)
	for i := range ones {
		ones[i] = 1
	}
	for _, c := range []struct {
		name  string
		write func(e *testEnv, s *driver.Stream, b *driver.Buffer[int32]) error
	}{
		{"CopyFromHost", func(_ *testEnv, s *driver.Stream, b *driver.Buffer[int32]) error { return b.CopyFromHost(s, ones) }},
		{"CopyFrom", func(e *testEnv, s *driver.Stream, b *driver.Buffer[int32]) error {
			src, err := driver.AllocCopy(e.ctx.LegacyStream(), ones)
			if err != nil {
				return err
			}
			defer src.Close()
			return b.CopyFrom(s, src)
		}},
		{"Memset8", func(_ *testEnv, s *driver.Stream, b *driver.Buffer[int32]) error { return b.Memset8(s, 0) }},
		{"Memset16", func(_ *testEnv, s *driver.Stream, b *driver.Buffer[int32]) error { return b.Memset16(s, 0) }},
		{"Memset32", func(_ *testEnv, s *driver.Stream, b *driver.Buffer[int32]) error { return b.Memset32(s, 1) }},
		{"MemsetFloat32", func(_ *testEnv, s *driver.Stream, b *driver.Buffer[int32]) error { return b.MemsetFloat32(s, 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, s, b := raceSetup(t)
			slowNine(t, e, s, b)
			require.NoError(t, c.write(e, s, b))
			// Read back on the legacy stream, which waits for nothing of s:
			// the write must be done already when it returned.
			got, err := b.ToHost(e.ctx.LegacyStream())
			require.NoError(t, err)
			want := int32(1)
			if c.name != "CopyFromHost" && c.name != "CopyFrom" && c.name != "Memset32" {
				want = 0
			}
			n, first := wrong(got, want)
			assert.Zero(t, n, "elements not %d after %s returned (first at %d: %d)", want, c.name, first, got[max(first, 0)])
		})
	}
}

// TestSyncOnLegacyStream: naming ctx.LegacyStream() keeps the legacy
// stream's behaviour, ordered after blocking streams' work.
func TestSyncOnLegacyStream(t *testing.T) {
	gputest.Require(t)
	e, _ := setup(t)
	s, err := e.ctx.NewStream(driver.StreamDefault) // blocking: the legacy stream waits for it
	require.NoError(t, err)
	defer s.Close()
	b, err := driver.Alloc[int32](e.ctx, raceN)
	require.NoError(t, err)
	defer b.Close()
	slowNine(t, e, s, b)
	got, err := b.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	n, _ := wrong(got, 9)
	assert.Zero(t, n)
}
