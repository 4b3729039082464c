//go:build linux

package fakedriver_test

// Launch arguments of user types that embed a *driver.Buffer[T] (or a
// Buffer). Such a type of another package gets Buffer's unexported method
// arg by promotion, so it is a buffer argument too, and the general path
// (marshal's devicePointer case) launches it as the buffer it carries. The
// small block and prewarm read an argument whose type word equals the
// kernel's remembered buffer type (f.bufType) as a *Buffer[byte]: a
// wrapper's type must never be remembered there, or the next launch would
// reinterpret the wrapper's own fields as a Buffer.

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

// viewAt embeds a Buffer by value after another field: *viewAt gets the
// Buffer's methods by promotion, so it is a buffer argument.
type viewAt struct {
	_ int
	driver.Buffer[uint32]
}

// launchAdd4 launches add4(out, v, 0, 0) with out passed as arg, turning a
// panic into a test failure so that the cleanup still runs.
func launchAdd4(t *testing.T, f *fixture, arg any, v uint32) (err error) {
	t.Helper()
	g := driver.Grid(1)
	assert.NotPanics(t, func() { err = f.s.Launch(f.add4, g, driver.Block(1), arg, v, uint32(0), uint32(0)) }, "launch %d of %T", v, arg)
	return err
}

// A struct embedding *Buffer[T], passed by value, launches like the buffer
// it carries, every time. The first launch (parameters unread) takes the
// general path; the second the small block, whose type assertion must not
// store matrix's type in f.bufType: if it did, from the third on prewarm
// and fill would read matrix{rows: 2, ...} as a Buffer whose allocation is
// at address 2, a nil-dereference panic inside Stream.Launch (with rows ≥
// 4096 an unrecoverable fault that kills the process).
func TestLaunchEmbeddedBufferWrapper(t *testing.T) {
	f := ltSetup(t)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	m := matrix{rows: 2, cols: 1, Buffer: out}
	got := make([]uint32, 1)
	for v := uint32(1); v <= 4; v++ {
		require.NoError(t, launchAdd4(t, f, m, v), "launch %d", v)
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, out.CopyToHost(f.ctx.LegacyStream(), got))
		require.Equal(t, v, got[0], "launch %d wrote the wrapped buffer", v)
	}
}

// The same with the buffer as the wrapper's first field, where the misread
// would not panic: from the third launch fill would take the *Buffer for
// an *allocation, increment the Buffer's own pointer field as a reference
// count (undone by the release), and launch with a device address read
// from inside the Buffer, not the buffer's: the kernel would never write
// the buffer, and fakecuda would see an unknown address (ltSetup's cleanup
// reports it).
func TestLaunchEmbeddedBufferFirstField(t *testing.T) {
	f := ltSetup(t)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	w := tagged{Buffer: out}
	got := make([]uint32, 1)
	for v := uint32(1); v <= 4; v++ {
		require.NoError(t, launchAdd4(t, f, w, v), "launch %d", v)
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, out.CopyToHost(f.ctx.LegacyStream(), got))
		require.Equal(t, v, got[0], "launch %d wrote the wrapped buffer", v)
	}
}

// A pointer to a wrapper is a devicePointer too (the method set of *W
// includes the promoted arg), and its data word points at the wrapper, not
// at a Buffer. Mixing it with plain buffers on one kernel must keep working.
func TestLaunchEmbeddedBufferPointerWrapper(t *testing.T) {
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
		require.NoError(t, out.CopyToHost(f.ctx.LegacyStream(), got))
		require.Equal(t, v, got[0], "launch %d wrote the buffer", v)
	}
}

// A nil pointer to a user type that embeds a Buffer anywhere but first (or
// embeds a *Buffer, like matrix) is an error, like a typed nil *Buffer
// ("nil buffer"), in Launch and NewArgs alike, not a panic inside the
// driver: smallBlock.fill's dp.self() and marshal's x.arg() are promoted
// methods that dereference the nil pointer to reach the embedded field, so
// the general path refuses a nil pointer before calling them. Launch's
// quick path is not involved (the type is never remembered): it bails to
// the general path.
func TestLaunchNilEmbeddingPointerIsAnError(t *testing.T) {
	f := ltSetup(t)
	g := driver.Grid(1)
	var v *viewAt
	var m *matrix
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Launch *viewAt", func() error { return f.s.Launch(f.add4, g, driver.Block(1), v, uint32(1), uint32(0), uint32(0)) }},
		{"Launch *matrix", func() error { return f.s.Launch(f.add4, g, driver.Block(1), m, uint32(1), uint32(0), uint32(0)) }},
		{"NewArgs *matrix", func() error {
			a, err := f.add4.NewArgs(m, uint32(1), uint32(0), uint32(0))
			if err == nil {
				_ = a.Close()
			}
			return err
		}},
	} {
		var err error
		if assert.NotPanics(t, func() { err = c.call() }, c.name) {
			assert.ErrorIs(t, err, driver.ErrInvalidArgument, c.name)
		}
	}
}
