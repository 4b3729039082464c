package nccl

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestCommStateHotFieldsTogether: what an operation reads of its
// communicator's state lies within its first 64 bytes, so at most two
// cache lines (one when the state starts a line), which NCCL's and CUDA's
// calls evict between operations.
func TestCommStateHotFieldsTogether(t *testing.T) {
	var st commState
	for name, end := range map[string]uintptr{
		"h":           unsafe.Offsetof(st.h) + unsafe.Sizeof(st.h),
		"cuctx":       unsafe.Offsetof(st.cuctx) + unsafe.Sizeof(st.cuctx),
		"dev":         unsafe.Offsetof(st.dev) + unsafe.Sizeof(st.dev),
		"nonBlocking": unsafe.Offsetof(st.nonBlocking) + unsafe.Sizeof(st.nonBlocking),
		"phase":       unsafe.Offsetof(st.phase) + unsafe.Sizeof(st.phase),
		"last":        unsafe.Offsetof(st.last) + unsafe.Sizeof(st.last),
	} {
		assert.LessOrEqual(t, end, uintptr(64), name)
	}
}
