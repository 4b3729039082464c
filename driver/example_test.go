package driver_test

import (
	"fmt"
	"log"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/nvrtc"
)

// Add one to every element of a buffer on the GPU. (No output is checked:
// examples run where there may be no GPU.)
func Example() {
	dev, err := driver.DeviceByOrdinal(0)
	if err != nil {
		log.Fatal(err) // the message says where the loader looked for libcuda
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close() // released once everything made from it is closed

	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	mod, _, err := ctx.CompileModule(`
extern "C" __global__ void add_one(int* x, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] += 1;
}`, nvrtc.Options{})
	if err != nil {
		log.Fatal(err) // a compile error carries NVRTC's log
	}
	defer mod.Close()
	fn, err := mod.Function("add_one")
	if err != nil {
		log.Fatal(err)
	}

	host := []int32{1, 2, 3, 4}
	buf, err := driver.Alloc[int32](ctx, len(host))
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	if err := buf.CopyFromHost(s, host); err != nil {
		log.Fatal(err)
	}
	if err := s.Launch(fn, driver.Grid(1), driver.Block(256), buf, int32(len(host))); err != nil {
		log.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	if err := buf.CopyToHost(s, host); err != nil {
		log.Fatal(err)
	}
	fmt.Println(host) // [2 3 4 5]
}

// Prepared arguments launch without allocating: for hot loops.
func ExampleFunction_NewArgs() {
	var (
		s   *driver.Stream
		fn  *driver.Function
		buf *driver.Buffer[float32]
	) // from the setup in Example
	if s == nil {
		return
	}
	args, err := fn.NewArgs(buf, float32(0.5), int32(buf.Len()))
	if err != nil {
		log.Fatal(err) // count and sizes are checked once, here
	}
	defer args.Close() // until then, buf's memory stays allocated
	for step := 0; step < 1000; step++ {
		if err := driver.SetArg(args, 1, float32(step)); err != nil {
			log.Fatal(err)
		}
		if err := s.LaunchArgs(args, driver.Grid(64), driver.Block(256)); err != nil {
			log.Fatal(err)
		}
	}
}

// Run Go code in a stream's order: the host function runs once the work
// queued before it has run, here a memset and a copy into pinned memory,
// and the work queued after it waits for it. What it writes is seen by the
// goroutine that returns from Synchronize; if it panics, Synchronize
// returns the panic as an error.
func ExampleStream_LaunchHostFunc() {
	dev, err := driver.DeviceByOrdinal(0)
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	buf, err := driver.Alloc[int32](ctx, 4)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	pinned, err := driver.AllocHost[int32](ctx, 4, driver.HostAllocDefault)
	if err != nil {
		log.Fatal(err)
	}
	defer pinned.Close()

	if err := buf.Memset32Async(s, 7); err != nil {
		log.Fatal(err)
	}
	if err := buf.CopyToPinnedAsync(s, pinned); err != nil {
		log.Fatal(err)
	}
	var sum int32
	err = s.LaunchHostFunc(func() {
		for _, v := range pinned.Slice() { // the copy has run
			sum += v
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(sum) // 28
}
