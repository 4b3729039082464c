package cublas

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestIamaxIndex: Iamax's 1-based cuBLAS index becomes 0-based, 0 (an
// empty vector) -1; the 64-bit call's int64 index is taken whole, even
// between 2^31 and 2^32 (a vector of more than 2^31 elements), where the
// 32-bit call's int could never be.
func TestIamaxIndex(t *testing.T) {
	for _, wide := range []bool{false, true} {
		assert.Equal(t, -1, iamaxIndex(0, wide), "empty, wide %v", wide)
		assert.Equal(t, 0, iamaxIndex(1, wide), "wide %v", wide)
		assert.Equal(t, 1<<31-2, iamaxIndex(1<<31-1, wide), "wide %v", wide)
	}
	assert.Equal(t, 1<<31-1, iamaxIndex(1<<31, true))
	assert.Equal(t, 3_000_000_000, iamaxIndex(3_000_000_001, true))
	assert.Equal(t, 1<<32-1, iamaxIndex(1<<32, true))
	assert.Equal(t, 5_000_000_000, iamaxIndex(5_000_000_001, true))
}
