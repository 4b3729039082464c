//go:build linux

package fakedriver_test

// Helpers of the model tests (model_*_test.go): fakecuda driven through
// the raw table, with no package driver in between.

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/gputest"
)

// modelCtx makes device 0's primary context current on a locked thread,
// resets the bad-use counters, and undoes every slow-down and error the
// test may set.
func modelCtx(t *testing.T) cu.CUcontext {
	t.Helper()
	need(t)
	// What earlier tests dropped is released now, not during this test:
	// a module's unload synchronises the context (invalidating a raw
	// capture here) and moves the live counters (go test -shuffle puts
	// any test after any other).
	gcAll()
	fcall(t, "fake_quiesce", 30000)
	ctx := gputest.PrimaryContext(t)
	fcall(t, "fake_reset_counters")
	fcall(t, "fake_reset_log")
	t.Cleanup(func() {
		fcall(t, "fake_set_copy_delay_us", 0)
		fcall(t, "fake_set_kernel_delay_us", 0)
		fcall(t, "fake_clear_sticky_error")
		fcall(t, "fake_fail_clear")
		assert.Equal(t, int64(1), fcall(t, "fake_quiesce", 30000), "every queue drained")
		// The model tests make bad uses on purpose and check them
		// themselves: none is left for the next test (go test -shuffle).
		fcall(t, "fake_reset_counters")
	})
	return ctx
}

func mStream(t *testing.T) cu.CUstream {
	t.Helper()
	var s cu.CUstream
	require.NoError(t, cu.StreamCreate(&s, 1))
	return s
}

func mEvent(t *testing.T) cu.CUevent {
	t.Helper()
	var e cu.CUevent
	require.NoError(t, cu.EventCreate(&e, uint32(cu.CU_EVENT_DISABLE_TIMING)))
	return e
}

func mAlloc(t *testing.T, n uintptr) cu.CUdeviceptr {
	t.Helper()
	var p cu.CUdeviceptr
	require.NoError(t, cu.MemAlloc(&p, n))
	return p
}

// mPtr turns a number into an unsafe.Pointer without a conversion vet
// or checkptr would question: user data for callbacks, fake device memory.
func mPtr[T ~uint64 | ~uintptr](v T) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&v))
}

// mNoContext runs f on a fresh OS thread that has no current context.
func mNoContext(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f()
	}()
	<-done
}

func mHostFn(t testing.TB, name string) cu.CUhostFn { return cu.CUhostFn(faketest.Sym(t, name)) }

func mLoadFake(t *testing.T) (cu.CUmodule, map[string]cu.CUfunction) {
	t.Helper()
	img := []byte("FAKE module\x00")
	var m cu.CUmodule
	require.NoError(t, cu.ModuleLoadData(&m, unsafe.Pointer(&img[0])))
	fs := map[string]cu.CUfunction{}
	for _, name := range []string{"empty", "add4", "fill", "copyi"} {
		var f cu.CUfunction
		require.NoError(t, cu.ModuleGetFunction(&f, m, mCstr(name)))
		fs[name] = f
	}
	return m, fs
}

func mCstr(s string) *byte { b := append([]byte(s), 0); return &b[0] }

// mFillArgs are the arguments of fill(int *out, int v, int n).
type mFillArgs struct {
	p    uint64
	v, n int32
	ptrs [3]unsafe.Pointer
}

func mFill(p cu.CUdeviceptr, v, n int32) *mFillArgs {
	a := &mFillArgs{p: uint64(p), v: v, n: n}
	a.ptrs = [3]unsafe.Pointer{unsafe.Pointer(&a.p), unsafe.Pointer(&a.v), unsafe.Pointer(&a.n)}
	return a
}

func mLaunchFill(f cu.CUfunction, s cu.CUstream, a *mFillArgs) error {
	return cu.LaunchKernel(f, 1, 1, 1, uint32(max(a.n, 1)), 1, 1, 0, s, &a.ptrs[0], nil)
}

func mReadInts(t *testing.T, p cu.CUdeviceptr, n int) []int32 {
	t.Helper()
	out := make([]int32, n)
	require.NoError(t, cu.MemcpyDtoH(unsafe.Pointer(&out[0]), p, uintptr(4*n)))
	return out
}

func mSeq(v, n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = v + int32(i)
	}
	return out
}

func mDeps(ns ...cu.CUgraphNode) (*cu.CUgraphNode, uintptr) {
	if len(ns) == 0 {
		return nil, 0
	}
	return &ns[0], uintptr(len(ns))
}

func mGraph(t *testing.T) cu.CUgraph {
	t.Helper()
	var g cu.CUgraph
	require.NoError(t, cu.GraphCreate(&g, 0))
	return g
}

func mKernelNode(t *testing.T, g cu.CUgraph, f cu.CUfunction, a *mFillArgs, after ...cu.CUgraphNode) cu.CUgraphNode {
	t.Helper()
	var n cu.CUgraphNode
	kp := cu.CUDA_KERNEL_NODE_PARAMS_v2{Func: f, GridDimX: 1, GridDimY: 1, GridDimZ: 1, BlockDimX: uint32(max(a.n, 1)),
		BlockDimY: 1, BlockDimZ: 1, KernelParams: &a.ptrs[0]}
	d, nd := mDeps(after...)
	require.NoError(t, cu.GraphAddKernelNode(&n, g, d, nd, &kp))
	return n
}

func mCopy(src, dst unsafe.Pointer, srcDev, dstDev cu.CUdeviceptr, n uintptr) cu.CUDA_MEMCPY3D_v2 {
	p := cu.CUDA_MEMCPY3D_v2{WidthInBytes: n, Height: 1, Depth: 1}
	if src != nil {
		p.SrcMemoryType, p.SrcHost = cu.CU_MEMORYTYPE_HOST, src
	} else {
		p.SrcMemoryType, p.SrcDevice = cu.CU_MEMORYTYPE_DEVICE, srcDev
	}
	if dst != nil {
		p.DstMemoryType, p.DstHost = cu.CU_MEMORYTYPE_HOST, dst
	} else {
		p.DstMemoryType, p.DstDevice = cu.CU_MEMORYTYPE_DEVICE, dstDev
	}
	return p
}

func mHostNode(t *testing.T, g cu.CUgraph, fn string, data uintptr, after ...cu.CUgraphNode) cu.CUgraphNode {
	t.Helper()
	var n cu.CUgraphNode
	hp := cu.CUDA_HOST_NODE_PARAMS_v1{Fn: mHostFn(t, fn), UserData: data}
	d, nd := mDeps(after...)
	require.NoError(t, cu.GraphAddHostNode(&n, g, d, nd, &hp))
	return n
}

func mEmptyNode(t *testing.T, g cu.CUgraph, after ...cu.CUgraphNode) cu.CUgraphNode {
	t.Helper()
	var n cu.CUgraphNode
	d, nd := mDeps(after...)
	require.NoError(t, cu.GraphAddEmptyNode(&n, g, d, nd))
	return n
}

func mInstantiate(t *testing.T, g cu.CUgraph, flags uint64) cu.CUgraphExec {
	t.Helper()
	var x cu.CUgraphExec
	require.NoError(t, cu.GraphInstantiateWithFlags(&x, g, flags))
	return x
}

func mNodes(t *testing.T, query func(*cu.CUgraphNode, *uintptr) error) []cu.CUgraphNode {
	t.Helper()
	var n uintptr
	require.NoError(t, query(nil, &n))
	if n == 0 {
		return nil
	}
	out := make([]cu.CUgraphNode, n)
	require.NoError(t, query(&out[0], &n))
	return out[:n]
}

func mCaptureStatus(t *testing.T, s cu.CUstream) cu.CUstreamCaptureStatus {
	t.Helper()
	var st cu.CUstreamCaptureStatus
	require.NoError(t, cu.StreamIsCapturing(s, &st))
	return st
}
