// Package graph builds explicit CUDA graphs whose nodes can never point at
// freed memory.
//
// A CUDA graph node records raw device addresses, host addresses and
// function pointers; the driver copies argument values and keeps nothing
// alive. In this package every node holds what it names — device buffers,
// pinned host buffers, Go slices (registered with CUDA and pinned, so that
// a node reads and writes them when it runs), kernels' modules and
// libraries, events, host callbacks, the memory of child graphs — in an
// owner table
// that CUDA keeps as a user object of the graph. Clones and executables
// take their own references on it, so the owners are released only after
// the graph, every clone and every executable are closed and their
// launched work has finished. Callers may close or drop their own handles
// as soon as a node is added.
//
// Package graph sits above driver and lifetime: it is the only package that
// calls cuGraph* and cuUserObject*.
//
// # A complete graph
//
// A graph that copies a Go slice to the device, runs a kernel on it, copies
// the result back and then calls a Go function:
//
//	g, err := graph.New(ctx)
//	defer g.Close()
//	in := []float32{1, 2, 3, 4}
//	out := make([]float32, 4)
//	buf, err := driver.Alloc[float32](ctx, 4)
//	up, err := g.Memcpy(graph.Device(buf), graph.Slice(in))        // read each time the node runs
//	k, err := g.After(up).Kernel(scale, driver.Grid(1), driver.Block(4), buf, float32(2), int32(4))
//	down, err := g.After(k).Memcpy(graph.Slice(out), graph.Device(buf))
//	_, err = g.After(down).HostFunc(func() { fmt.Println(out) })
//	buf.Close()                                                    // the graph still holds the memory
//	exe, err := g.Instantiate()
//	defer exe.Close()
//	for i := 0; i < 100; i++ {
//		err = exe.Launch(s)                                        // replay
//	}
//	err = s.Synchronize()
//	err = exe.Err()                                                // panics in host nodes, if any
//
// # Dependencies
//
// The Graph's add methods add root nodes; g.After(a, b) returns a Builder
// whose nodes depend on a and b. AddEdge and RemoveEdge change edges later;
// an edge that would close a cycle is refused (ErrCycle), and a node of
// another graph is refused (ErrForeignNode). Nodes, Roots, Edges, Kind,
// Dependencies, Dependents and the per-kind parameter readers look at a
// graph; WriteDOT draws it.
//
// # Executable update
//
// Exec.SetKernel, SetMemset, SetMemcpy, SetHostFunc, SetEventRecord,
// SetEventWait, SetChild and SetEnabled change one node of an executable
// without instantiating again; SetKernelArg changes one argument of a
// kernel node and keeps the rest, and SetKernelArgs takes them all from
// prepared driver.Args. Exec.Update takes the parameters of a whole
// graph of the same topology. What an update introduces is held until the
// executable is closed and its launches have finished; what it replaces is
// released once the launches enqueued before the change have finished.
//
// # Stream capture
//
// Capture (or BeginCapture with Fork, Join and End) records the work that
// purecuda calls queue on a stream into a new graph, or into an existing
// graph or conditional body. Everything those calls name — buffers,
// kernels' modules, Args, registered Go slices, host functions — is held by the
// resulting graph as if its nodes had been added explicitly (held by the
// whole graph: destroying a captured node releases nothing early). An
// error, a panic or runtime.Goexit between begin and end still ends the
// capture and destroys what it captured: no stream is left capturing. A
// call on a captured stream is captured or not, never half: it cannot race
// the capture's begin or end. While a capture into a graph runs, calls on
// that graph's family fail with ErrCapturing. Calls CUDA refuses in a
// capture (Exec.Launch, Exec.Upload, Stream.Synchronize on a captured
// stream) are refused before CUDA, and the capture goes on.
//
// # Contexts and threads
//
// Adding a node needs the graph's context current on the calling thread
// (without one libcuda crashes). Every call binds it for itself; Batch binds
// it once for many adds.
//
// # Several GPUs
//
// One graph may run work on several GPUs: kernel nodes on each device and
// memcpy nodes between their memory, launched once, on a stream of the
// graph's context, as one unit (CUDA 13 runs each node on its own
// context's device and orders them by the graph's edges, across devices).
// A graph has one context, New's, but each kernel, memcpy and memset node
// runs in a context of its own:
//
//   - a kernel node of a module's kernel runs in the module's context (CUDA
//     takes it from the kernel: Kernel(fnOfB, …) runs on B's device); a
//     library kernel, which belongs to no context, runs in the graph's,
//     or in the one On names;
//   - g.On(ctx) (or g.After(a).On(ctx)) returns a Builder whose kernel,
//     memcpy and memset nodes run in ctx: the context CUDA's node
//     parameters name (the kernel params' ctx, the ctx argument of
//     cuGraphAddMemcpyNode and cuGraphAddMemsetNode). On(nil) is the
//     graph's context;
//   - a memcpy node copies between device memory of any two contexts, of
//     one device or two (device to device across GPUs); it runs in the
//     graph's context unless On names another. The copy is done by that
//     context's device, so name the source's or the destination's: either
//     GPU's copy engine reaches the other's memory over NVLink or PCIe
//     when peer access is on (Context.EnablePeerAccess), and CUDA stages
//     the copy through the host when it is off. The graph's own context
//     is the default because a captured copy runs in the capturing
//     stream's context, and so a graph built either way behaves alike.
//     Memory of a pool (AllocAsync's, or a MemPool's) is reached only by
//     its own device and the devices its pool gives access
//     (MemPool.SetAccess), not through peer access: copy it On its own
//     context (the graph does not check this);
//   - a memset node sets memory of its own context only, and a kernel's
//     buffers must belong to its context or a peer of it.
//
// Every object a node names stays held as it is for one context: buffers,
// modules and libraries, and the node's context when On named another one
// than the graph's (a module kernel's context is held by its module). The
// graph, its clones and its executables hold them; closing them, the
// contexts, the buffers and the modules in any order is safe, and a
// dropped graph releases them.
//
//	g, err := graph.New(ctxA)
//	k0, err := g.Kernel(fillA, grid, block, bufA)              // on A
//	c0, err := g.After(k0).Memcpy(graph.Device(bufB), graph.Device(bufA)) // A to B, run by A
//	k1, err := g.After(c0).Kernel(scaleB, grid, block, bufB)   // on B: scaleB is a kernel of B's module
//	_, err = g.After(k1).On(ctxB).Memcpy(graph.Device(outA), graph.Device(bufB)) // B to A, run by B
//	exe, err := g.Instantiate()
//	err = exe.Launch(streamA)                                  // a stream of the graph's context
//
// A stream capture may span devices too: Fork a stream of another context
// into the capture (and Join it back, or let End join it), or have such a
// stream wait for an event recorded in the capture; the links use an event
// of each stream's own context, as CUDA requires, and the graph made holds
// every context that joined. A copy between contexts queued on a captured
// stream (Buffer.CopyFromAsync from another context's buffer) cannot be
// captured: add it as a memcpy node to the graph made.
//
// What CUDA does not allow is refused with an error matching
// driver.ErrInvalidArgument, before CUDA sees it: instantiating for device
// launch (DeviceLaunch) a graph whose nodes span contexts (CUDA needs one);
// nodes of another context in a conditional node's body (CUDA runs every
// body node in the conditional node's context), including copies of
// another context's memory, multi-context child graphs and a capture into
// a body forking into another context. Executable updates of single nodes
// (SetKernel, SetKernelWith, SetKernelArg, SetKernelArgs, SetMemset,
// SetMemcpy) are not offered for an executable whose graph spans contexts
// (CUDA keeps a node in its context; those updates name the graph's): use
// Exec.Update with a graph of the same shape, or instantiate again. A
// graph is marked as spanning contexts from its first node that runs in
// another context than the graph's, or that copies memory of another
// context (or a capture or child that brings one), for good, even if that
// node is destroyed later; clones inherit the mark, and an executable
// takes that of the graph it was made from or last updated with
// (Exec.Update). A stream of another context that waits for an event
// recorded in a capture into a conditional node's body is refused as any
// stream the capture cannot take in (driver.ErrStreamCaptureIsolation).
//
// A driver problem, not worked around: with driver 580 (CUDA 13.0, seen
// on an H200), a process in which about 10,000 executables were alive at
// once earlier (2,000 are not enough) can crash inside libcuda
// (SIGSEGV) when it launches a newly instantiated executable with nodes
// that run in another context (On) on a stream that also runs host
// functions
// (driver.Stream.LaunchHostFunc, host nodes, captured host functions).
// A C program calling libcuda alone does the same (tests/libcuda in the
// repository). Launching one such executable again and again, instead of
// a new one each time, did not crash: instantiate a multi-context graph
// once and launch it many times.
//
// # Conditional nodes
//
// If, IfElse, While and Switch add conditional nodes, which run body graphs
// on the device depending on a Condition (made with NewCondition) that
// kernels set with cudaGraphSetConditional — loops and branches with no
// host round trip. Each returns its bodies as Graphs to fill with the same
// add methods, conditional nodes included; what body nodes hold is held
// like anything else the graph holds. Kernels get the condition as
// Condition.Handle() and declare it with #include <purecuda/graph.h>, which
// package nvrtc builds in:
//
//	loop, err := g.NewCondition(1, graph.AssignDefault) // 1 at each launch
//	w, body, err := g.While(loop)
//	_, err = body.Kernel(step, driver.Grid(1), driver.Block(1), buf, loop.Handle()) // step clears it to stop
//
// If and While need a CUDA 12.3 driver, IfElse and Switch 12.8; on an older
// one they return an error matching driver.ErrNotSupported.
//
// # Concurrency and lifetime
//
// Every type is safe for concurrent use, and Close may race any call: the
// call works or fails with driver.ErrClosed, and nothing is destroyed under
// it. CUDA's graphs are not thread-safe, so purecuda serialises every CUDA
// call on a family — a top-level graph, its conditional bodies, its clones
// and the executables made from them — behind one lock; launches of an
// executable are not serialised with the graph. CUDA runs the launches of
// one executable one after another, whatever their streams.
//
// A Graph or Exec dropped without Close is closed by a cleanup on
// purecuda's release goroutine (a host function whose closure refers to its
// own graph keeps it reachable: close such graphs). A Node stays valid until
// its node is destroyed; from then on every use is an error matching
// ErrDestroyedNode, even after CUDA reuses the node's handle. An Exec keeps
// the graph it came from, and its per-node methods work after the graph's
// Close.
package graph
