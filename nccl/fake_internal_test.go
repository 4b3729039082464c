//go:build linux

package nccl

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/ncclraw"
)

// TestErrorFromFake: a failed call's *Error carries the library's
// description of the status and its last error message.
func TestErrorFromFake(t *testing.T) {
	if !faketest.InNCCLChild(t) {
		return
	}
	err := wrap(ncclraw.GetUniqueId(nil), 0)
	assert.Equal(t, &Error{Func: "ncclGetUniqueId", Code: ErrInvalidArgument,
		Text: "fake: invalid argument (run with NCCL_DEBUG=WARN for details)", Last: "GetUniqueId : out argument is NULL"}, err)
	assert.EqualError(t, err, "ncclGetUniqueId: ncclInvalidArgument (4): fake: invalid argument (run with NCCL_DEBUG=WARN for details); last error: GetUniqueId : out argument is NULL")
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// TestMissingFunctionFromFake: a function the libnccl found lacks (an
// older NCCL) is ErrNotSupported, naming the function and the library.
func TestMissingFunctionFromFake(t *testing.T) {
	if !faketest.InNCCLChild(t) {
		return
	}
	var handle uintptr
	err := wrap(ncclraw.CommRegister(0, 0, 0, &handle), 0)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNotSupported)
	assert.ErrorIs(t, err, ncclraw.ErrNotSupported)
	assert.Contains(t, err.Error(), "nccl: not supported: ncclCommRegister: not exported by "+os.Getenv("PURECUDA_LIBNCCL"))
}
