// Command nameexpr compiles a templated kernel with NVRTC name expressions:
// NVRTC instantiates each expression and reports its lowered (mangled) name,
// which is what the module is asked for. It uses only purecuda's public API.
//
//	go run github.com/purecuda/cuda/examples/nameexpr@latest
//
// Exit status: 0 when both instantiations give the right results, 1 when a
// step fails, 2 when there is no usable GPU (no CUDA driver or no device;
// cmd/smoke says what to install).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/nvrtc"
)

// A template in a namespace: neither extern "C" nor an explicit
// instantiation is needed, because the name expressions instantiate it.
const source = `
namespace demo {
template <typename T, int Factor>
__global__ void scale(T *x, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * T(Factor);
}
}
`

const (
	floatKernel = "demo::scale<float, 2>"
	intKernel   = "demo::scale<int, 3>"
	n           = 1000
)

func main() {
	dev, err := firstDevice()
	if err != nil {
		fmt.Fprintf(os.Stderr, "nameexpr: no usable GPU: %v\n", err)
		fmt.Fprintln(os.Stderr, "Run `go run github.com/purecuda/cuda/cmd/smoke@latest` to see where purecuda looked and what to install.")
		os.Exit(2)
	}
	if err := run(dev); err != nil {
		fmt.Fprintf(os.Stderr, "nameexpr: %v\n", err)
		os.Exit(1)
	}
}

// firstDevice returns device 0, or an error when this machine has no CUDA
// driver or no device.
func firstDevice() (*driver.Device, error) {
	count, err := driver.DeviceCount()
	if err != nil {
		if errors.Is(err, driver.ErrNoGPU) { // no driver library, no device, or a driver too old
			return nil, err
		}
		return nil, fmt.Errorf("the CUDA driver did not start: %w", err)
	}
	if count == 0 {
		return nil, errors.New("the CUDA driver reports no device")
	}
	return driver.DeviceByOrdinal(0)
}

// closing joins c.Close's error to *err: deferred right after c is made,
// so that run returns the first error and every Close's error with it.
func closing(err *error, c io.Closer) { *err = errors.Join(*err, c.Close()) }

func run(dev *driver.Device) (err error) {
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return err
	}
	defer closing(&err, ctx)

	mod, res, err := ctx.CompileModule(source, nvrtc.Options{
		Name:            "scale.cu",
		Std:             "c++17",
		NameExpressions: []string{floatKernel, intKernel},
	})
	if err != nil {
		return err
	}
	defer closing(&err, mod)
	for _, expr := range []string{floatKernel, intKernel} {
		fmt.Printf("nameexpr: %-22s → %s\n", expr, res.LoweredNames[expr])
	}

	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		return err
	}
	defer closing(&err, s)

	// The float instantiation doubles, the int one triples.
	fs := make([]float32, n)
	is := make([]int32, n)
	for i := range fs {
		fs[i], is[i] = float32(i)+0.5, int32(i)-500
	}
	gotF, err := scale(s, mod, res.LoweredNames[floatKernel], fs)
	if err != nil {
		return fmt.Errorf("%s: %w", floatKernel, err)
	}
	gotI, err := scale(s, mod, res.LoweredNames[intKernel], is)
	if err != nil {
		return fmt.Errorf("%s: %w", intKernel, err)
	}
	for i := range fs {
		if gotF[i] != 2*fs[i] {
			return fmt.Errorf("%s: x[%d] = %v, want %v", floatKernel, i, gotF[i], 2*fs[i])
		}
		if gotI[i] != 3*is[i] {
			return fmt.Errorf("%s: x[%d] = %v, want %v", intKernel, i, gotI[i], 3*is[i])
		}
	}
	fmt.Printf("nameexpr: both instantiations correct on %d elements\n", n)
	return nil
}

// scale runs the kernel with the given lowered name over a copy of x.
func scale[T int32 | float32](s *driver.Stream, mod *driver.Module, lowered string, x []T) ([]T, error) {
	if lowered == "" {
		return nil, errors.New("NVRTC reported no lowered name")
	}
	fn, err := mod.Function(lowered)
	if err != nil {
		return nil, err
	}
	buf, err := driver.AllocCopy(s, x)
	if err != nil {
		return nil, err
	}
	defer closing(&err, buf)
	if err := s.Launch(fn, driver.Grid((len(x)+127)/128), driver.Block(128), buf, uint32(len(x))); err != nil {
		return nil, err
	}
	return buf.ToHost(s) // queued after the kernel on s: it waits for it
}
