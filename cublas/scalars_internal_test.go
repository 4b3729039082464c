package cublas

import (
	"unsafe"

	"testing"

	"github.com/stretchr/testify/assert"
)

// TestScalarSlotsAligned: alpha, beta and a host result sit at 16-byte
// aligned addresses, 16 bytes apart, inside the state (cuBLAS reads
// complex128 scalars with 16-byte vector loads, which fault otherwise),
// for states at any of the addresses Go's allocator gives.
func TestScalarSlotsAligned(t *testing.T) {
	defer func() { escaped = nil }()
	for range 64 {
		st := new(handleState)
		escaped = st // on the heap, as a Handle's state is: the stack moves
		lo := uintptr(unsafe.Pointer(&st.scratch[0]))
		hi := lo + uintptr(len(st.scratch))
		for i := slotAlpha; i <= slotResult; i++ {
			p := uintptr(st.slot(i))
			assert.Zero(t, p%16, "slot %d at %#x", i, p)
			assert.True(t, p >= lo && p+16 <= hi, "slot %d inside the scratch", i)
		}
		a, b := scalars(st, complex(1.5, -2), complex(3, 4))
		assert.Equal(t, uintptr(st.slot(slotAlpha)), a)
		assert.Equal(t, uintptr(st.slot(slotBeta)), b)
		assert.Equal(t, complex(1.5, -2), *(*complex128)(st.slot(slotAlpha)))
		assert.Equal(t, complex(3, 4), *(*complex128)(st.slot(slotBeta)))
	}
}

var escaped *handleState

// TestHandleStateHotFieldsTogether: what Gemm's quick path reads of the
// handle's state (besides the scalars and its sequence) lies within its
// first 64 bytes.
func TestHandleStateHotFieldsTogether(t *testing.T) {
	var st handleState
	end := unsafe.Offsetof(st.gemmFn) + unsafe.Sizeof(st.gemmFn)
	assert.LessOrEqual(t, end, uintptr(64))
	for _, off := range []uintptr{unsafe.Offsetof(st.h), unsafe.Offsetof(st.cuctx), unsafe.Offsetof(st.s), unsafe.Offsetof(st.mu)} {
		assert.Less(t, off, end)
	}
}
