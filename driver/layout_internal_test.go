package driver

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// What a launch reads of a Stream, a Function, a Buffer argument and its
// allocation (the handles, the context, the entry point, the reference
// counts; the kernel's parameter shape; the address) lies in one 64-byte
// cache line of each: their sizes fall in allocation size classes whose
// objects start on a line (a Buffer's, on a line or half-way along one).
func TestLaunchLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is tuned for 64-bit platforms")
	}
	var s Stream
	assert.Equal(t, uintptr(192), unsafe.Sizeof(s), "a Stream fills the 192-byte size class")
	assert.LessOrEqual(t, unsafe.Offsetof(s.obj)+16, uintptr(64), "the stream's count and closed flag in the first line")
	var f Function
	assert.Equal(t, uintptr(192), unsafe.Sizeof(f), "a Function fills the 192-byte size class")
	assert.LessOrEqual(t, unsafe.Offsetof(f.small)+smallArgs, uintptr(64), "the kernel's shape in the first line")
	assert.LessOrEqual(t, unsafe.Offsetof(f.bufType)+8, uintptr(64), "the last buffer type in the first line")
	assert.LessOrEqual(t, unsafe.Offsetof(f.obj)+16, uintptr(64), "the function's count and closed flag in the first line")
	var a allocation
	assert.Equal(t, uintptr(128), unsafe.Sizeof(a), "an allocation fills the 128-byte size class")
	assert.LessOrEqual(t, unsafe.Offsetof(a.obj)+16, uintptr(64), "the allocation's count in the first line")
	assert.Less(t, unsafe.Offsetof(a.stream), uintptr(64), "its address, context and stream in the first line")
	var b Buffer[byte]
	assert.True(t, unsafe.Sizeof(b) > 80 && unsafe.Sizeof(b) <= 96, "a Buffer (%d bytes) is in the 96-byte size class", unsafe.Sizeof(b))
	assert.LessOrEqual(t, unsafe.Offsetof(b.off)+8, uintptr(32), "what a launch reads of a Buffer within half a line")
	assert.Less(t, unsafe.Offsetof(b.closed), uintptr(32))
}

// What Event.Record reads of an event after libcuda returns (its capture
// hook and its count) lies in 16 bytes that no 64-byte line boundary
// splits: an Event falls in the 96-byte size class, so it starts 0 or 32
// bytes into a line.
func TestEventRecordLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is tuned for 64-bit platforms")
	}
	var e Event
	assert.Equal(t, uintptr(88), unsafe.Sizeof(e), "an Event falls in the 96-byte size class")
	assert.Equal(t, uintptr(16), unsafe.Offsetof(e.capture))
	assert.Equal(t, uintptr(24), unsafe.Offsetof(e.obj), "the count right after the hook")
	for start := uintptr(0); start < 64; start += 32 {
		first, last := (start+unsafe.Offsetof(e.capture))/64, (start+unsafe.Offsetof(e.obj)+8-1)/64
		assert.Equal(t, first, last, "an Event starting %d bytes into a line", start)
	}
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
