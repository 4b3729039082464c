package graph_test

import (
	"fmt"
	"log"
	"sync/atomic"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/nvrtc"
)

const exampleSrc = `
extern "C" __global__ void scale(float* x, float a, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= a;
}
extern "C" __global__ void iota(int* x, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = i;
}`

// The examples' output is not checked by go test, since examples run where
// there may be no GPU; TestExamplesOnGPU runs them on a GPU and checks what
// they print.

// exampleSetup opens device 0 and compiles the examples' kernels.
func exampleSetup() (*driver.Context, *driver.Stream, *driver.Module) {
	dev, err := driver.DeviceByOrdinal(0)
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		log.Fatal(err)
	}
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		log.Fatal(err)
	}
	mod, _, err := ctx.CompileModule(exampleSrc, nvrtc.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return ctx, s, mod
}

// A complete graph: copy a Go slice to the device, scale it with a kernel,
// copy it back and report from a host callback; instantiate and replay.
func Example() {
	ctx, s, mod := exampleSetup()
	defer ctx.Close()
	defer s.Close()
	defer mod.Close()
	scale, err := mod.Function("scale")
	if err != nil {
		log.Fatal(err)
	}

	g, err := graph.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	data := []float32{1, 2, 3, 4}
	buf, err := driver.Alloc[float32](ctx, len(data))
	if err != nil {
		log.Fatal(err)
	}
	up, err := g.Memcpy(graph.Device(buf), graph.Slice(data)) // data is pinned while the graph may run
	if err != nil {
		log.Fatal(err)
	}
	k, err := g.After(up).Kernel(scale, driver.Grid(1), driver.Block(32), buf, float32(2), int32(len(data)))
	if err != nil {
		log.Fatal(err)
	}
	down, err := g.After(k).Memcpy(graph.Slice(data), graph.Device(buf))
	if err != nil {
		log.Fatal(err)
	}
	var runs atomic.Int32
	if _, err := g.After(down).HostFunc(func() { runs.Add(1) }); err != nil {
		log.Fatal(err)
	}
	buf.Close() // the graph holds the memory until it and its executables are gone

	exe, err := g.Instantiate()
	if err != nil {
		log.Fatal(err)
	}
	defer exe.Close()
	for i := 0; i < 3; i++ {
		if err := exe.Launch(s); err != nil {
			log.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(data, runs.Load())
}

// A memset node and a graph-owned allocation: the memory is allocated and
// freed by the graph itself.
func ExampleBuilder_MemAlloc() {
	ctx, s, mod := exampleSetup()
	defer ctx.Close()
	defer s.Close()
	defer mod.Close()
	iota, _ := mod.Function("iota")

	g, _ := graph.New(ctx)
	defer g.Close()
	const n = 8
	alloc, ptr, err := g.MemAlloc(n*4, graph.MemAllocOptions{})
	if err != nil {
		log.Fatal(err)
	}
	set, _ := g.After(alloc).Memset(graph.RawDevice(ptr, n*4, nil), 0xff, 1)
	k, _ := g.After(set).Kernel(iota, driver.Grid(1), driver.Block(n), ptr, int32(n/2))
	out := make([]int32, n)
	cp, _ := g.After(k).Memcpy(graph.Slice(out), graph.RawDevice(ptr, n*4, nil))
	if _, err := g.After(cp).MemFree(ptr); err != nil {
		log.Fatal(err)
	}
	exe, err := g.Instantiate()
	if err != nil {
		log.Fatal(err)
	}
	defer exe.Close()
	exe.Launch(s)
	s.Synchronize()
	fmt.Println(out)
}

// A child graph and event record and wait nodes; the child runs as part of
// its parent even after the child itself is closed.
func ExampleBuilder_Child() {
	ctx, s, mod := exampleSetup()
	defer ctx.Close()
	defer s.Close()
	defer mod.Close()
	iota, _ := mod.Function("iota")

	buf, _ := driver.Alloc[int32](ctx, 4)
	child, _ := graph.New(ctx)
	child.Kernel(iota, driver.Grid(1), driver.Block(4), buf, int32(4))
	ev, _ := ctx.NewEvent(driver.EventDisableTiming)

	parent, _ := graph.New(ctx)
	defer parent.Close()
	c, err := parent.Child(child)
	if err != nil {
		log.Fatal(err)
	}
	rec, err := parent.After(c).EventRecord(ev)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := parent.After(rec).EventWait(ev); err != nil { // an event-wait node
		log.Fatal(err)
	}
	child.Close()
	ev.Close()
	out := make([]int32, 4)
	exe, _ := parent.Instantiate()
	defer exe.Close()
	exe.Launch(s)
	buf.CopyToHost(s, out) // on s, after the graph
	buf.Close()
	fmt.Println(out)
}

// Clone a graph, find a node's counterpart, and look at the structure.
func ExampleGraph_Clone() {
	ctx, s, mod := exampleSetup()
	defer ctx.Close()
	defer s.Close()
	defer mod.Close()
	g, _ := graph.New(ctx)
	a, _ := g.Empty()
	b, _ := g.Empty()
	j, _ := g.Join(a, b)
	clone, err := g.Clone()
	if err != nil {
		log.Fatal(err)
	}
	defer clone.Close()
	cj, _ := clone.Find(j)
	g.Close() // the clone stands alone
	deps, _ := cj.Dependencies()
	kind, _ := cj.Kind()
	fmt.Println(kind, len(deps))
}

// Change one argument of a kernel node in an executable graph and launch
// again, without building or instantiating the graph again: the first
// launch doubles the data, the second, after the update, triples it.
func ExampleExec_SetKernelArg() {
	ctx, s, mod := exampleSetup()
	defer ctx.Close()
	defer s.Close()
	defer mod.Close()
	scale, err := mod.Function("scale")
	if err != nil {
		log.Fatal(err)
	}
	data := []float32{1, 2, 3, 4}
	buf, err := driver.Alloc[float32](ctx, len(data))
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	if err := buf.CopyFromHostAsync(s, data); err != nil {
		log.Fatal(err)
	}

	g, err := graph.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	k, err := g.Kernel(scale, driver.Grid(1), driver.Block(32), buf, float32(2), int32(len(data)))
	if err != nil {
		log.Fatal(err)
	}
	exe, err := g.Instantiate()
	if err != nil {
		log.Fatal(err)
	}
	defer exe.Close()
	if err := exe.Launch(s); err != nil { // x *= 2
		log.Fatal(err)
	}
	// Argument 1 is the factor; the buffer and the count stay as they are.
	// A launch queued before the update still runs with 2.
	if err := exe.SetKernelArg(k, 1, float32(3)); err != nil {
		log.Fatal(err)
	}
	if err := exe.Launch(s); err != nil { // x *= 3
		log.Fatal(err)
	}
	if err := buf.CopyToHostAsync(s, data); err != nil {
		log.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(data)
}

// whileSrc is a while loop's body: it doubles *x and, once *x reaches
// limit, sets the loop's condition to 0 on the device. <purecuda/graph.h>
// is built into package nvrtc.
const whileSrc = `
#include <purecuda/graph.h>
extern "C" __global__ void double_until(int* x, int limit, cudaGraphConditionalHandle loop) {
	*x *= 2;
	if (*x >= limit) cudaGraphSetConditional(loop, 0);
}`

// A loop that runs on the device, with no round trip to the host per
// iteration: a while node runs its body graph as long as its condition is
// not zero, and the body's kernel decides (CUDA 12.3+).
func ExampleGraph_While() {
	ctx, s, mod := exampleSetup()
	defer ctx.Close()
	defer s.Close()
	defer mod.Close()
	wmod, _, err := ctx.CompileModule(whileSrc, nvrtc.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer wmod.Close()
	double, err := wmod.Function("double_until")
	if err != nil {
		log.Fatal(err)
	}
	x, err := driver.Alloc[int32](ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()

	g, err := graph.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	// The condition is 1 at the start of every launch, so the body runs at
	// least once; a kernel takes it as its 64-bit handle.
	loop, err := g.NewCondition(1, graph.AssignDefault)
	if err != nil {
		log.Fatal(err) // ErrNotSupported before CUDA 12.3
	}
	set, err := g.Memset(graph.Device(x), 1, 4) // x = 1
	if err != nil {
		log.Fatal(err)
	}
	_, body, err := g.After(set).While(loop)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := body.Kernel(double, driver.Grid(1), driver.Block(1), x, int32(100), loop.Handle()); err != nil {
		log.Fatal(err)
	}
	exe, err := g.Instantiate()
	if err != nil {
		log.Fatal(err)
	}
	defer exe.Close()
	if err := exe.Launch(s); err != nil { // one launch runs the whole loop
		log.Fatal(err)
	}
	out := make([]int32, 1)
	if err := x.CopyToHostAsync(s, out); err != nil {
		log.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out[0])
}

// Record the work queued on a stream into a graph instead of running it,
// then run the graph twice. A host function queued during the capture
// becomes a host node, run at every launch.
func ExampleCapture() {
	ctx, s, mod := exampleSetup()
	defer ctx.Close()
	defer s.Close()
	defer mod.Close()
	iota, err := mod.Function("iota")
	if err != nil {
		log.Fatal(err)
	}
	buf, err := driver.Alloc[int32](ctx, 4)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()

	var runs atomic.Int32
	g, err := graph.Capture(s, graph.CaptureRelaxed, func(s *driver.Stream) error {
		// Nothing runs here: the launch and the host function become nodes.
		if err := s.Launch(iota, driver.Grid(1), driver.Block(32), buf, int32(buf.Len())); err != nil {
			return err
		}
		return s.LaunchHostFunc(func() { runs.Add(1) })
	})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	exe, err := g.Instantiate()
	if err != nil {
		log.Fatal(err)
	}
	defer exe.Close()
	for i := 0; i < 2; i++ {
		if err := exe.Launch(s); err != nil {
			log.Fatal(err)
		}
	}
	out := make([]int32, buf.Len())
	if err := buf.CopyToHostAsync(s, out); err != nil {
		log.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	if err := exe.Err(); err != nil { // a host node's panic, if one panicked
		log.Fatal(err)
	}
	fmt.Println(out, runs.Load())
}
