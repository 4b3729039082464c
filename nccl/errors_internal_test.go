package nccl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/errs"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/ncclraw"
	"github.com/purecuda/cuda/loader"
)

// TestWrapKinds: a failed call becomes *Error; a missing library, an
// unsupported platform or a missing function an error matching
// ErrNotSupported that keeps what went wrong.
func TestWrapKinds(t *testing.T) {
	assert.NoError(t, wrap(nil, 0))

	nf := &loader.NotFoundError{Library: loader.KindNCCL, EnvVar: "PURECUDA_LIBNCCL", Tried: []loader.Attempt{{Path: "libnccl.so.2", Reason: "cannot open shared object file"}}}
	err := wrap(nf, 0)
	assert.ErrorIs(t, err, ErrNotSupported)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.Equal(t, "nccl: not supported: "+nf.Error(), err.Error())
	var got *loader.NotFoundError
	require.ErrorAs(t, err, &got)
	assert.Equal(t, nf.Tried, got.Tried, "where the loader looked is kept")

	up := &loader.UnsupportedPlatformError{Library: loader.KindNCCL, GOOS: "windows", GOARCH: "amd64"}
	err = wrap(up, 0)
	assert.ErrorIs(t, err, ErrNotSupported)
	assert.ErrorIs(t, err, loader.ErrUnsupportedPlatform)
	assert.Contains(t, err.Error(), "NVIDIA ships it for Linux only")

	se := &ncclraw.SymbolError{Func: "ncclCommShrink", Path: "/x/libnccl.so.2", Err: errors.New("undefined symbol")}
	err = wrap(se, 0)
	assert.ErrorIs(t, err, ErrNotSupported)
	assert.Contains(t, err.Error(), "ncclCommShrink: not exported by /x/libnccl.so.2")

	err = wrap(&ncclraw.Error{Func: "ncclCommCount", Code: ncclraw.InvalidUsage}, 0)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "ncclCommCount", e.Func)
	assert.Equal(t, ErrInvalidUsage, e.Code)
	assert.NotEmpty(t, e.Text)
	assert.NotErrorIs(t, err, ErrNotSupported)
}

// TestNewErrorWithoutLibrary: with no libnccl to describe it, an error
// carries the status's own message and no last error.
func TestNewErrorWithoutLibrary(t *testing.T) {
	if _, err := ncclraw.Load(); err == nil {
		t.Skip("libnccl is present here: its texts are checked by TestErrorTextsFromLibrary")
	}
	e := newError("ncclCommInitRank", ErrSystem, 0)
	assert.Equal(t, &Error{Func: "ncclCommInitRank", Code: ErrSystem, Text: "system error"}, e)
	assert.Equal(t, "ncclCommInitRank: ncclSystemError (2): system error", e.Error())
}

func TestGoString(t *testing.T) {
	assert.Equal(t, "", goString(nil))
	b := []byte("remote process exited\x00junk")
	assert.Equal(t, "remote process exited", goString(&b[0]))
	long := make([]byte, 3000) // no NUL in reach: at most maxMessage bytes are read
	for i := range long {
		long[i] = 'x'
	}
	assert.Len(t, goString(&long[0]), maxMessage)
}

func TestArgErrorMatches(t *testing.T) {
	err := invalid("count %d", -1)
	assert.Equal(t, "nccl: count -1", err.Error())
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorIs(t, err, errs.InvalidArgument)
	assert.NotErrorIs(t, err, ErrInvalidUsage)
	assert.NotErrorIs(t, err, ErrNotSupported)
}

// TestErrorTextsFromLibrary: a call a real libnccl fails carries NCCL's
// own texts. ncclGetUniqueId refuses a NULL out pointer (which the raw
// table passes for a nil *UniqueId) with ncclInvalidArgument and a
// warning, which NCCL records as its last error whatever NCCL_DEBUG says.
func TestErrorTextsFromLibrary(t *testing.T) {
	if _, err := ncclraw.Load(); err != nil {
		gputest.Skip(t, "libnccl not found: "+err.Error())
	}
	err := wrap(ncclraw.GetUniqueId(nil), 0)
	var e *Error
	require.ErrorAs(t, err, &e)
	t.Logf("%v", err)
	assert.Equal(t, "ncclGetUniqueId", e.Func)
	assert.Equal(t, ErrInvalidArgument, e.Code)
	assert.Contains(t, e.Text, "invalid argument")
	assert.NotEmpty(t, e.Last, "NCCL's warning about the NULL argument")
	assert.ErrorIs(t, err, ErrInvalidArgument)
}
