// Command vectoradd adds two vectors on the GPU with a kernel compiled at run
// time by NVRTC, and checks every sum. It uses only purecuda's public API.
//
//	go run github.com/purecuda/cuda/examples/vectoradd@latest
//
// Exit status: 0 when every sum is right, 1 when a step fails, 2 when there
// is no usable GPU (no CUDA driver or no device; cmd/smoke says what to
// install).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/nvrtc"
)

// The kernel is plain CUDA C++; extern "C" keeps its name unmangled, so the
// module can be asked for "vadd".
const source = `
extern "C" __global__ void vadd(const float *a, const float *b, float *c, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}
`

const n = 1 << 20

func main() {
	dev, err := firstDevice()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vectoradd: no usable GPU: %v\n", err)
		fmt.Fprintln(os.Stderr, "Run `go run github.com/purecuda/cuda/cmd/smoke@latest` to see where purecuda looked and what to install.")
		os.Exit(2)
	}
	if err := run(dev); err != nil {
		fmt.Fprintf(os.Stderr, "vectoradd: %v\n", err)
		os.Exit(1)
	}
}

// firstDevice returns device 0, or an error when this machine has no CUDA
// driver or no device.
func firstDevice() (*driver.Device, error) {
	count, err := driver.DeviceCount() // loads the driver and calls cuInit
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
	name, err := dev.Name()
	if err != nil {
		return err
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return err
	}
	defer closing(&err, ctx) // released once everything made from it is closed

	// CompileModule compiles for the context's device (its sm_XX) and loads
	// the CUBIN; a compile error carries NVRTC's log.
	mod, _, err := ctx.CompileModule(source, nvrtc.Options{Name: "vadd.cu"})
	if err != nil {
		return err
	}
	defer closing(&err, mod)
	vadd, err := mod.Function("vadd")
	if err != nil {
		return err
	}

	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		return err
	}
	defer closing(&err, s)

	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(i), float32(2*i) // small integers: every sum is exact in float32
	}
	// AllocCopy allocates and copies in one call; Alloc leaves the memory as
	// it is (the kernel writes every element of c).
	da, err := driver.AllocCopy(s, a)
	if err != nil {
		return err
	}
	defer closing(&err, da)
	db, err := driver.AllocCopy(s, b)
	if err != nil {
		return err
	}
	defer closing(&err, db)
	dc, err := driver.Alloc[float32](ctx, n)
	if err != nil {
		return err
	}
	defer closing(&err, dc)

	const block = 256
	if err := s.Launch(vadd, driver.Grid((n+block-1)/block), driver.Block(block), da, db, dc, uint32(n)); err != nil {
		return err
	}
	// ToHost runs on s after the kernel and returns once the copy is done.
	c, err := dc.ToHost(s) // a new slice holding all of dc
	if err != nil {
		return err
	}
	for i := range c {
		if c[i] != a[i]+b[i] {
			return fmt.Errorf("c[%d] = %v, want %v", i, c[i], a[i]+b[i])
		}
	}
	fmt.Printf("vectoradd: %d sums on %s (%s): all correct\n", n, name, dev.Arch())
	return nil
}
