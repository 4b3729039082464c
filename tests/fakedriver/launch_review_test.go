//go:build linux

package fakedriver_test

// Review tests for 6b661f7 (Launch through a small block on the stack) and
// 0b87b8a (prewarm). smallBlock.fill and prewarm read an argument whose
// type word equals f.bufType as a *Buffer[byte], assuming that "only
// *Buffer[T] implements devicePointer". That is false: a type of another
// package that embeds *driver.Buffer[T] gets the unexported method arg by
// promotion, so it is a devicePointer too, and the general path (marshal's
// `case devicePointer`) has always launched such values correctly. Once a
// launch has stored such a wrapper's type in f.bufType, the next launch
// reinterprets the wrapper's own fields as a Buffer.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

// matrix is a user type carrying a buffer with its shape, as tensor
// libraries write them. The padding keeps the boxed value at least as large
// as a Buffer, so that checkptr (-race) does not itself abort the process on
// the misread: the test then sees what a normal build does.
type matrix struct {
	rows, cols int
	*driver.Buffer[uint32]
	_ [12]uint64
}

// tagged embeds the buffer first: the misread takes the *Buffer for an
// *allocation.
type tagged struct {
	*driver.Buffer[uint32]
	_ [12]uint64
}

// launchAdd4 launches add4(out, v, 0, 0) with out passed as arg, turning a
// panic into a test failure so that the cleanup still runs.
func launchAdd4(t *testing.T, f *fixture, arg any, v uint32) (err error) {
	t.Helper()
	g := driver.Grid(1)
	assert.NotPanics(t, func() { err = f.s.Launch(f.add4, g, g, arg, v, uint32(0), uint32(0)) }, "launch %d of %T", v, arg)
	return err
}

// A struct embedding *Buffer[T], passed by value, launches like the buffer
// it carries, every time. The first launch (parameters unread) takes the
// general path; the second takes the small block, whose type assertion
// stores matrix's type in f.bufType; from the third on, prewarm and fill
// read matrix{rows: 2, ...} as a Buffer whose allocation is at address 2:
// a nil-dereference panic inside Stream.Launch (with rows ≥ 4096 it is an
// unrecoverable fault that kills the process).
func TestLaunchReviewEmbeddedBufferWrapper(t *testing.T) {
	f := ltSetup(t)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	m := matrix{rows: 2, cols: 1, Buffer: out}
	got := make([]uint32, 1)
	for v := uint32(1); v <= 4; v++ {
		require.NoError(t, launchAdd4(t, f, m, v), "launch %d", v)
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, out.CopyToHost(got))
		require.Equal(t, v, got[0], "launch %d wrote the wrapped buffer", v)
	}
}

// The same with the buffer as the wrapper's first field: no panic, but from
// the third launch fill takes the *Buffer for an *allocation, increments
// the Buffer's own pointer field as a reference count (undone by the
// release), and launches with a device address read from inside the
// Buffer, not the buffer's: the kernel never writes the buffer, and
// fakecuda sees an unknown address (ltSetup's cleanup reports it).
func TestLaunchReviewEmbeddedBufferFirstField(t *testing.T) {
	f := ltSetup(t)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	w := tagged{Buffer: out}
	got := make([]uint32, 1)
	for v := uint32(1); v <= 4; v++ {
		require.NoError(t, launchAdd4(t, f, w, v), "launch %d", v)
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, out.CopyToHost(got))
		require.Equal(t, v, got[0], "launch %d wrote the wrapped buffer", v)
	}
}

// A pointer to a wrapper is a devicePointer too (the method set of *W
// includes the promoted arg), and its data word points at the wrapper, not
// at a Buffer. Mixing it with plain buffers on one kernel must keep working.
func TestLaunchReviewEmbeddedBufferPointerWrapper(t *testing.T) {
	f := ltSetup(t)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	m := &matrix{rows: 3, cols: 1, Buffer: out}
	got := make([]uint32, 1)
	for v := uint32(1); v <= 6; v++ {
		var arg any = m
		if v%3 == 0 {
			arg = out // a plain buffer in between changes bufType back and forth
		}
		require.NoError(t, launchAdd4(t, f, arg, v), "launch %d", v)
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, out.CopyToHost(got))
		require.Equal(t, v, got[0], "launch %d wrote the buffer", v)
	}
}

// Not a bug (question 6): prewarm and the small block on zero values and
// odd arguments fail cleanly, without a panic and without holding anything.
func TestLaunchReviewZeroValuesDoNotPanic(t *testing.T) {
	f := ltSetup(t)
	g := driver.Grid(1)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	// Teach add4 the buffer type first, so prewarm reads buffers of it.
	require.NoError(t, f.s.Launch(f.add4, g, g, out, uint32(1), uint32(0), uint32(0)))
	require.NoError(t, f.s.Launch(f.add4, g, g, out, uint32(1), uint32(0), uint32(0)))
	var nilBuf *driver.Buffer[uint32]
	zeroBuf := new(driver.Buffer[uint32])
	assert.NotPanics(t, func() {
		assert.Error(t, new(driver.Stream).Launch(f.add4, g, g, out, uint32(1), uint32(0), uint32(0)))
		assert.Error(t, f.s.Launch(new(driver.Function), g, g, out, uint32(1), uint32(0), uint32(0)))
		assert.Error(t, new(driver.Stream).Launch(new(driver.Function), g, g))
		assert.Error(t, f.s.Launch(f.add4, g, g, nilBuf, uint32(1), uint32(0), uint32(0)))
		assert.Error(t, f.s.Launch(f.add4, g, g, zeroBuf, uint32(1), uint32(0), uint32(0)))
		assert.Error(t, f.s.Launch(f.add4, g, g, nil, "x", []int{1}, struct{}{}))
	})
	require.NoError(t, f.s.Synchronize())
}

// Not a bug (question 2): a view made by Buffer.Slice has the type its
// kernel last saw and is read as a Buffer[byte]; its offset is kept in
// bytes, so the kernel writes the viewed element, not one scaled by the
// element size again.
func TestLaunchReviewSliceViewThroughRememberedType(t *testing.T) {
	f := ltSetup(t)
	g := driver.Grid(1)
	base, err := driver.Alloc[uint32](f.ctx, 4)
	require.NoError(t, err)
	defer base.Close()
	require.NoError(t, base.Memset32(0))
	for range 2 { // the general path, then the block's assertion stores the type
		require.NoError(t, f.s.Launch(f.add4, g, g, base, uint32(9), uint32(0), uint32(0)))
	}
	view, err := base.Slice(2, 3)
	require.NoError(t, err)
	defer view.Close()
	require.NoError(t, f.s.Launch(f.add4, g, g, view, uint32(5), uint32(0), uint32(0)))
	require.NoError(t, f.s.Synchronize())
	got := make([]uint32, 4)
	require.NoError(t, base.CopyToHost(got))
	assert.Equal(t, []uint32{9, 0, 5, 0}, got)
}
