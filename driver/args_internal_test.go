package driver

import (
	"math"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type params struct {
	A int32
	B float32
	C int64
	D float64
}

func TestArgMarshalling(t *testing.T) {
	var b argBlock
	args := []any{int8(-1), uint16(2), int32(-3), uint64(4), float32(1.5), float64(2.5), true, DevicePtr(0xdead), params{1, 2, 3, 4}, [3]uint8{7, 8, 9}}
	for i, v := range args {
		require.NoError(t, b.marshal("test", i, v, nil, nil))
	}
	kp := b.finish()
	require.NotNil(t, kp)
	assert.Equal(t, []uint32{1, 2, 4, 8, 4, 8, 1, 8, 24, 3}, b.sizes)
	ptrs := unsafe.Slice(kp, len(args))
	for i, p := range ptrs {
		assert.Zero(t, uintptr(p)%8, "argument %d is 8-byte aligned", i)
	}
	assert.Equal(t, int8(-1), *(*int8)(ptrs[0]))
	assert.Equal(t, uint16(2), *(*uint16)(ptrs[1]))
	assert.Equal(t, int32(-3), *(*int32)(ptrs[2]))
	assert.Equal(t, uint64(4), *(*uint64)(ptrs[3]))
	assert.Equal(t, float32(1.5), *(*float32)(ptrs[4]))
	assert.Equal(t, 2.5, *(*float64)(ptrs[5]))
	assert.Equal(t, true, *(*bool)(ptrs[6]))
	assert.Equal(t, DevicePtr(0xdead), *(*DevicePtr)(ptrs[7]))
	assert.Equal(t, params{1, 2, 3, 4}, *(*params)(ptrs[8]))
	assert.Equal(t, [3]uint8{7, 8, 9}, *(*[3]uint8)(ptrs[9]))

	b.reset()
	assert.Nil(t, b.finish(), "no arguments: a nil parameter array")
}

// TestArgBlockSpill: arguments past the inline slots and values over 8
// bytes go to spill chunks that never move, and a reset block is reused
// without allocating.
func TestArgBlockSpill(t *testing.T) {
	var b argBlock
	b.init()
	type big struct{ W [100]uint64 }
	var want big
	for i := range want.W {
		want.W[i] = uint64(i) * 3
	}
	fill := func() {
		for i := 0; i < 20; i++ {
			if i == 5 || i == 15 {
				require.NoError(t, b.marshal("t", i, want, nil, nil))
				continue
			}
			require.NoError(t, b.marshal("t", i, int64(1000+i), nil, nil))
		}
	}
	fill()
	ptrs := unsafe.Slice(b.finish(), 20)
	for i, p := range ptrs {
		switch i {
		case 5, 15:
			assert.Equal(t, want, *(*big)(p), "argument %d", i)
			assert.EqualValues(t, 800, b.sizes[i])
		default:
			assert.Equal(t, int64(1000+i), *(*int64)(p), "argument %d", i)
		}
	}
	assert.Equal(t, unsafe.Pointer(&b.vals[3]), ptrs[3], "early small arguments sit in the block")
	b.reset()
	assert.Nil(t, b.finish())
	// Reflection copies struct values (one allocation each); the block
	// itself allocates nothing once it has grown.
	small := func() {
		for i := 0; i < 20; i++ {
			_ = b.marshal("t", i, uint32(i), nil, nil)
		}
		b.reset()
	}
	small()
	assert.Zero(t, testing.AllocsPerRun(100, small))
	fill()
	assert.Equal(t, want, *(*big)(unsafe.Slice(b.finish(), 20)[15]), "reused spill is rewritten")
}

func TestArgRejections(t *testing.T) {
	var b argBlock
	for _, v := range []any{int(1), uint(1), nil, "s", []int32{1}, &params{}, map[int]int{}, struct{ P *int }{}} {
		err := b.marshal("Launch", 0, v, nil, nil)
		assert.ErrorIs(t, err, ErrInvalidArgument, "%T", v)
	}
	assert.ErrorContains(t, b.marshal("Launch", 3, int(1), nil, nil), "argument 3: int has no fixed C size: use int32 or int64")
}

func TestArgCountAndSizeChecks(t *testing.T) {
	f := &Function{name: "k", params: []paramInfo{{0, 4}, {8, 8}}}
	f.paramsDone.Store(true)
	var b argBlock
	require.NoError(t, b.marshal("Launch", 0, int32(1), nil, nil))
	assert.ErrorContains(t, b.check("Launch", f, nil), "kernel k takes 2 arguments, got 1")
	require.NoError(t, b.marshal("Launch", 1, int32(2), nil, nil))
	assert.ErrorContains(t, b.check("Launch", f, nil), "kernel k: argument 1: the kernel expects 8 bytes, got 4")
	b.reset()
	require.NoError(t, b.marshal("Launch", 0, int32(1), nil, nil))
	require.NoError(t, b.marshal("Launch", 1, DevicePtr(1), nil, nil))
	assert.NoError(t, b.check("Launch", f, nil))

	unknown := &Function{name: "old"}
	unknown.paramsDone.Store(true) // a driver before 12.4: params nil, nothing checked
	assert.NoError(t, b.check("Launch", unknown, nil))
}

func TestSetArg(t *testing.T) {
	a := &Args{hold: &argsHold{}}
	a.hold.obj.Init(nil)
	require.NoError(t, a.blk.marshal("t", 0, int32(1), nil, nil))
	require.NoError(t, a.blk.marshal("t", 1, float64(1), nil, nil))
	a.kparams = a.blk.finish()
	require.NoError(t, SetArg(a, 0, int32(42)))
	require.NoError(t, SetArg(a, 1, 3.25))
	ptrs := unsafe.Slice(a.kparams, 2)
	assert.Equal(t, int32(42), *(*int32)(ptrs[0]))
	assert.Equal(t, 3.25, *(*float64)(ptrs[1]))
	assert.ErrorContains(t, SetArg(a, 0, int64(1)), "argument 0 is 4 bytes, int64 is 8")
	assert.ErrorIs(t, SetArg(a, 5, int32(1)), ErrInvalidArgument)
	assert.ErrorIs(t, SetArg(a, 1, int(1)), ErrInvalidArgument)
	var x float64
	assert.ErrorContains(t, SetArg(a, 1, &x), "not plain data", "a Go pointer is refused")
	assert.ErrorContains(t, SetArg(a, 1, &Buffer[float32]{}), "make new Args", "a buffer is refused")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = SetArg(a, 0, int32(7)) }))
}

func TestCheckDims(t *testing.T) {
	d := &dimLimits{maxThreads: 1024, maxBlock: [3]int32{1024, 1024, 64}, maxGrid: [3]int32{1<<31 - 1, 65535, 65535}}
	assert.NoError(t, checkDims("L", d, Grid(10), Block(256)))
	assert.ErrorContains(t, checkDims("L", d, Grid(0), Block(1)), "grid dimension x = 0")
	assert.ErrorContains(t, checkDims("L", d, Grid(1), Block(0)), "block dimension x = 0")
	assert.ErrorContains(t, checkDims("L", d, Grid(1), Block(2048)), "block dimension x = 2048")
	assert.ErrorContains(t, checkDims("L", d, Grid(1), Block(1, 1, 65)), "block dimension z = 65")
	assert.ErrorContains(t, checkDims("L", d, Grid(1), Block(64, 32)), "block of 2048 threads")
	assert.ErrorContains(t, checkDims("L", d, Grid(1, 70000), Block(1)), "grid dimension y = 70000")
	assert.ErrorContains(t, checkDims("L", d, Grid(1, 1, 1, 1), Block(1)), "grid dimension z = -1")
	assert.ErrorContains(t, checkDims("L", d, Grid(-3), Block(1)), "grid dimension x = -3")
}

func TestPlainData(t *testing.T) {
	assert.True(t, plainData(reflect.TypeFor[params]()))
	assert.True(t, plainData(reflect.TypeFor[[4]complex64]()))
	assert.False(t, plainData(reflect.TypeFor[*int]()))
	assert.False(t, plainData(reflect.TypeFor[struct{ X []int }]()))
	assert.False(t, plainData(reflect.TypeFor[unsafe.Pointer]()))
}

// quickScalar (Launch's quick path) reads every type scalarBits (the
// general path) takes with the same bits and size, and nothing else: named
// types, int, uint, pointers, structs and nil take the general path, which
// explains them.
func TestQuickScalarMatchesScalarBits(t *testing.T) {
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

// A block whose first argument, a buffer, was refused holds the buffer
// but no parameter yet; reset releases it and forgets it, so that the
// block's next user (blocks are pooled) does not release it again, which
// would free memory under its open Buffer.
func TestArgBlockResetForgetsBuffersWithoutParameters(t *testing.T) {
	freed := 0
	a := &allocation{}
	a.obj.Init(func() error { freed++; return nil }) // the Buffer's reference
	var b argBlock
	b.init()
	for range 3 {
		require.True(t, a.obj.Retain())
		b.allocs = append(b.allocs, a) // as marshal holds a refused buffer
		b.reset()
		assert.Empty(t, b.allocs)
		assert.Equal(t, int64(1), a.obj.Refs(), "the Buffer's reference is left")
	}
	b.reset()
	assert.Equal(t, int64(1), a.obj.Refs())
	assert.Zero(t, freed)
}
