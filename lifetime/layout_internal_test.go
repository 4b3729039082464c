package lifetime

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// What Acquire and Release read of an Object (the count and the closed
// flag) lies in its first 16 bytes, and the whole is 48 bytes, so that the
// driver's Function and allocation keep them in the cache line a launch
// reads.
func TestObjectLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is tuned for 64-bit platforms")
	}
	var o Object
	assert.Equal(t, uintptr(0), unsafe.Offsetof(o.refs))
	assert.LessOrEqual(t, unsafe.Offsetof(o.closed)+unsafe.Sizeof(o.closed), uintptr(16))
	assert.Equal(t, uintptr(48), unsafe.Sizeof(o))
}
