//go:build linux

package ncclraw_test

import (
	"os"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/ncclraw"
)

// lastInit reads back, through fakenccl's fake_last_init, what its
// ncclCommInitRank or ncclCommInitRankConfig last received.
func lastInit(t *testing.T) (id [128]byte, nranks, rank int32, config uintptr) {
	t.Helper()
	h, err := purego.Dlopen(os.Getenv("PURECUDA_LIBNCCL"), purego.RTLD_NOW|purego.RTLD_LOCAL)
	require.NoError(t, err)
	fn, err := purego.Dlsym(h, "fake_last_init")
	require.NoError(t, err)
	purego.SyscallN(fn, uintptr(unsafe.Pointer(&id)), uintptr(unsafe.Pointer(&nranks)), uintptr(unsafe.Pointer(&rank)), uintptr(unsafe.Pointer(&config)))
	return id, nranks, rank, config
}

func pattern(seed byte) ncclraw.UniqueId {
	var id ncclraw.UniqueId
	for i := range id.Internal {
		id.Internal[i] = seed + byte(i)*13
	}
	return id
}

// TestCommInitRankPassesTheIDByValue: the 128-byte ID reaches C whole,
// between the integers, and C's changes to its copy stay there.
func TestCommInitRankPassesTheIDByValue(t *testing.T) {
	if !faketest.InNCCLChild(t) {
		return
	}
	id := pattern(5)
	var comm ncclraw.Comm
	require.NoError(t, ncclraw.CommInitRank(&comm, 4, id, 3))
	assert.Equal(t, ncclraw.Comm(0xC0FFEE), comm)
	got, nranks, rank, config := lastInit(t)
	assert.Equal(t, id.Internal, got)
	assert.Equal(t, [2]int32{4, 3}, [2]int32{nranks, rank})
	assert.Zero(t, config)
	assert.Equal(t, pattern(5), id, "the callee changed its own copy only")
}

// TestCommInitRankConfigPassesTheIDByValue: the same with the config
// pointer after the ID.
func TestCommInitRankConfigPassesTheIDByValue(t *testing.T) {
	if !faketest.InNCCLChild(t) {
		return
	}
	id := pattern(77)
	cfg := &ncclraw.Config{Size: unsafe.Sizeof(ncclraw.Config{}), Magic: 0xcafebeef, Version: ncclraw.NCCL_VERSION_CODE}
	var comm ncclraw.Comm
	require.NoError(t, ncclraw.CommInitRankConfig(&comm, 2, id, 1, cfg))
	got, nranks, rank, config := lastInit(t)
	assert.Equal(t, id.Internal, got)
	assert.Equal(t, [2]int32{2, 1}, [2]int32{nranks, rank})
	assert.Equal(t, uintptr(unsafe.Pointer(cfg)), config)
}

// TestCommInitRankAllocatesNothing: the ID travels in the pooled frame.
func TestCommInitRankAllocatesNothing(t *testing.T) {
	if gputest.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	if !faketest.InNCCLChild(t) {
		return
	}
	comm := new(ncclraw.Comm)
	id := pattern(1)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = ncclraw.CommInitRank(comm, 2, id, 0) }))
}

// TestFakeStatusAndMissingFunction: a status NCCL returns is an *Error, a
// function the library lacks a *SymbolError naming the library, and
// ResolveAll tells the two kinds of entry point apart.
func TestFakeStatusAndMissingFunction(t *testing.T) {
	if !faketest.InNCCLChild(t) {
		return
	}
	var comm ncclraw.Comm
	err := ncclraw.CommInitRank(&comm, 2, pattern(0), 5)
	assert.Equal(t, &ncclraw.Error{Func: "ncclCommInitRank", Code: ncclraw.InvalidArgument}, err)
	assert.Zero(t, comm)
	p, err := ncclraw.GetLastError(0)
	require.NoError(t, err)
	require.NotNil(t, p)
	assert.Equal(t, "Invalid rank requested", string(unsafe.Slice(p, len("Invalid rank requested"))))

	var handle uintptr
	err = ncclraw.CommRegister(comm, 0, 0, &handle)
	var se *ncclraw.SymbolError
	require.ErrorAs(t, err, &se)
	assert.ErrorIs(t, err, ncclraw.ErrNotSupported)
	assert.Equal(t, os.Getenv("PURECUDA_LIBNCCL"), se.Path)

	exported := map[string]bool{}
	for _, f := range fakeExports {
		exported[f] = true
	}
	for _, r := range ncclraw.ResolveAll() {
		if exported[r.Func] {
			assert.NoError(t, r.Err, r.Func)
		} else {
			assert.ErrorIs(t, r.Err, ncclraw.ErrNotSupported, r.Func)
		}
	}
}

// fakeExports are the functions fakenccl exports (its header says why
// the others are left out).
var fakeExports = []string{"ncclGetVersion", "ncclGetUniqueId", "ncclGetErrorString", "ncclGetLastError",
	"ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitAll", "ncclCommCount", "ncclCommUserRank",
	"ncclCommCuDevice", "ncclCommGetAsyncError", "ncclCommFinalize", "ncclCommDestroy", "ncclCommAbort",
	"ncclCommSplit", "ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter",
	"ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd"}
