package driver

// Review tests for 9473ca1 (Launch's and LaunchArgs' quick paths): the
// pure-Go pieces, checked without a driver.

import (
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// universalDims is the launch shape every CUDA 13 device allows, written
// out plainly (no unsigned tricks): what quickDims may accept at most.
func universalDims(grid, block Dim3) bool {
	in := func(v, lo, hi int) bool { return v >= lo && v <= hi }
	return in(grid.X, 1, 1<<31-1) && in(grid.Y, 1, 65535) && in(grid.Z, 1, 65535) &&
		in(block.X, 1, 1024) && in(block.Y, 1, 1024) && in(block.Z, 1, 64) &&
		block.X*block.Y*block.Z <= 1024
}

// Not a bug: quickDims accepts only shapes every device allows (so the
// quick paths never launch what checkDims refuses), exactly the documented
// range (grid y and z up to 32768), and its unsigned arithmetic does not
// wrap for extreme or negative values. Existing tests check checkDims,
// not quickDims on its own or at these extremes.
func TestQuickReviewQuickDims(t *testing.T) {
	var vals []int
	for _, v := range []int64{math.MinInt64, math.MinInt32, math.MinInt32 + 1, -1 << 32, -65536, -2, -1, 0, 1, 2, 63, 64, 65,
		1023, 1024, 1025, 32767, 32768, 32769, 65535, 65536, 1<<31 - 2, 1<<31 - 1, 1 << 31, 1<<32 + 1, math.MaxInt64 - 1, math.MaxInt64} {
		if int64(int(v)) == v { // those an int holds here
			vals = append(vals, int(v))
		}
	}
	vals = append(vals, math.MinInt, math.MinInt+1, math.MaxInt-1, math.MaxInt)
	d := &dimLimits{maxThreads: 1024, maxBlock: [3]int32{1024, 1024, 64}, maxGrid: [3]int32{1<<31 - 1, 65535, 65535}}
	for _, v := range vals {
		for axis := range 6 {
			g, b := Dim3{1, 1, 1}, Dim3{1, 1, 1}
			switch axis {
			case 0:
				g.X = v
			case 1:
				g.Y = v
			case 2:
				g.Z = v
			case 3:
				b.X = v
			case 4:
				b.Y = v
			case 5:
				b.Z = v
			}
			q, u := quickDims(g, b), universalDims(g, b)
			if q && !u {
				t.Errorf("quickDims accepts %v × %v, which not every device allows", g, b)
			}
			want := u && g.Y <= 32768 && g.Z <= 32768
			assert.Equal(t, want, q, "quickDims(%v, %v)", g, b)
			assert.Equal(t, u, checkDims("L", d, g, b) == nil, "checkDims(%v, %v) with the universal limits", g, b)
		}
	}
	// Products: each dimension in range, the block too large; and wide
	// values whose product would wrap if it were computed first.
	for _, b := range []Dim3{{1024, 2, 1}, {32, 32, 2}, {2, 1024, 1}, {1, 1, 64}, {16, 1, 64}, {math.MaxInt, math.MaxInt, 4}, {math.MinInt, math.MinInt, 1}} {
		assert.Equal(t, universalDims(Grid(1), b), quickDims(Grid(1), b), "block %v", b)
	}
}

// Not a bug: quickScalar reads every type scalarBits takes with the same
// bits and size, and nothing else (named types, int, uint, pointers,
// structs and nil take the general path, which explains them). The
// existing tests reach quickScalar only through a kernel, for a few types.
func TestQuickReviewQuickScalarMatchesScalarBits(t *testing.T) {
	type myU32 uint32
	type myBool bool
	vals := []any{
		int8(-1), int8(0), int8(math.MinInt8), uint8(0xff), uint8(7), true, false,
		int16(-2), int16(math.MinInt16), uint16(0xfffe), int32(-3), int32(math.MinInt32), uint32(0xdeadbeef),
		float32(math.Copysign(0, -1)), float32(math.Inf(-1)), math.Float32frombits(0x7fc00001),
		int64(-4), int64(math.MinInt64), uint64(math.MaxUint64), float64(-2.5), math.Float64frombits(0x7ff8000000000001),
		^uintptr(0), DevicePtr(0xfeedface_12345678),
	}
	for _, v := range vals {
		bits, size, ok := scalarBits(v)
		require.True(t, ok, "%T", v)
		typ, data := efaceWords(&v)
		qb, qs := quickScalar(typ, data)
		assert.Equal(t, size, qs, "%T %v: size", v, v)
		assert.Equal(t, bits, qb, "%T %v: bits", v, v)
	}
	x := 5
	for _, v := range []any{nil, int(1), uint(1), myU32(1), myBool(true), &x, unsafe.Pointer(&x), struct{ A uint32 }{1}, [1]uint32{1}, "s", complex64(1)} {
		_, _, ok := scalarBits(v)
		typ, data := efaceWords(&v)
		_, qs := quickScalar(typ, data)
		assert.Equal(t, ok, qs != 0, "%T", v)
		assert.Zero(t, qs, "%T is no quick scalar", v)
	}
	seen := map[uintptr]bool{}
	for _, q := range quickTypes {
		assert.NotZero(t, q.typ)
		assert.False(t, seen[q.typ], "a type listed twice")
		seen[q.typ] = true
	}
	assert.Len(t, seen, 13, "the 13 types scalarBits takes")
}

// Regression (found reviewing the quick paths; older than them, reached by
// every launch and async copy):
// allocation.usedOn records a stream that used stream-ordered memory with
// s.Hold, which fails once s is closed. The caller (a launch, an async
// copy) holds s, but a Stream.Close racing the call marks s closed after
// the call's Acquire: usedOn then records nothing, the call still queues
// its kernel on s (whose handle the call keeps alive), and the memory's
// free on its own stream no longer waits for s — a use after free on the
// device. Here the race is played step by step: s held by a call, then
// closed, then usedOn. Fixed: usedOn takes its reference with
// s.obj.Hold, which works after Close while the caller holds s.
func TestQuickReviewUsedOnStreamClosedDuringCall(t *testing.T) {
	own := &Stream{} // the allocating stream
	own.obj.Init(nil)
	s := &Stream{ctx: &Context{}} // the launch's stream (Close ignores a Stream without a context)
	s.obj.Init(nil)
	a := &allocation{stream: own}

	require.True(t, s.obj.Acquire(), "the launch holds s")
	require.NoError(t, s.Close(), "a Close racing the launch")
	a.usedOn(s) // the launch goes on: its kernel is queued on s
	a.fmu.Lock()
	n := len(a.foreign)
	a.fmu.Unlock()
	assert.Equal(t, 1, n, "s was not recorded: the free will not wait for the kernel queued on s")
	for _, f := range a.foreign {
		_ = f.ref.Release()
	}
	_ = s.obj.Release()
	_ = own.obj.Close()
}
