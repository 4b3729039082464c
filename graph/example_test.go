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
	s.Synchronize()
	buf.CopyToHost(out)
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
