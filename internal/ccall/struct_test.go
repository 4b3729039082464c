//go:build linux

package ccall_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/gputest"
)

// structLib builds testdata/structarg.c with gcc and returns its functions
// by name; it skips without gcc.
func structLib(t *testing.T) map[string]uintptr {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the struct-by-value calls need a C library to call")
	}
	lib := filepath.Join(t.TempDir(), "libstructarg.so")
	out, err := exec.Command(gcc, "-O2", "-shared", "-fPIC", "-o", lib, filepath.Join("testdata", "structarg.c")).CombinedOutput()
	require.NoError(t, err, "gcc: %s", out)
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	require.NoError(t, err)
	fns := map[string]uintptr{}
	for _, name := range []string{"mid", "first", "last", "scribble", "small"} {
		fns[name], err = purego.Dlsym(h, name)
		require.NoError(t, err)
	}
	return fns
}

// id128 has the shape of ncclUniqueId: 128 bytes, alignment 1.
type id128 struct{ internal [128]byte }

func pattern(seed byte) id128 {
	var id id128
	for i := range id.internal {
		id.internal[i] = seed + byte(i)*7
	}
	return id
}

// initRank calls mid the way the generated ncclCommInitRank does: the
// integer arguments in the frame, the struct beside them.
func initRank(fn uintptr, out *[128]byte, nranks, rank int32, id id128) int32 {
	ccall.Escape(unsafe.Pointer(out))
	cf := ccall.Get(fn)
	cf.Args[0] = uintptr(unsafe.Pointer(out))
	cf.Args[1] = uintptr(nranks)
	cf.Args[2] = uintptr(rank)
	r1 := cf.CallStruct(3, 2, unsafe.Pointer(&id), unsafe.Sizeof(id))
	ccall.Put(cf)
	runtime.KeepAlive(out)
	return int32(r1)
}

// TestCallStructByValue passes a 128-byte struct by value first, between
// and after integer arguments (six of them: every register taken), and a
// 24-byte one, and checks what C received. On linux/amd64 this is the
// System V lowering (the struct in the stack argument area); on arm64 the
// copy passed by reference.
func TestCallStructByValue(t *testing.T) {
	fns := structLib(t)
	var out [128]byte

	id := pattern(3)
	assert.Equal(t, int32(4*1000+3), initRank(fns["mid"], &out, 4, 3, id))
	assert.Equal(t, id.internal, out, "the struct between integers")

	id = pattern(50)
	cf := ccall.Get(fns["first"])
	cf.Args[0] = uintptr(unsafe.Pointer(&out))
	cf.Args[1] = 7
	cf.Args[2] = 9
	r := cf.CallStruct(3, 0, unsafe.Pointer(&id), unsafe.Sizeof(id))
	ccall.Put(cf)
	assert.Equal(t, uintptr(7009), r)
	assert.Equal(t, id.internal, out, "the struct first")

	id = pattern(99)
	cf = ccall.Get(fns["last"])
	for i := 0; i < 5; i++ {
		cf.Args[i] = uintptr(i + 1)
	}
	cf.Args[5] = uintptr(unsafe.Pointer(&out))
	r = cf.CallStruct(6, 6, unsafe.Pointer(&id), unsafe.Sizeof(id))
	ccall.Put(cf)
	assert.Equal(t, uintptr(12345), r)
	assert.Equal(t, id.internal, out, "the struct after six integers")

	w := [3]uint64{1, 2, 3}
	cf = ccall.Get(fns["small"])
	cf.Args[0] = 5
	cf.Args[1] = 6
	r = cf.CallStruct(2, 1, unsafe.Pointer(&w), unsafe.Sizeof(w))
	ccall.Put(cf)
	assert.Equal(t, uintptr(5*1000000+6*10000+123), r, "a 24-byte struct")
	runtime.KeepAlive(&out)
}

// TestCallStructCalleeChangesItsCopy: C may write to the struct it was
// given; that is its own copy, never the caller's.
func TestCallStructCalleeChangesItsCopy(t *testing.T) {
	fns := structLib(t)
	var out [128]byte
	id := pattern(1)
	before := id
	cf := ccall.Get(fns["scribble"])
	cf.Args[0] = uintptr(unsafe.Pointer(&out))
	r := cf.CallStruct(1, 0, unsafe.Pointer(&id), unsafe.Sizeof(id))
	ccall.Put(cf)
	runtime.KeepAlive(&out)
	assert.Equal(t, uintptr(0xEE), r&0xFF)
	assert.Equal(t, before, id)
	assert.Equal(t, before.internal, out)
}

// TestCallStructAllocatesNothing: the struct travels in the pooled frame.
func TestCallStructAllocatesNothing(t *testing.T) {
	if gputest.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	fns := structLib(t)
	out := new([128]byte)
	id := pattern(9)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { initRank(fns["mid"], out, 2, 1, id) }))
	assert.Equal(t, id.internal, *out)
}

// TestCallStructRefuses: a call StructFits refuses is not made.
func TestCallStructRefuses(t *testing.T) {
	assert.True(t, ccall.StructFits(4, 128), "ncclCommInitRankConfig")
	assert.True(t, ccall.StructFits(6, 24))
	assert.False(t, ccall.StructFits(7, 128), "more integers than registers")
	assert.False(t, ccall.StructFits(2, 16), "16 bytes and less go in registers")
	assert.False(t, ccall.StructFits(2, 36), "not a multiple of 8")
	assert.False(t, ccall.StructFits(2, 8*(ccall.MaxArgs-5)), "more words than a frame holds")
	assert.False(t, ccall.StructFits(-1, 128))
	var id id128
	for _, c := range []struct{ n, pos int }{{7, 0}, {2, 3}, {2, -1}} {
		cf := ccall.Get(1) // never called
		assert.Equal(t, ccall.Refused, cf.CallStruct(c.n, c.pos, unsafe.Pointer(&id), unsafe.Sizeof(id)), "n %d pos %d", c.n, c.pos)
		ccall.Put(cf)
	}
	cf := ccall.Get(1)
	assert.Equal(t, ccall.Refused, cf.CallStruct(1, 0, unsafe.Pointer(&id), 12))
	ccall.Put(cf)
}
