// Package gputest decides, for tests, whether a GPU is there to test on.
//
// A test that needs a GPU calls Require. Without a driver or device it skips
// with the reason; with PURECUDA_REQUIRE_GPU set (the GPU machine's runs) a
// missing GPU fails the test instead, so nothing skips silently there.
package gputest

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
)

var probe = sync.OnceValue(func() error {
	if _, _, err := cu.Load(); err != nil {
		return err
	}
	if err := cu.Init(0); err != nil {
		return err
	}
	var n int32
	if err := cu.DeviceGetCount(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("the driver reports no CUDA device")
	}
	return nil
})

// Required reports whether PURECUDA_REQUIRE_GPU asks for GPU tests to fail
// rather than skip.
func Required() bool { return os.Getenv("PURECUDA_REQUIRE_GPU") != "" }

// Require skips t (or fails it under PURECUDA_REQUIRE_GPU) unless the CUDA
// driver loads, initialises and reports a device. The skip is counted for
// the summary Main prints.
func Require(tb testing.TB) {
	tb.Helper()
	if err := probe(); err != nil {
		if Required() {
			tb.Fatalf("PURECUDA_REQUIRE_GPU is set but no GPU is usable: %v", err)
		}
		tb.Log(err)
		Skip(tb, shortReason(err))
	}
}

// PrimaryContext retains device 0's primary context, makes it current on a
// locked OS thread, and undoes both when the test ends. It is for tests of the
// raw table only; package driver does this itself.
func PrimaryContext(tb testing.TB) cu.CUcontext {
	tb.Helper()
	Require(tb)
	runtime.LockOSThread()
	var dev cu.CUdevice
	if err := cu.DeviceGet(&dev, 0); err != nil {
		tb.Fatal(err)
	}
	var ctx cu.CUcontext
	if err := cu.DevicePrimaryCtxRetain(&ctx, dev); err != nil {
		tb.Fatal(err)
	}
	if err := cu.CtxSetCurrent(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cu.CtxSetCurrent(0)
		_ = cu.DevicePrimaryCtxRelease(dev)
		runtime.UnlockOSThread()
	})
	return ctx
}

// EmptyKernelPTX is a PTX module with one kernel, "empty", that does nothing,
// and one, "add4", that stores a+b+c into *out (its parameters are out, a, b, c).
const EmptyKernelPTX = `
.version 8.0
.target sm_75
.address_size 64

.visible .entry empty()
{
	ret;
}

.visible .entry add4(.param .u64 out, .param .u32 a, .param .u32 b, .param .u32 c)
{
	.reg .u64 %rd<3>;
	.reg .u32 %r<6>;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	ld.param.u32 %r1, [a];
	ld.param.u32 %r2, [b];
	ld.param.u32 %r3, [c];
	add.u32 %r4, %r1, %r2;
	add.u32 %r5, %r4, %r3;
	st.global.u32 [%rd2], %r5;
	ret;
}
`

// Allocated reports whether the driver still knows device address ptr as
// an allocation (cuPointerGetAttribute): for tests that check that
// memory was, or was not yet, freed.
func Allocated(ptr uintptr) bool {
	var ctx cu.CUcontext
	return cu.PointerGetAttribute(unsafe.Pointer(&ctx), cu.CU_POINTER_ATTRIBUTE_CONTEXT, cu.CUdeviceptr(ptr)) == nil
}
