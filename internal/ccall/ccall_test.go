//go:build linux

package ccall_test

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/gputest"
)

// call is written the way the generator writes a call: escape, pooled
// arguments, KeepAlive.
func call(fn uintptr, p *[4]uint64, v byte) uintptr {
	ccall.Escape(unsafe.Pointer(p))
	a := ccall.Args()
	a[0] = uintptr(unsafe.Pointer(p))
	a[1] = uintptr(v)
	a[2] = unsafe.Sizeof(*p)
	r1, _, _ := purego.SyscallN(fn, a[:3]...)
	ccall.Release(a)
	runtime.KeepAlive(p)
	return r1
}

// TestPooledCallAllocatesNothing calls libc's memset the way generated code
// calls the driver, and checks it works and allocates nothing, where a plain
// variadic SyscallN allocates its argument slice.
func TestPooledCallAllocatesNothing(t *testing.T) {
	if gputest.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	if runtime.GOOS != "linux" {
		t.Skip("uses libc.so.6")
	}
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_LOCAL)
	require.NoError(t, err)
	memset, err := purego.Dlsym(h, "memset")
	require.NoError(t, err)
	buf := new([4]uint64)
	assert.Equal(t, uintptr(unsafe.Pointer(buf)), call(memset, buf, 0xAB))
	assert.Equal(t, [4]uint64{0xABABABABABABABAB, 0xABABABABABABABAB, 0xABABABABABABABAB, 0xABABABABABABABAB}, *buf)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { call(memset, buf, 1) }))
	plain := testing.AllocsPerRun(1000, func() {
		purego.SyscallN(memset, uintptr(unsafe.Pointer(buf)), 2, unsafe.Sizeof(*buf))
	})
	t.Logf("a plain variadic SyscallN allocates %.0f times per call", plain)
}
