//go:build linux

package fakedriver_test

import (
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// Stream.Launch marshals ordinary arguments into a block on the launching
// goroutine's stack and hands cuLaunchKernel pointers into it through a
// frame on the same stack. Launched from many goroutines whose stacks grow
// (and move) at different depths just before and after, every kernel still
// reads its own arguments: the stack never moves under a call.
func TestLaunchSmallBlockOnMovingStacks(t *testing.T) {
	f := ltSetup(t)
	const n = 64
	bufs := make([]*driver.Buffer[uint32], n)
	for i := range bufs {
		var err error
		bufs[i], err = driver.Alloc[uint32](f.ctx, 1)
		require.NoError(t, err)
	}
	g := driver.Grid(1)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deep(i*3, func() {
				errs[i] = f.s.Launch(f.add4, g, driver.Block(1), bufs[i], uint32(i), uint32(1000*i), uint32(7))
				deep(i%7, func() {}) // grow again after the call
			})
		}()
	}
	wg.Wait()
	require.NoError(t, f.s.Synchronize())
	out := make([]uint32, 1)
	for i, b := range bufs {
		require.NoError(t, errs[i], "launch %d", i)
		require.NoError(t, b.CopyToHost(f.ctx.LegacyStream(), out))
		assert.Equal(t, uint32(i+1000*i+7), out[0], "kernel %d read its own arguments", i)
		require.NoError(t, b.Close())
	}
}

// Arguments the small block cannot take (too many buffers, a struct, the
// wrong count or sizes, a closed buffer) fall back to the general path,
// which reports the same errors as before; what the small block held is
// released, so every buffer is freed by its Close.
func TestLaunchSmallBlockFallsBack(t *testing.T) {
	f := ltSetup(t)
	before := lifetime.ReadStats()
	g := driver.Grid(1)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	closed, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	require.NoError(t, closed.Close())

	err = f.s.Launch(f.add4, g, driver.Block(1), out, out, out, out, out) // 5 buffers, 5 arguments
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorContains(t, err, "takes 4 arguments, got 5")
	err = f.s.Launch(f.add4, g, driver.Block(1), out, uint32(1), uint32(2))
	assert.ErrorContains(t, err, "takes 4 arguments, got 3")
	err = f.s.Launch(f.add4, g, driver.Block(1), out, uint32(1), int64(2), uint32(3))
	assert.ErrorContains(t, err, "argument 2: the kernel expects 4 bytes, got 8")
	err = f.s.Launch(f.add4, g, driver.Block(1), out, uint32(1), struct{ A, B uint32 }{}, uint32(3))
	assert.ErrorContains(t, err, "argument 2: the kernel expects 4 bytes, got 8")
	err = f.s.Launch(f.add4, g, driver.Block(1), closed, uint32(1), uint32(2), uint32(3))
	assert.ErrorIs(t, err, driver.ErrClosed)
	err = f.s.Launch(f.add4, g, driver.Block(1), out, 1, uint32(2), uint32(3))
	assert.ErrorContains(t, err, "has no fixed C size")
	err = f.s.Launch(f.add4, g, driver.Block(1), out, nil, uint32(2), uint32(3))
	assert.ErrorContains(t, err, "argument 1: nil")

	// The same kernel still launches after the failures, through the block.
	require.NoError(t, f.s.Launch(f.add4, g, driver.Block(1), out, uint32(1), uint32(2), uint32(3)))
	require.NoError(t, f.s.Synchronize())
	v := make([]uint32, 1)
	require.NoError(t, out.CopyToHost(f.ctx.LegacyStream(), v))
	assert.Equal(t, uint32(6), v[0])
	require.NoError(t, out.Close())
	lifetime.Flush()
	assert.Equal(t, before.Objects, lifetime.ReadStats().Objects, "every buffer was freed: nothing kept a reference")
}

// Every scalar kind goes into the small block with its own size and bytes:
// fill(int* out, int v, int n) reads v and n as 4-byte ints whichever Go
// type of that size carried them.
func TestLaunchSmallBlockScalarKinds(t *testing.T) {
	f := ltSetup(t)
	out, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	defer out.Close()
	g := driver.Grid(1)
	got := make([]int32, 4)
	for _, c := range []struct {
		v, n any
		want []int32
	}{
		{int32(-5), int32(4), []int32{-5, -4, -3, -2}},
		{uint32(10), uint32(2), []int32{10, 11, 0, 0}},
		{float32(1.5), int32(1), []int32{0x3fc00000, 0, 0, 0}}, // its bits, read as an int
	} {
		require.NoError(t, out.Memset32(f.s, 0))
		require.NoError(t, f.s.Launch(f.fill, g, driver.Block(1), out, c.v, c.n))
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, out.CopyToHost(f.s, got))
		assert.Equal(t, c.want, got, "%T %T", c.v, c.n)
	}
}

// Launch remembers the buffer type it last saw per kernel, to skip a type
// assertion; buffers of other element types, typed nil buffers and
// closed buffers of the remembered type still get the right treatment.
func TestLaunchSmallBlockBufferTypes(t *testing.T) {
	f := ltSetup(t)
	g := driver.Grid(1)
	ints, err := driver.Alloc[int32](f.ctx, 2)
	require.NoError(t, err)
	defer ints.Close()
	floats, err := driver.Alloc[float32](f.ctx, 2)
	require.NoError(t, err)
	defer floats.Close()
	for i := range 6 {
		if i%2 == 0 {
			require.NoError(t, f.s.Launch(f.fill, g, driver.Block(1), ints, int32(i), int32(2)))
		} else {
			require.NoError(t, f.s.Launch(f.fill, g, driver.Block(1), floats, int32(i), int32(2)))
		}
	}
	require.NoError(t, f.s.Synchronize())
	gotI := make([]int32, 2)
	require.NoError(t, ints.CopyToHost(f.ctx.LegacyStream(), gotI))
	assert.Equal(t, []int32{4, 5}, gotI)
	gotF := make([]float32, 2)
	require.NoError(t, floats.CopyToHost(f.ctx.LegacyStream(), gotF))
	assert.Equal(t, []float32{math.Float32frombits(5), math.Float32frombits(6)}, gotF)

	var nilBuf *driver.Buffer[int32]
	err = f.s.Launch(f.fill, g, driver.Block(1), nilBuf, int32(0), int32(2))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorContains(t, err, "nil buffer")
	gone, err := driver.Alloc[int32](f.ctx, 2)
	require.NoError(t, err)
	require.NoError(t, gone.Close())
	assert.ErrorIs(t, f.s.Launch(f.fill, g, driver.Block(1), gone, int32(0), int32(2)), driver.ErrClosed)
}
