// Command whileloop runs a loop on the GPU with no host round trip per
// iteration: a CUDA graph with a while node (a conditional node) whose body
// kernel decides, on the device, whether to go round again. It counts the
// steps of the Collatz sequence (n → n/2 if even, 3n+1 if odd) down to 1 for
// a few starting numbers, one graph launch each, and checks every count
// against the CPU. It uses only purecuda's public API; the kernel includes
// <purecuda/graph.h>, which package nvrtc builds in, so no CUDA toolkit is
// needed.
//
//	go run github.com/purecuda/cuda/examples/whileloop@latest
//
// Exit status: 0 when every count is right, 1 when a step fails (a driver
// older than CUDA 12.3 has no conditional nodes), 2 when there is no usable
// GPU (no CUDA driver or no device; cmd/smoke says what to install).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/nvrtc"
)

// start sets the loop's condition before the while node first reads it
// (so a start of 1 runs no iteration: a while loop, not a do-while);
// collatz_step is the body, run as long as the condition is not zero.
const source = `
#include <purecuda/graph.h>

extern "C" __global__ void start(const unsigned long long *x, unsigned int *steps, cudaGraphConditionalHandle loop)
{
    *steps = 0;
    cudaGraphSetConditional(loop, *x != 1);
}

extern "C" __global__ void collatz_step(unsigned long long *x, unsigned int *steps, cudaGraphConditionalHandle loop)
{
    unsigned long long v = *x;
    v = (v % 2 == 0) ? v / 2 : 3 * v + 1;
    *x = v;
    *steps += 1;
    if (v == 1)
        cudaGraphSetConditional(loop, 0); // the while node stops here
}
`

func main() {
	dev, err := firstDevice()
	if err != nil {
		fmt.Fprintf(os.Stderr, "whileloop: no usable GPU: %v\n", err)
		fmt.Fprintln(os.Stderr, "Run `go run github.com/purecuda/cuda/cmd/smoke@latest` to see where purecuda looked and what to install.")
		os.Exit(2)
	}
	if err := run(dev); err != nil {
		fmt.Fprintf(os.Stderr, "whileloop: %v\n", err)
		if errors.Is(err, driver.ErrNotSupported) {
			fmt.Fprintln(os.Stderr, "Conditional graph nodes need a driver for CUDA 12.3 or newer.")
		}
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

// collatz is the CPU's count of steps from x down to 1.
func collatz(x uint64) uint32 {
	var n uint32
	for x != 1 {
		if x%2 == 0 {
			x /= 2
		} else {
			x = 3*x + 1
		}
		n++
	}
	return n
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
	defer closing(&err, ctx)
	mod, _, err := ctx.CompileModule(source, nvrtc.Options{Name: "whileloop.cu"})
	if err != nil {
		return err
	}
	defer closing(&err, mod)
	start, err := mod.Function("start")
	if err != nil {
		return err
	}
	step, err := mod.Function("collatz_step")
	if err != nil {
		return err
	}
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		return err
	}
	defer closing(&err, s)
	x, err := driver.Alloc[uint64](ctx, 1)
	if err != nil {
		return err
	}
	defer closing(&err, x) // the graph holds the memory as long as it needs it
	steps, err := driver.Alloc[uint32](ctx, 1)
	if err != nil {
		return err
	}
	defer closing(&err, steps)

	// The graph: copy the start value in, set the condition, loop, copy the
	// count out. in and out are Go slices: the graph pins them and reads
	// and writes them at every launch.
	in, out := make([]uint64, 1), make([]uint32, 1)
	g, err := graph.New(ctx)
	if err != nil {
		return err
	}
	defer closing(&err, g)
	loop, err := g.NewCondition(0, 0) // start sets it at every launch
	if err != nil {
		return err
	}
	up, err := g.Memcpy(graph.Device(x), graph.Slice(in))
	if err != nil {
		return err
	}
	// A kernel takes the condition as its 64-bit handle.
	first, err := g.After(up).Kernel(start, driver.Grid(1), driver.Block(1), x, steps, loop.Handle())
	if err != nil {
		return err
	}
	while, body, err := g.After(first).While(loop)
	if err != nil {
		return err
	}
	if _, err := body.Kernel(step, driver.Grid(1), driver.Block(1), x, steps, loop.Handle()); err != nil {
		return err
	}
	if _, err := g.After(while).Memcpy(graph.Slice(out), graph.Device(steps)); err != nil {
		return err
	}
	exe, err := g.Instantiate()
	if err != nil {
		return err
	}
	defer closing(&err, exe)

	for _, v := range []uint64{27, 97, 871, 77031, 1} {
		in[0] = v
		if err := exe.Launch(s); err != nil { // one launch runs the whole loop
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if want := collatz(v); out[0] != want {
			return fmt.Errorf("%d: the GPU counted %d steps, the CPU %d", v, out[0], want)
		}
		fmt.Printf("whileloop: %d reaches 1 after %d steps\n", v, out[0])
	}
	fmt.Printf("whileloop: every count right on %s (%s), one graph launch per loop\n", name, dev.Arch())
	return nil
}
