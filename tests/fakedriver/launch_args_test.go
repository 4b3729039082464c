//go:build linux

package fakedriver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

// Scalars of 1 and 2 bytes reach the kernel with their own bytes, through
// Launch's general path (the first launch of a kernel reads its
// parameters) and through its quick path (every later launch):
// pack(out, uchar a, ushort b, uchar c) stores a | b<<8 | c<<24.
func TestLaunchSmallScalarsOnBothPaths(t *testing.T) {
	f := ltSetup(t)
	pack, err := f.mod.Function("pack")
	require.NoError(t, err)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	g, b1 := driver.Grid(1), driver.Block(1)
	got := make([]uint32, 1)
	for _, c := range []struct {
		a, b, c any
		want    uint32
	}{
		{uint8(0xab), uint16(0x1234), uint8(0x56), 0x561234ab},
		{int8(-1), int16(-2), true, 0x01fffeff},
		{false, uint16(0), int8(0x7f), 0x7f000000},
		{true, int16(0x7fff), false, 0x007fff01},
	} {
		for pass := range 3 { // the first two launches of all take the general path
			require.NoError(t, out.Memset32(f.s, 0))
			require.NoError(t, f.s.Launch(pack, g, b1, out, c.a, c.b, c.c))
			require.NoError(t, f.s.Synchronize())
			require.NoError(t, out.CopyToHost(f.s, got))
			assert.Equal(t, c.want, got[0], "%T %T %T, pass %d", c.a, c.b, c.c, pass)
		}
	}
	// A scalar of the wrong size is refused on either path, and explained.
	err = f.s.Launch(pack, g, b1, out, uint16(1), uint16(2), uint8(3))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorContains(t, err, "argument 1: the kernel expects 1 bytes, got 2")
	err = f.s.Launch(pack, g, b1, out, uint8(1), uint16(2), uint32(3))
	assert.ErrorContains(t, err, "argument 3: the kernel expects 1 bytes, got 4")
	err = f.s.Launch(pack, g, b1, uint8(1), uint8(1), uint16(2), uint8(3))
	assert.ErrorContains(t, err, "argument 0: the kernel expects 8 bytes, got 1")
}

// namedU32 is a named scalar type: not one of the argument types.
type namedU32 uint32

// The equivalence test of Launch's quick path and its general path: Launch
// (its quick path once the kernel's shape and buffer type are known) and
// LaunchWith (the general path) accept and refuse the same arguments and
// shapes, with the same errors, and kernels read the same values, over
// many cases, including DevicePtr/uint64/uintptr in a pointer slot, views,
// structs of a parameter's size and extreme shapes.
func TestLaunchQuickPathMatchesGeneralPath(t *testing.T) {
	f := ltSetup(t)
	pack, err := f.mod.Function("pack")
	require.NoError(t, err)
	out, err := driver.Alloc[uint32](f.ctx, 4)
	require.NoError(t, err)
	defer out.Close()
	base, err := driver.Alloc[uint32](f.ctx, 8)
	require.NoError(t, err)
	defer base.Close()
	view, err := base.Slice(4, 8)
	require.NoError(t, err)
	defer view.Close()
	closed, err := driver.Alloc[uint32](f.ctx, 4)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	var nilBuf *driver.Buffer[uint32]
	g1, b1 := driver.Grid(1), driver.Block(1)
	learnLaunch(t, f.s, f.empty)
	learnLaunch(t, f.s, f.fill, out, int32(0), int32(4))
	learnLaunch(t, f.s, pack, out, uint8(0), uint16(0), uint8(0))
	learnLaunch(t, f.s, f.add4, out, uint32(0), uint32(0), uint32(0))
	p := out.Ptr()
	cases := []struct {
		name  string
		fn    *driver.Function
		grid  driver.GridDim
		block driver.BlockDim
		args  []any
	}{
		{"add4", f.add4, g1, b1, []any{out, uint32(1), uint32(2), uint32(3)}},
		{"add4 int32 float32", f.add4, g1, b1, []any{out, int32(-1), float32(1.5), int32(0)}},
		{"add4 DevicePtr", f.add4, g1, b1, []any{p, uint32(4), uint32(5), uint32(6)}},
		{"add4 uint64", f.add4, g1, b1, []any{uint64(p), uint32(7), uint32(5), uint32(6)}},
		{"add4 uintptr", f.add4, g1, b1, []any{uintptr(p), uint32(8), uint32(5), uint32(6)}},
		{"add4 view", f.add4, g1, b1, []any{view, uint32(9), uint32(1), uint32(1)}},
		{"add4 struct of 4 bytes", f.add4, g1, b1, []any{out, struct{ A uint32 }{10}, uint32(1), uint32(1)}},
		{"add4 array of 4 bytes", f.add4, g1, b1, []any{out, [2]uint16{11, 0}, uint32(1), uint32(1)}},
		{"add4 closed", f.add4, g1, b1, []any{closed, uint32(1), uint32(2), uint32(3)}},
		{"add4 typed nil", f.add4, g1, b1, []any{nilBuf, uint32(1), uint32(2), uint32(3)}},
		{"add4 zero buffer", f.add4, g1, b1, []any{new(driver.Buffer[uint32]), uint32(1), uint32(2), uint32(3)}},
		{"add4 nil", f.add4, g1, b1, []any{out, nil, uint32(2), uint32(3)}},
		{"add4 int", f.add4, g1, b1, []any{out, 1, uint32(2), uint32(3)}},
		{"add4 named", f.add4, g1, b1, []any{out, namedU32(1), uint32(2), uint32(3)}},
		{"add4 buffer as scalar", f.add4, g1, b1, []any{out, out, uint32(2), uint32(3)}},
		{"add4 scalar as buffer", f.add4, g1, b1, []any{uint32(1), uint32(1), uint32(2), uint32(3)}},
		{"add4 too few", f.add4, g1, b1, []any{out, uint32(1), uint32(2)}},
		{"add4 too many", f.add4, g1, b1, []any{out, uint32(1), uint32(2), uint32(3), uint32(4)}},
		{"add4 wide grid y", f.add4, driver.Grid(1, 40000), b1, []any{out, uint32(12), uint32(0), uint32(0)}},
		{"add4 wide grid z", f.add4, driver.Grid(1, 1, 65535), b1, []any{out, uint32(13), uint32(0), uint32(0)}},
		{"add4 grid y too wide", f.add4, driver.Grid(1, 65536), b1, []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 grid 0", f.add4, driver.Grid(0), b1, []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 grid x max", f.add4, driver.Grid(1<<31 - 1), b1, []any{out, uint32(14), uint32(0), uint32(0)}},
		{"add4 grid x too wide", f.add4, driver.Grid(1 << 31), b1, []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 block 1025", f.add4, g1, driver.Block(1025), []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 block 32x33", f.add4, g1, driver.Block(32, 33), []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 block z 65", f.add4, g1, driver.Block(1, 1, 65), []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 block 4 dims", f.add4, g1, driver.Block(1, 1, 1, 1), []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 negative block", f.add4, g1, driver.Block(-1024), []any{out, uint32(1), uint32(0), uint32(0)}},
		{"fill", f.fill, g1, b1, []any{out, int32(-7), int32(4)}},
		{"fill uint32", f.fill, g1, b1, []any{out, uint32(0xfffffff0), uint32(3)}},
		{"pack", pack, g1, b1, []any{out, uint8(0xab), int16(-2), true}},
		{"pack bool false", pack, g1, b1, []any{out, false, uint16(0xffff), int8(-128)}},
		{"pack wrong size", pack, g1, b1, []any{out, uint16(1), uint16(2), uint8(3)}},
		{"empty", f.empty, g1, b1, nil},
		{"empty with an argument", f.empty, g1, b1, []any{uint32(1)}},
	}
	got := make([]uint32, 4)
	gotBase := make([]uint32, 8)
	run := func(launch func() error) ([]uint32, []uint32, error) {
		require.NoError(t, out.Memset32(f.ctx.LegacyStream(), 0xeeeeeeee))
		require.NoError(t, base.Memset32(f.ctx.LegacyStream(), 0xeeeeeeee))
		err := launch()
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, out.CopyToHost(f.ctx.LegacyStream(), got))
		require.NoError(t, base.CopyToHost(f.ctx.LegacyStream(), gotBase))
		return append([]uint32(nil), got...), append([]uint32(nil), gotBase...), err
	}
	for _, c := range cases {
		for pass := range 2 { // the general path first: it remembers the buffer type, so Launch goes quick
			slowOut, slowBase, slowErr := run(func() error {
				return f.s.LaunchWith(c.fn, driver.LaunchConfig{Grid: c.grid, Block: c.block}, c.args...)
			})
			quickOut, quickBase, quickErr := run(func() error { return f.s.Launch(c.fn, c.grid, c.block, c.args...) })
			if slowErr == nil {
				assert.NoError(t, quickErr, "%s (pass %d): Launch refuses what LaunchWith takes", c.name, pass)
			} else if assert.Error(t, quickErr, "%s (pass %d): Launch takes what LaunchWith refuses (%v)", c.name, pass, slowErr) {
				assert.Equal(t, slowErr.Error(), quickErr.Error(), "%s (pass %d): the same error", c.name, pass)
			}
			assert.Equal(t, slowOut, quickOut, "%s (pass %d): the kernel wrote the same", c.name, pass)
			assert.Equal(t, slowBase, quickBase, "%s (pass %d): the kernel wrote the same (view)", c.name, pass)
		}
	}
	ltNoBadUses(t)
}

// A bool argument whose byte is neither 0 nor 1 reaches the kernel as 1
// through the general path and NewArgs (scalarBits tests it and stores 1
// or 0) and through Launch's quick path alike (quickScalar must not copy
// the raw byte), so the same call passes the same bytes whichever path it
// takes. Such a bool comes from safe code: a Buffer[bool] copied back from
// device memory a kernel (here a memset) filled with 2. pack(out, a, b, c)
// stores a | b<<8 | c<<24.
func TestLaunchBoolBytesSameOnBothPaths(t *testing.T) {
	f := ltSetup(t)
	pack, err := f.mod.Function("pack")
	require.NoError(t, err)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	flags, err := driver.Alloc[bool](f.ctx, 4)
	require.NoError(t, err)
	defer flags.Close()
	require.NoError(t, flags.Memset8(f.ctx.LegacyStream(), 2))
	host, err := flags.ToHost(f.ctx.LegacyStream())
	require.NoError(t, err)
	odd := host[0] // a true bool whose byte is 2
	require.True(t, odd)

	g := driver.Grid(1)
	learnLaunch(t, f.s, pack, out, true, uint16(0), false)
	got := make([]uint32, 1)
	for _, c := range []struct {
		name   string
		launch func() error
	}{
		{"general path (LaunchWith)", func() error {
			return f.s.LaunchWith(pack, driver.LaunchConfig{Grid: g, Block: driver.Block(1)}, out, odd, uint16(0), false)
		}},
		{"Launch (quick path)", func() error { return f.s.Launch(pack, g, driver.Block(1), out, odd, uint16(0), false) }},
	} {
		require.NoError(t, out.Memset32(f.s, 0))
		require.NoError(t, c.launch(), c.name)
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, out.CopyToHost(f.s, got))
		assert.Equal(t, uint32(1), got[0], "%s: a true bool is passed as 1", c.name)
	}
}

// Prewarm and the small block on zero values and
// odd arguments fail cleanly, without a panic and without holding anything.
func TestLaunchZeroValuesDoNotPanic(t *testing.T) {
	f := ltSetup(t)
	g := driver.Grid(1)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	// Teach add4 the buffer type first, so prewarm reads buffers of it.
	require.NoError(t, f.s.Launch(f.add4, g, driver.Block(1), out, uint32(1), uint32(0), uint32(0)))
	require.NoError(t, f.s.Launch(f.add4, g, driver.Block(1), out, uint32(1), uint32(0), uint32(0)))
	var nilBuf *driver.Buffer[uint32]
	zeroBuf := new(driver.Buffer[uint32])
	assert.NotPanics(t, func() {
		assert.Error(t, new(driver.Stream).Launch(f.add4, g, driver.Block(1), out, uint32(1), uint32(0), uint32(0)))
		assert.Error(t, f.s.Launch(new(driver.Function), g, driver.Block(1), out, uint32(1), uint32(0), uint32(0)))
		assert.Error(t, new(driver.Stream).Launch(new(driver.Function), g, driver.Block(1)))
		assert.Error(t, f.s.Launch(f.add4, g, driver.Block(1), nilBuf, uint32(1), uint32(0), uint32(0)))
		assert.Error(t, f.s.Launch(f.add4, g, driver.Block(1), zeroBuf, uint32(1), uint32(0), uint32(0)))
		assert.Error(t, f.s.Launch(f.add4, g, driver.Block(1), nil, "x", []int{1}, struct{}{}))
	})
	require.NoError(t, f.s.Synchronize())
}

// A view made by Buffer.Slice has the type its
// kernel last saw and is read as a Buffer[byte]; its offset is kept in
// bytes, so the kernel writes the viewed element, not one scaled by the
// element size again.
func TestLaunchSliceViewThroughRememberedType(t *testing.T) {
	f := ltSetup(t)
	g := driver.Grid(1)
	base, err := driver.Alloc[uint32](f.ctx, 4)
	require.NoError(t, err)
	defer base.Close()
	require.NoError(t, base.Memset32(f.ctx.LegacyStream(), 0))
	for range 2 { // the general path, then the block's assertion stores the type
		require.NoError(t, f.s.Launch(f.add4, g, driver.Block(1), base, uint32(9), uint32(0), uint32(0)))
	}
	view, err := base.Slice(2, 3)
	require.NoError(t, err)
	defer view.Close()
	require.NoError(t, f.s.Launch(f.add4, g, driver.Block(1), view, uint32(5), uint32(0), uint32(0)))
	require.NoError(t, f.s.Synchronize())
	got := make([]uint32, 4)
	require.NoError(t, base.CopyToHost(f.ctx.LegacyStream(), got))
	assert.Equal(t, []uint32{9, 0, 5, 0}, got)
}
