//go:build linux

package cublasraw_test

import (
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/faketest"
)

// Helpers of the tests of fakecublas (testdata/fakecublas.c), which run
// in a child process with fakecuda as libcuda: the fake is tested through
// the raw tables only.

// fenv is a test's fake device: the primary context, current on the
// test's locked OS thread, a non-blocking stream and a cuBLAS handle.
type fenv struct {
	ctx cu.CUcontext
	s   cu.CUstream
	h   cublasraw.Handle
}

// newEnv sets up fenv; when t ends the handle is destroyed, the context
// released, and no bad use may have been counted unless t expected some
// (it then calls fake_cublas_reset and faketest's reset).
func newEnv(t *testing.T) *fenv {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	require.NoError(t, cu.Init(0))
	var dev cu.CUdevice
	require.NoError(t, cu.DeviceGet(&dev, 0))
	e := &fenv{}
	require.NoError(t, cu.DevicePrimaryCtxRetain(&e.ctx, dev))
	require.NoError(t, cu.CtxSetCurrent(e.ctx))
	require.NoError(t, cu.StreamCreate(&e.s, uint32(cu.CU_STREAM_NON_BLOCKING)))
	require.NoError(t, cublasraw.Create(&e.h))
	require.NoError(t, cublasraw.SetStream(e.h, cublasraw.Stream(e.s)))
	t.Cleanup(func() {
		require.NoError(t, cu.CtxSetCurrent(e.ctx))
		assert.NoError(t, cublasraw.Destroy(e.h))
		assert.Zero(t, faketest.CUBLAS(t, "fake_cublas_live_handles"))
		assert.NoError(t, cu.StreamDestroy(e.s))
		assert.NoError(t, cu.DevicePrimaryCtxRelease(dev))
		assert.Zero(t, faketest.CUBLAS(t, "fake_cublas_bad_uses"), faketest.CUBLASLastBad(t))
		faketest.NoBadUses(t)
	})
	return e
}

// expectBad checks that fakecublas counted n bad uses, the last described
// with want, and forgets them (and fakecuda's) for the check at the end.
func expectBad(t *testing.T, n int64, want string) {
	t.Helper()
	assert.Equal(t, n, faketest.CUBLAS(t, "fake_cublas_bad_uses"))
	assert.Contains(t, faketest.CUBLASLastBad(t), want)
	faketest.CUBLAS(t, "fake_cublas_reset")
	faketest.Call(t, "fake_reset_counters")
}

// sync waits for the stream.
func (e *fenv) sync(t *testing.T) {
	t.Helper()
	require.NoError(t, cu.StreamSynchronize(e.s))
}

// upload is device memory holding v (freed with the context).
func upload[T any](t *testing.T, v []T) uintptr {
	t.Helper()
	size := uintptr(len(v)) * unsafe.Sizeof(v[0])
	var p cu.CUdeviceptr
	require.NoError(t, cu.MemAlloc(&p, size))
	require.NoError(t, cu.MemcpyHtoD(p, unsafe.Pointer(&v[0]), size))
	return uintptr(p)
}

// download reads n elements at p.
func download[T any](t *testing.T, p uintptr, n int) []T {
	t.Helper()
	out := make([]T, n)
	require.NoError(t, cu.MemcpyDtoH(unsafe.Pointer(&out[0]), cu.CUdeviceptr(p), uintptr(n)*unsafe.Sizeof(out[0])))
	return out
}

var kept struct {
	sync.Mutex
	v []any
}

// host is a heap copy of v, kept alive for the test binary's life, and
// its address for cuBLAS (a host scalar or result).
func host[T any](v T) (*T, uintptr) {
	p := new(T)
	*p = v
	kept.Lock()
	kept.v = append(kept.v, p)
	kept.Unlock()
	return p, uintptr(unsafe.Pointer(p))
}

// gate queues fakecuda's fake_gate_fn for slot on s: work queued after it
// waits until fake_open_gate(slot).
func gate(t *testing.T, s cu.CUstream, slot uintptr) {
	t.Helper()
	faketest.Call(t, "fake_close_gate", slot)
	require.NoError(t, cu.LaunchHostFunc(s, cu.CUhostFn(faketest.Sym(t, "fake_gate_fn")), slot))
}

// ints is n small integers, different in each of a few patterns.
func ints(n, seed int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64((i*seed+3*seed+i/3)%7 - 3)
	}
	return v
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// refGemm is C = alpha op(A) op(B) + beta C, column-major, in plain Go.
func refGemm(ta, tb bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) []float64 {
	out := append([]float64(nil), c...)
	at := func(i, l int) float64 {
		if ta {
			return a[l+i*lda]
		}
		return a[i+l*lda]
	}
	bt := func(l, j int) float64 {
		if tb {
			return b[j+l*ldb]
		}
		return b[l+j*ldb]
	}
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var acc float64
			for l := 0; l < k; l++ {
				acc += at(i, l) * bt(l, j)
			}
			out[i+j*ldc] = alpha*acc + beta*c[i+j*ldc]
		}
	}
	return out
}

// host1 is the address of a heap copy of v, for a host-to-device copy.
func host1[T any](v T) unsafe.Pointer {
	p, _ := host(v)
	return unsafe.Pointer(p)
}
