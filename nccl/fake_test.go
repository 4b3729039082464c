//go:build linux

package nccl_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/nccl"
)

// TestVersionFromFake decodes the version codes of NCCL since 2.9 and
// before (fakenccl reports FAKE_NCCL_VERSION).
func TestVersionFromFake(t *testing.T) {
	if !faketest.InNCCLChild(t, "FAKE_NCCL_VERSION=22803") {
		return
	}
	major, minor, patch, err := nccl.Version()
	require.NoError(t, err)
	assert.Equal(t, [3]int{2, 28, 3}, [3]int{major, minor, patch})
}

func TestOldVersionFromFake(t *testing.T) {
	if !faketest.InNCCLChild(t, "FAKE_NCCL_VERSION=2804") {
		return
	}
	major, minor, patch, err := nccl.Version()
	require.NoError(t, err)
	assert.Equal(t, [3]int{2, 8, 4}, [3]int{major, minor, patch})
}

// TestNewUniqueIDFromFake: the ID is NCCL's 128 bytes, each call's its own.
func TestNewUniqueIDFromFake(t *testing.T) {
	if !faketest.InNCCLChild(t) {
		return
	}
	a, err := nccl.NewUniqueID()
	require.NoError(t, err)
	b, err := nccl.NewUniqueID()
	require.NoError(t, err)
	var want nccl.UniqueID // fakenccl's first ID: byte i is 31 + 7i
	for i := range want {
		want[i] = byte(31 + 7*i)
	}
	assert.Equal(t, want, a)
	assert.NotEqual(t, a, b)
}
