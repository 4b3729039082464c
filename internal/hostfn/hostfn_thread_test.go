//go:build linux && (amd64 || arm64)

package hostfn_test

import (
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/tables"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// onForeignThread runs the trampoline on a thread that C created (with
// pthread_create, as CUDA creates its callback threads) with id as its
// argument, and waits for the thread to end.
func onForeignThread(t *testing.T, id uintptr) {
	t.Helper()
	fn, err := hostfn.HostFn()
	require.NoError(t, err)
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Skipf("no libc.so.6 to create a thread with: %v", err)
	}
	create, err := purego.Dlsym(libc, "pthread_create")
	require.NoError(t, err)
	join, err := purego.Dlsym(libc, "pthread_join")
	require.NoError(t, err)
	tid := new(uint64) // pthread_t; pinned while C writes it
	var pin runtime.Pinner
	pin.Pin(tid)
	defer pin.Unpin()
	// The trampoline has the start routine's shape: void *(*)(void *).
	r, _, _ := purego.SyscallN(create, uintptr(unsafe.Pointer(tid)), 0, fn, id)
	require.Zero(t, r, "pthread_create")
	r, _, _ = purego.SyscallN(join, uintptr(*tid), 0)
	require.Zero(t, r, "pthread_join")
}

// Invariant I6: on a thread the Go runtime did not create — where CUDA
// calls host functions and destructors — a callback runs, a panic is
// contained, and runtime.Goexit (t.FailNow) is contained instead of
// aborting the process with "Goexit called in a thread that was not
// created by the Go runtime".
func TestHostFnOnForeignThread_I6(t *testing.T) {
	var ran atomic.Int32
	onForeignThread(t, hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true}))
	assert.EqualValues(t, 1, ran.Load())

	sink := &recordingSink{}
	onForeignThread(t, hostfn.Register(hostfn.Callback{Fn: panickyCallback, Once: true, Sink: sink}))
	var deferred atomic.Bool
	onForeignThread(t, hostfn.Register(hostfn.Callback{Fn: func() { goexitingCallback(&deferred) }, Once: true, Sink: sink}))
	assert.True(t, deferred.Load())
	vals, _ := sink.got()
	require.Len(t, vals, 2)
	assert.Equal(t, "host function failed", vals[0])
	assert.IsType(t, &hostfn.Goexited{}, vals[1])

	// A table destructor from a CUDA thread only queues the release.
	tab := tables.New()
	var released atomic.Int32
	require.NoError(t, tab.Add(1, lifetime.OwnerFunc(func() error { released.Add(1); return nil })))
	did, err := tab.DestructorID()
	require.NoError(t, err)
	onForeignThread(t, did)
	lifetime.Flush()
	assert.True(t, tab.Released())
	assert.EqualValues(t, 1, released.Load())

	onForeignThread(t, 0) // an unknown id on a foreign thread: nothing
	onForeignThread(t, hostfn.Register(hostfn.Callback{Fn: func() { ran.Add(1) }, Once: true}))
	assert.EqualValues(t, 2, ran.Load(), "still working")
}
