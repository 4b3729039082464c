package driver

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// What a launch reads of a Stream and a Function (the handles, the
// context, the entry point, the reference count; the kernel's parameter
// shape) lies in one 64-byte cache line of each: both sizes fall in
// allocation size classes whose objects start on a line.
func TestLaunchLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is tuned for 64-bit platforms")
	}
	var s Stream
	assert.Equal(t, uintptr(192), unsafe.Sizeof(s), "a Stream fills the 192-byte size class")
	assert.LessOrEqual(t, unsafe.Offsetof(s.obj)+16, uintptr(64), "the stream's count and closed flag in the first line")
	var f Function
	assert.LessOrEqual(t, unsafe.Sizeof(f), uintptr(128), "a Function fits the 128-byte size class")
	assert.Greater(t, unsafe.Sizeof(f), uintptr(112))
	assert.LessOrEqual(t, unsafe.Offsetof(f.small)+smallArgs, uintptr(64), "the kernel's shape in the first line")
}

// smallBlock.fill reads any *Buffer[T] as a *Buffer[byte]: no field of
// Buffer depends on T.
func TestBufferLayoutIndependentOfElement(t *testing.T) {
	type pair struct{ A, B float64 }
	want := unsafe.Sizeof(Buffer[byte]{})
	assert.Equal(t, want, unsafe.Sizeof(Buffer[float64]{}))
	assert.Equal(t, want, unsafe.Sizeof(Buffer[pair]{}))
	assert.Equal(t, want, unsafe.Sizeof(Buffer[[3]int8]{}))
	var b8 Buffer[byte]
	var bp Buffer[pair]
	assert.Equal(t, unsafe.Offsetof(b8.a), unsafe.Offsetof(bp.a))
	assert.Equal(t, unsafe.Offsetof(b8.off), unsafe.Offsetof(bp.off))
	assert.Equal(t, unsafe.Offsetof(b8.closed), unsafe.Offsetof(bp.closed))
	assert.Equal(t, unsafe.Offsetof(b8.n), unsafe.Offsetof(bp.n))
}
