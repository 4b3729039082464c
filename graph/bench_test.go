//go:build linux

package graph

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/seam"
)

// cGraph are the C halves of BenchmarkGraphVersusC, run in this process on
// the same context, stream, kernel and buffers as the Go halves.
const cGraph = `
#include <cuda.h>
static volatile long hits;
static void CUDA_CB host_fn(void *d) { hits++; }
int add_kernel_nodes(CUgraph g, CUfunction f, CUdeviceptr a, CUdeviceptr b, long n) {
	int count = 256;
	void *params[3] = {&a, &b, &count};
	CUDA_KERNEL_NODE_PARAMS p = {0};
	p.func = f; p.gridDimX = p.gridDimY = p.gridDimZ = 1; p.blockDimX = 256; p.blockDimY = p.blockDimZ = 1;
	p.kernelParams = params;
	CUgraphNode node;
	for (long i = 0; i < n; i++) { CUresult r = cuGraphAddKernelNode(&node, g, 0, 0, &p); if (r) return r; }
	return 0;
}
int launch_exec(CUgraphExec e, CUstream s, long n) {
	for (long i = 0; i < n; i++) { CUresult r = cuGraphLaunch(e, s); if (r) return r; }
	return cuStreamSynchronize(s);
}
int add_host_node(CUgraph g, CUgraphNode *out) {
	CUDA_HOST_NODE_PARAMS p = {host_fn, 0};
	return cuGraphAddHostNode(out, g, 0, 0, &p);
}
int launch_exec_sync(CUgraphExec e, CUstream s, long n) {
	for (long i = 0; i < n; i++) {
		CUresult r = cuGraphLaunch(e, s); if (r) return r;
		r = cuStreamSynchronize(s); if (r) return r;
	}
	return 0;
}
`

// cCall calls a C function with the context current, as a C program
// would have it.
func cCall(ctx *driver.Context, fn uintptr, args ...uintptr) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.CtxPushCurrent(cu.CUcontext(seam.Context(ctx))); err != nil {
		return err
	}
	defer cu.CtxSetCurrent(0)
	if r, _, _ := purego.SyscallN(fn, args...); r != 0 {
		return fmt.Errorf("C: CUresult %d", r)
	}
	return nil
}

// BenchmarkGraphVersusC compares, in one process, graph work done from C
// with the same work through package graph: a kernel-node add with two
// buffer arguments (plain, and inside Batch), executable launches of 1 and
// 100 nodes, and a host node's round trip (launch + sync). Run with
// -test.benchtime=1x; it reports medians over interleaved rounds and the
// ratio to C ("-xC").
func BenchmarkGraphVersusC(b *testing.B) {
	e, s := setup(b)
	c := gputest.BuildC(b, cGraph, "add_kernel_nodes", "launch_exec", "add_host_node", "launch_exec_sync")
	a, err := driver.Alloc[int32](e.ctx, 256)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	bb, err := driver.Alloc[int32](e.ctx, 256)
	if err != nil {
		b.Fatal(err)
	}
	defer bb.Close()
	addTo := e.fn["addTo"]
	fh, _ := seam.Function(addTo)
	kcfg := cfg(256)

	// Node adds go into a fresh graph every round, so graphs stay small.
	var cg, gg *Graph
	fresh := func(p **Graph) error {
		if *p != nil {
			if err := (*p).Close(); err != nil {
				return err
			}
		}
		g, err := New(e.ctx)
		*p = g
		return err
	}
	addC := func(n int) error {
		if err := fresh(&cg); err != nil {
			return err
		}
		return cCall(e.ctx, c["add_kernel_nodes"], uintptr(cg.h), fh, uintptr(a.Ptr()), uintptr(bb.Ptr()), uintptr(n))
	}
	addGo := func(n int) error {
		if err := fresh(&gg); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if _, err := gg.KernelWith(addTo, kcfg, a, bb, int32(256)); err != nil {
				return err
			}
		}
		return nil
	}
	addBatch := func(n int) error {
		if err := fresh(&gg); err != nil {
			return err
		}
		return gg.Batch(func() error {
			for i := 0; i < n; i++ {
				if _, err := gg.KernelWith(addTo, kcfg, a, bb, int32(256)); err != nil {
					return err
				}
			}
			return nil
		})
	}

	execOf := func(nodes int) *Exec {
		g, err := New(e.ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer g.Close()
		var prev Node
		for i := 0; i < nodes; i++ {
			bl := g.After()
			if i > 0 {
				bl = g.After(prev)
			}
			if prev, err = bl.KernelWith(e.fn["empty"], cfg(1)); err != nil {
				b.Fatal(err)
			}
		}
		x, err := g.Instantiate()
		if err != nil {
			b.Fatal(err)
		}
		return x
	}
	x1, x100 := execOf(1), execOf(100)
	defer x1.Close()
	defer x100.Close()
	launchC := func(x *Exec) func(int) error {
		return func(n int) error { return cCall(e.ctx, c["launch_exec"], uintptr(x.h), seam.Stream(s), uintptr(n)) }
	}
	launchGo := func(x *Exec) func(int) error {
		return func(n int) error {
			for i := 0; i < n; i++ {
				if err := x.Launch(s); err != nil {
					return err
				}
			}
			return s.Synchronize()
		}
	}

	// A host node's round trip: a graph of one host node, launched and
	// synchronised; C's node calls a C function, Go's a Go closure.
	hostC, err := New(e.ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer hostC.Close()
	node := new(cu.CUgraphNode)
	if err := cCall(e.ctx, c["add_host_node"], uintptr(hostC.h), uintptr(unsafe.Pointer(node))); err != nil {
		b.Fatal(err)
	}
	xhC, err := hostC.Instantiate()
	if err != nil {
		b.Fatal(err)
	}
	defer xhC.Close()
	hostGo, err := New(e.ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer hostGo.Close()
	hits := 0
	if _, err := hostGo.HostFunc(func() { hits++ }); err != nil {
		b.Fatal(err)
	}
	xhGo, err := hostGo.Instantiate()
	if err != nil {
		b.Fatal(err)
	}
	defer xhGo.Close()

	for b.Loop() {
		gputest.Versus(b, 11, 2000,
			[]gputest.Variant{gputest.V("NodeAdd2Buf/C", addC), gputest.V("NodeAdd2Buf/graph", addGo), gputest.V("NodeAdd2Buf/graph-batch", addBatch)},
			[]gputest.Variant{gputest.V("Launch1Node/C", launchC(x1)), gputest.V("Launch1Node/graph", launchGo(x1))},
		)
		gputest.Versus(b, 11, 200,
			[]gputest.Variant{gputest.V("Launch100Nodes/C", launchC(x100)), gputest.V("Launch100Nodes/graph", launchGo(x100))},
		)
		gputest.Versus(b, 11, 500,
			[]gputest.Variant{
				gputest.V("HostNodeRoundTrip/C", func(n int) error {
					return cCall(e.ctx, c["launch_exec_sync"], uintptr(xhC.h), seam.Stream(s), uintptr(n))
				}),
				gputest.V("HostNodeRoundTrip/graph", func(n int) error {
					for i := 0; i < n; i++ {
						if err := xhGo.Launch(s); err != nil {
							return err
						}
						if err := s.Synchronize(); err != nil {
							return err
						}
					}
					return nil
				}),
			},
		)
	}
	if cg != nil {
		cg.Close()
	}
	if gg != nil {
		gg.Close()
	}
}

// BenchmarkNodeAdd is a kernel-node add with two buffer arguments through
// package graph, with -benchmem's allocation count per node.
func BenchmarkNodeAdd(b *testing.B) {
	e, _ := setup(b)
	a, _ := driver.Alloc[int32](e.ctx, 256)
	defer a.Close()
	bb, _ := driver.Alloc[int32](e.ctx, 256)
	defer bb.Close()
	g, err := New(e.ctx)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i++; i%4096 == 0 { // keep graphs small
			b.StopTimer()
			g.Close()
			g, _ = New(e.ctx)
			b.StartTimer()
		}
		if _, err := g.KernelWith(e.fn["addTo"], cfg(256), a, bb, int32(256)); err != nil {
			b.Fatal(err)
		}
	}
	g.Close()
}

// BenchmarkExecLaunch is one executable launch of a 1-node graph, with
// -benchmem's allocation count.
func BenchmarkExecLaunch(b *testing.B) {
	e, s := setup(b)
	g, _ := New(e.ctx)
	defer g.Close()
	if _, err := g.KernelWith(e.fn["empty"], cfg(1)); err != nil {
		b.Fatal(err)
	}
	x, err := g.Instantiate()
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := x.Launch(s); err != nil {
			b.Fatal(err)
		}
		if i++; i%1024 == 0 {
			_ = s.Synchronize()
		}
	}
	_ = s.Synchronize()
}

// BenchmarkInstantiate1000 instantiates a graph of 1000 serial kernel
// nodes (reported, no target).
func BenchmarkInstantiate1000(b *testing.B) {
	e, _ := setup(b)
	g, _ := New(e.ctx)
	defer g.Close()
	var prev Node
	var err error
	for i := 0; i < 1000; i++ {
		bl := g.After()
		if i > 0 {
			bl = g.After(prev)
		}
		if prev, err = bl.KernelWith(e.fn["empty"], cfg(1)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		x, err := g.Instantiate()
		if err != nil {
			b.Fatal(err)
		}
		x.Close()
	}
}
