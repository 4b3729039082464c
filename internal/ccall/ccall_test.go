//go:build linux

package ccall_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/gputest"
)

func libc(t testing.TB, name string) uintptr {
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_LOCAL)
	require.NoError(t, err)
	fn, err := purego.Dlsym(h, name)
	require.NoError(t, err)
	return fn
}

// call is written the way the generator writes a call: escape, pooled
// frame, KeepAlive.
func call(fn uintptr, p *[4]uint64, v byte) uintptr {
	ccall.Escape(unsafe.Pointer(p))
	f := ccall.Get(fn)
	f.Args[0] = uintptr(unsafe.Pointer(p))
	f.Args[1] = uintptr(v)
	f.Args[2] = unsafe.Sizeof(*p)
	r1 := f.Call(3)
	ccall.Put(f)
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
	memset := libc(t, "memset")
	buf := new([4]uint64)
	assert.Equal(t, uintptr(unsafe.Pointer(buf)), call(memset, buf, 0xAB))
	assert.Equal(t, [4]uint64{0xABABABABABABABAB, 0xABABABABABABABAB, 0xABABABABABABABAB, 0xABABABABABABABAB}, *buf)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { call(memset, buf, 1) }))
	plain := testing.AllocsPerRun(1000, func() {
		purego.SyscallN(memset, uintptr(unsafe.Pointer(buf)), 2, unsafe.Sizeof(*buf))
	})
	t.Logf("a plain variadic SyscallN allocates %.0f times per call", plain)
}

// TestManyArguments passes 6 register and 6 stack arguments (snprintf with
// nine integers), then more than the short trampoline takes, up to
// MaxArgs (the long one: 14 as cublasSgemm has, 23 as
// cublasGemmStridedBatchedEx, 32).
func TestManyArguments(t *testing.T) {
	snprintf := libc(t, "snprintf")
	for _, n := range []int{9, 11, 20, 29} {
		buf := make([]byte, 256)
		format := []byte(strings.Repeat("%d ", n) + "\x00")
		f := ccall.Get(snprintf)
		f.Args[0] = uintptr(unsafe.Pointer(&buf[0]))
		f.Args[1] = uintptr(len(buf))
		f.Args[2] = uintptr(unsafe.Pointer(&format[0]))
		for i := 0; i < n; i++ {
			f.Args[3+i] = uintptr(i + 1)
		}
		r := f.Call(3 + n)
		ccall.Put(f)
		runtime.KeepAlive(buf)
		runtime.KeepAlive(format)
		var want strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&want, "%d ", i)
		}
		assert.Equal(t, want.String(), string(buf[:r]), "%d arguments", 3+n)
	}
}

// TestFrameLayout pins the offsets the assembly trampoline reads.
func TestFrameLayout(t *testing.T) {
	var f ccall.Frame
	assert.Equal(t, uintptr(0), unsafe.Offsetof(f.Fn))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(f.R1))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(f.Args))
	var sh ccall.Short
	assert.Equal(t, uintptr(0), unsafe.Offsetof(sh.Fn))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(sh.R1))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(sh.Args))
}

// shortSnprintf formats twelve arguments through a Short frame on the
// stack, as a launch does.
func shortSnprintf(fn uintptr, buf, format []byte) uintptr {
	var f ccall.Short
	f.Fn = fn
	f.Args[0] = uintptr(unsafe.Pointer(&buf[0]))
	f.Args[1] = uintptr(len(buf))
	f.Args[2] = uintptr(unsafe.Pointer(&format[0]))
	for i := 3; i < ccall.ShortArgs; i++ {
		f.Args[i] = uintptr(i - 2)
	}
	r := f.Call()
	runtime.KeepAlive(buf)
	runtime.KeepAlive(format)
	return r
}

// A Short frame passes all twelve arguments (six in registers, six on the
// stack on amd64), and a call through it allocates nothing.
func TestShortFrame(t *testing.T) {
	snprintf := libc(t, "snprintf")
	buf := make([]byte, 128)
	format := []byte("%d %d %d %d %d %d %d %d %d\x00")
	r := shortSnprintf(snprintf, buf, format)
	assert.Equal(t, "1 2 3 4 5 6 7 8 9", string(buf[:r]))
	if gputest.RaceEnabled {
		return // allocation counts mean nothing under the race detector
	}
	assert.Zero(t, testing.AllocsPerRun(1000, func() { shortSnprintf(snprintf, buf, format) }))
}
