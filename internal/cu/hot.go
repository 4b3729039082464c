package cu

import (
	"runtime"
	"unsafe"

	"github.com/purecuda/cuda/internal/ccall"
)

// PrepareLaunchFrame readies a frame that a caller keeps for
// LaunchKernelFrame: it resolves cuLaunchKernel and stores it in cf.Fn.
func PrepareLaunchFrame(cf *ccall.Frame) error {
	fn, err := procLaunchKernel.find()
	if err != nil {
		return err
	}
	cf.Fn = fn
	return nil
}

// LaunchKernelFrame is LaunchKernel (without extra) through a frame the
// caller owns, readied by PrepareLaunchFrame. It touches neither the frame
// pool nor the entry-point table, which matters on the launch hot path:
// libcuda's launch evicts the caller's data from the CPU caches, and every
// cache line a launch reads again costs time. The caller must not use cf for
// two calls at once. Its body mirrors the generated LaunchKernel on purpose:
// the argument stores are written out (an array copy measured slower).
func LaunchKernelFrame(cf *ccall.Frame, f CUfunction, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes uint32, hStream CUstream, kernelParams *unsafe.Pointer) error {
	ccall.Escape(unsafe.Pointer(kernelParams))
	cf.Args[0] = uintptr(f)
	cf.Args[1] = uintptr(gridDimX)
	cf.Args[2] = uintptr(gridDimY)
	cf.Args[3] = uintptr(gridDimZ)
	cf.Args[4] = uintptr(blockDimX)
	cf.Args[5] = uintptr(blockDimY)
	cf.Args[6] = uintptr(blockDimZ)
	cf.Args[7] = uintptr(sharedMemBytes)
	cf.Args[8] = uintptr(hStream)
	cf.Args[9] = uintptr(unsafe.Pointer(kernelParams))
	cf.Args[10] = 0
	r1 := cf.Call(11)
	runtime.KeepAlive(kernelParams)
	if r1 == 0 {
		return nil
	}
	return procLaunchKernel.check(r1)
}
