package ncclraw_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/loader"
)

func TestResultErrors(t *testing.T) {
	err := error(&ncclraw.Error{Func: "ncclCommInitRank", Code: ncclraw.InvalidUsage})
	assert.Equal(t, "ncclCommInitRank: ncclInvalidUsage (5)", err.Error())
	assert.ErrorIs(t, err, ncclraw.InvalidUsage)
	assert.NotErrorIs(t, err, ncclraw.InvalidArgument)
	assert.Equal(t, "ncclInProgress", ncclraw.InProgress.Name())
	assert.Equal(t, "ncclResult_t(99)", ncclraw.Result(99).Name())
	assert.Equal(t, "ncclResult_t(-1)", ncclraw.Result(-1).Name())
	assert.Equal(t, "ncclSum", ncclraw.Sum.String())
	assert.Equal(t, "ncclInt8", ncclraw.Char.String(), "an alias is named by its first name")
}

func TestSymbolError(t *testing.T) {
	inner := errors.New("undefined symbol: ncclCommShrink")
	err := error(&ncclraw.SymbolError{Func: "ncclCommShrink", Path: "/x/libnccl.so.2", Err: inner})
	assert.Equal(t, "ncclCommShrink: not exported by /x/libnccl.so.2: undefined symbol: ncclCommShrink", err.Error())
	assert.ErrorIs(t, err, ncclraw.ErrNotSupported)
	assert.ErrorIs(t, err, inner)
}

// TestWithoutNCCL: with no libnccl, every call returns the loader's error
// listing where it looked, and nothing panics.
func TestWithoutNCCL(t *testing.T) {
	if path, err := ncclraw.Load(); err == nil {
		t.Skipf("NCCL is present here (%s); the missing-library path is covered by package nccl's tests with a missing override", path)
	}
	var v int32
	err := ncclraw.GetVersion(&v)
	require.Error(t, err)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.Contains(t, err.Error(), "NCCL library not found")
	assert.Contains(t, err.Error(), "PURECUDA_LIBNCCL")
	s, err := ncclraw.GetErrorString(ncclraw.InvalidUsage)
	assert.Nil(t, s)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	var id ncclraw.UniqueId
	var comm ncclraw.Comm
	assert.ErrorIs(t, ncclraw.CommInitRank(&comm, 2, id, 0), loader.ErrNotFound)
	res := ncclraw.ResolveAll()
	assert.NotEmpty(t, res)
	for _, r := range res {
		assert.ErrorIs(t, r.Err, loader.ErrNotFound, r.Func)
	}
}
