//go:build linux

package fakedriver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
)

// TestSyncCopiesRunOnTheirStream: a synchronous copy or memset names its
// stream and is ordered after the work queued there: with the fake's
// kernels slowed down, a read right after a launch sees what the kernel
// wrote, and a write right after it is what stays.
func TestSyncCopiesRunOnTheirStream(t *testing.T) {
	f := ltSetup(t)
	const n = 64
	b, err := driver.AllocZeroed[int32](f.s, n)
	require.NoError(t, err)
	defer b.Close()
	fcall(t, "fake_set_kernel_delay_us", 20000)

	require.NoError(t, f.s.Launch(f.fill, g1, b1, b, int32(5), int32(n)))
	got, err := b.ToHost(f.s)
	require.NoError(t, err)
	for i, v := range got {
		require.Equal(t, int32(5+i), v, "element %d after ToHost", i)
	}

	require.NoError(t, f.s.Launch(f.fill, g1, b1, b, int32(7), int32(n)))
	require.NoError(t, b.Memset32(f.s, 3))
	require.NoError(t, b.CopyToHost(f.ctx.LegacyStream(), got))
	assert.Equal(t, int32(3), got[0], "the memset ran after the kernel")
	assert.Equal(t, int32(3), got[n-1])

	src := make([]int32, n)
	for i := range src {
		src[i] = -int32(i)
	}
	require.NoError(t, f.s.Launch(f.fill, g1, b1, b, int32(7), int32(n)))
	require.NoError(t, b.CopyFromHost(f.s, src))
	require.NoError(t, b.CopyToHost(f.ctx.LegacyStream(), got))
	assert.Equal(t, src, got, "the copy ran after the kernel")
}

// TestSyncCopiesRefuseACapturedStream: a synchronous copy cannot be part of
// a graph, so on a stream being captured it is refused before CUDA sees it
// (CUDA would invalidate the capture), and the capture goes on.
func TestSyncCopiesRefuseACapturedStream(t *testing.T) {
	f := ltSetup(t)
	b, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer b.Close()
	other, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer other.Close()
	sc, err := graph.BeginCapture(f.s, graph.CaptureRelaxed)
	require.NoError(t, err)
	host := make([]int32, 8)
	for name, call := range map[string]func() error{
		"CopyToHost":    func() error { return b.CopyToHost(f.s, host) },
		"CopyFromHost":  func() error { return b.CopyFromHost(f.s, host) },
		"CopyFrom":      func() error { return b.CopyFrom(f.s, other) },
		"ToHost":        func() error { _, err := b.ToHost(f.s); return err },
		"Memset8":       func() error { return b.Memset8(f.s, 1) },
		"Memset16":      func() error { return b.Memset16(f.s, 1) },
		"Memset32":      func() error { return b.Memset32(f.s, 1) },
		"MemsetFloat32": func() error { return b.MemsetFloat32(f.s, 1) },
		"AllocCopy":     func() error { _, err := driver.AllocCopy(f.s, host); return err },
		"AllocZeroed":   func() error { _, err := driver.AllocZeroed[int32](f.s, 8); return err },
	} {
		assert.ErrorIs(t, call(), driver.ErrStreamCaptureUnsupported, name)
	}
	require.NoError(t, b.Memset32Async(f.s, 4), "the capture is still valid")
	g, err := sc.End()
	require.NoError(t, err)
	defer g.Close()
	nodes, err := g.Nodes()
	require.NoError(t, err)
	assert.Len(t, nodes, 1, "only the async memset was captured")
}

// TestSyncCopiesNeedAStream: nil is no stream; the buffer's own checks
// come first.
func TestSyncCopiesNeedAStream(t *testing.T) {
	f := ltSetup(t)
	b, err := driver.Alloc[int32](f.ctx, 8)
	require.NoError(t, err)
	defer b.Close()
	host := make([]int32, 8)
	assert.ErrorIs(t, b.CopyToHost(nil, host), driver.ErrNilStream)
	assert.ErrorIs(t, b.CopyFromHost(nil, host), driver.ErrNilStream)
	assert.ErrorIs(t, b.CopyFrom(nil, b), driver.ErrNilStream)
	_, err = b.ToHost(nil)
	assert.ErrorIs(t, err, driver.ErrNilStream)
	assert.ErrorIs(t, b.Memset32(nil, 1), driver.ErrNilStream)
	assert.ErrorIs(t, b.CopyToHost(nil, nil), driver.ErrNilStream, "an empty copy checks its stream too")
	require.NoError(t, b.Close())
	assert.ErrorIs(t, b.CopyToHost(nil, host), driver.ErrClosed, "a closed buffer is reported first")
}
