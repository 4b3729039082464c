package nccl

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDecodeVersion: NCCL's version codes before and after 2.9, as
// nccl.h's NCCL_VERSION macro writes them.
func TestDecodeVersion(t *testing.T) {
	for code, want := range map[int][3]int{
		22803: {2, 28, 3},
		22809: {2, 28, 9},
		21805: {2, 18, 5},
		20900: {2, 9, 0},
		2804:  {2, 8, 4},
		2708:  {2, 7, 8},
		30000: {3, 0, 0},
	} {
		major, minor, patch := decodeVersion(code)
		assert.Equal(t, want, [3]int{major, minor, patch}, "%d", code)
	}
}
