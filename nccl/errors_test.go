package nccl_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/nccl"
)

// TestStatusValues: the sentinels are NCCL's result codes.
func TestStatusValues(t *testing.T) {
	for s, r := range map[nccl.Status]ncclraw.Result{
		nccl.ErrUnhandledCUDA: ncclraw.UnhandledCudaError, nccl.ErrSystem: ncclraw.SystemError,
		nccl.ErrInternal: ncclraw.InternalError, nccl.ErrInvalidArgument: ncclraw.InvalidArgument,
		nccl.ErrInvalidUsage: ncclraw.InvalidUsage, nccl.ErrRemote: ncclraw.RemoteError,
		nccl.ErrInProgress: ncclraw.InProgress,
	} {
		assert.Equal(t, int32(r), int32(s), r.String())
		assert.Equal(t, r.String(), s.String())
		assert.NotEqual(t, "unknown status", s.Message())
	}
}

func TestStatusText(t *testing.T) {
	assert.Equal(t, "ncclUnhandledCudaError (1): unhandled CUDA error", nccl.ErrUnhandledCUDA.Error())
	assert.Equal(t, "ncclRemoteError (6): remote error", nccl.ErrRemote.Error())
	assert.Equal(t, "ncclInProgress (7): operation in progress", nccl.ErrInProgress.Error())
	assert.Equal(t, "ncclResult_t(99) (99): unknown status", nccl.Status(99).Error())
	assert.Equal(t, "ncclResult_t(-3) (-3): unknown status", nccl.Status(-3).Error())
	assert.Equal(t, "no error", nccl.Status(0).Message())
}

func TestErrorText(t *testing.T) {
	err := &nccl.Error{Func: "ncclCommInitRank", Code: nccl.ErrInvalidArgument,
		Text: "invalid argument (run with NCCL_DEBUG=WARN for details)", Last: "Invalid config blocking attribute value -5"}
	assert.Equal(t, "ncclCommInitRank: ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details); last error: Invalid config blocking attribute value -5", err.Error())
	err.Last = ""
	assert.Equal(t, "ncclCommInitRank: ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details)", err.Error())
	err.Last = err.Text
	assert.Equal(t, "ncclCommInitRank: ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details)", err.Error(), "a last error that repeats the text is said once")
}

func TestErrorIs(t *testing.T) {
	var err error = &nccl.Error{Func: "ncclGroupEnd", Code: nccl.ErrRemote, Text: "remote process exited or there was a network error"}
	assert.ErrorIs(t, err, nccl.ErrRemote)
	assert.ErrorIs(t, err, ncclraw.RemoteError)
	assert.NotErrorIs(t, err, nccl.ErrSystem)
	assert.NotErrorIs(t, err, nccl.ErrNotSupported)
	assert.NotErrorIs(t, err, driver.ErrInvalidArgument)
	var e *nccl.Error
	assert.True(t, errors.As(err, &e))
	assert.Equal(t, nccl.ErrRemote, e.Code)

	err = &nccl.Error{Func: "ncclAllReduce", Code: nccl.ErrInvalidArgument}
	assert.ErrorIs(t, err, nccl.ErrInvalidArgument)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "NCCL's refusal of an argument is an invalid argument to driver's test too")
}
