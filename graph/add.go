package graph

import (
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Builder adds nodes that depend on a set of nodes: g.After(a, b).Kernel(…)
// runs after a and b. The Graph's own add methods add root nodes.
//
// A Builder is a value that may be used from several goroutines at once;
// its adds are serialised with every other call on the graph (see Graph).
type Builder struct {
	g    *Graph
	deps []Node
	ctx  *driver.Context // On: the context kernel, memcpy and memset nodes run in; nil: the graph's
}

// After returns a Builder whose nodes depend on deps, which must be live
// nodes of g (checked when a node is added).
func (g *Graph) After(deps ...Node) Builder { return Builder{g: g, deps: deps} }

// Empty adds an empty node (cuGraphAddEmptyNode) as a root.
func (g *Graph) Empty() (Node, error) { return g.After().Empty() }

// Join adds an empty node that depends on nodes: a barrier.
func (g *Graph) Join(nodes ...Node) (Node, error) { return g.After(nodes...).Empty() }

// Kernel adds a root kernel node; see Builder.Kernel.
func (g *Graph) Kernel(fn *driver.Function, grid driver.GridDim, block driver.BlockDim, args ...any) (Node, error) {
	return g.After().Kernel(fn, grid, block, args...)
}

// KernelWith adds a root kernel node with shared memory; see
// Builder.KernelWith.
func (g *Graph) KernelWith(fn *driver.Function, cfg driver.LaunchConfig, args ...any) (Node, error) {
	return g.After().KernelWith(fn, cfg, args...)
}

// KernelArgs adds a root kernel node from prepared Args; see
// Builder.KernelArgs.
func (g *Graph) KernelArgs(a *driver.Args, grid driver.GridDim, block driver.BlockDim) (Node, error) {
	return g.After().KernelArgs(a, grid, block)
}

// HostFunc adds a root host node; see Builder.HostFunc.
func (g *Graph) HostFunc(f func()) (Node, error) { return g.After().HostFunc(f) }

// Memset adds a root memset node; see Builder.Memset.
func (g *Graph) Memset(dst Operand, value uint32, elemSize int) (Node, error) {
	return g.After().Memset(dst, value, elemSize)
}

// Memcpy adds a root memcpy node; see Builder.Memcpy.
func (g *Graph) Memcpy(dst, src Operand) (Node, error) { return g.After().Memcpy(dst, src) }

// MemAlloc adds a root memory-alloc node; see Builder.MemAlloc.
func (g *Graph) MemAlloc(bytes int, o MemAllocOptions) (Node, driver.DevicePtr, error) {
	return g.After().MemAlloc(bytes, o)
}

// MemFree adds a root memory-free node; see Builder.MemFree.
func (g *Graph) MemFree(p driver.DevicePtr) (Node, error) { return g.After().MemFree(p) }

// Child adds a root child-graph node; see Builder.Child.
func (g *Graph) Child(child *Graph) (Node, error) { return g.After().Child(child) }

// EventRecord adds a root event-record node; see Builder.EventRecord.
func (g *Graph) EventRecord(e *driver.Event) (Node, error) { return g.After().EventRecord(e) }

// EventWait adds a root event-wait node; see Builder.EventWait.
func (g *Graph) EventWait(e *driver.Event) (Node, error) { return g.After().EventWait(e) }

func (b Builder) check(op string) error {
	if b.g == nil {
		return invalid(op, "nil graph")
	}
	if b.g.graphCore == nil {
		return closed(op, "graph")
	}
	return nil
}

// Empty adds an empty node (cuGraphAddEmptyNode): a join point.
func (b Builder) Empty() (Node, error) {
	const op = "Graph.Empty"
	if err := b.check(op); err != nil {
		return Node{}, err
	}
	g := b.g
	return g.add(op, b.deps, nil, func(d *cu.CUgraphNode, n uintptr) error {
		return cu.GraphAddEmptyNode(&g.scr.node, g.h, d, n)
	})
}

// Kernel adds a kernel node (cuGraphAddKernelNode) that launches fn over
// grid × block threads with args: what Stream.Launch takes, checked against
// the kernel the same way. The node holds fn's module or library and every
// buffer among args for as long as the graph or anything made from it may
// run it. It runs in fn's context when fn is a module's kernel (which may
// be another context than the graph's; a Builder made with On refuses a
// module kernel of another context than On's), else in the Builder's
// context (On) or the graph's; the buffers must belong to that context or
// a peer of it.
func (b Builder) Kernel(fn *driver.Function, grid driver.GridDim, block driver.BlockDim, args ...any) (Node, error) {
	return b.kernel("Graph.Kernel", fn, driver.LaunchConfig{Grid: grid, Block: block}, args)
}

// KernelWith is Kernel with dynamic shared memory (cfg.SharedMem), as
// Stream.LaunchWith is Launch's; clusters and cooperative launches are not
// offered for graph nodes.
func (b Builder) KernelWith(fn *driver.Function, cfg driver.LaunchConfig, args ...any) (Node, error) {
	return b.kernel("Graph.KernelWith", fn, cfg, args)
}

func (b Builder) kernel(op string, fn *driver.Function, cfg driver.LaunchConfig, args []any) (Node, error) {
	if err := b.check(op); err != nil {
		return Node{}, err
	}
	if fn == nil {
		return Node{}, invalid(op, "nil function")
	}
	if err := checkConfig(op, cfg); err != nil {
		return Node{}, err
	}
	g := b.g
	ctx, cref, err := b.nodeContext(op, fn.Context())
	if err != nil {
		return Node{}, err
	}
	p, err := seam.MarshalArgs(fn, ctx, args)
	if err != nil {
		_ = cref.Release()
		return Node{}, err
	}
	var rb [8]lifetime.Ref
	refs := seam.TakeRefs(p, rb[:0])
	var ob [9]release.Owner
	owners := ob[:0]
	for _, r := range refs {
		owners = append(owners, r)
	}
	if cref.Valid() {
		owners = append(owners, cref)
	}
	fh, kern := seam.Function(fn)
	params := p.Pointer()
	node, err := g.add(op, b.deps, owners, func(d *cu.CUgraphNode, n uintptr) error {
		if err := cu.GraphAddKernelNode(&g.scr.node, g.h, d, n, g.kernelParams(cfg, fh, kern, params, ctx)); err != nil {
			return err
		}
		if ctx != g.ctx {
			g.markMulti()
		}
		return nil
	})
	p.Free()
	return node, err
}

// KernelArgs adds a kernel node that launches Args made with
// Function.NewArgs over grid × block threads, as Stream.LaunchArgs does; the
// node copies their current values and holds the Args (their buffers and
// module) for as long as it may run. It runs in a context as Kernel's
// node does.
func (b Builder) KernelArgs(a *driver.Args, grid driver.GridDim, block driver.BlockDim) (Node, error) {
	const op = "Graph.KernelArgs"
	cfg := driver.LaunchConfig{Grid: grid, Block: block}
	if err := b.check(op); err != nil {
		return Node{}, err
	}
	if err := checkConfig(op, cfg); err != nil {
		return Node{}, err
	}
	fn := a.Function()
	ctx, cref, err := b.nodeContext(op, fn.Context())
	if err != nil {
		return Node{}, err
	}
	if err := seam.ArgsUsableIn(a, ctx); err != nil {
		_ = cref.Release()
		return Node{}, err
	}
	ref, err := seam.Hold(a)
	if err != nil {
		_ = cref.Release()
		return Node{}, err
	}
	g := b.g
	owners := []release.Owner{ref}
	if cref.Valid() {
		owners = append(owners, cref)
	}
	var node Node
	err = a.Raw(func(fh uintptr, params unsafe.Pointer) error {
		_, kern := seam.Function(fn)
		var err error
		node, err = g.add(op, b.deps, owners, func(d *cu.CUgraphNode, n uintptr) error {
			if err := cu.GraphAddKernelNode(&g.scr.node, g.h, d, n, g.kernelParams(cfg, fh, kern, params, ctx)); err != nil {
				return err
			}
			if ctx != g.ctx {
				g.markMulti()
			}
			return nil
		})
		owners = nil // add owns them now
		return err
	})
	for _, o := range owners { // when Raw failed before add took them
		_ = o.Release()
	}
	return node, err
}

// kernelParams fills the graph's kernel-node parameter block for a node
// that runs in ctx; g.mu is held.
func (g *Graph) kernelParams(cfg driver.LaunchConfig, fh, kern uintptr, params unsafe.Pointer, ctx *driver.Context) *cu.CUDA_KERNEL_NODE_PARAMS_v2 {
	fillKernel(&g.scr.kernel, cfg, fh, kern, params, ctx)
	return &g.scr.kernel
}

// fillKernel fills a kernel-node parameter block: a module kernel by its
// CUfunction, a library kernel by its CUkernel in ctx.
func fillKernel(kp *cu.CUDA_KERNEL_NODE_PARAMS_v2, cfg driver.LaunchConfig, fh, kern uintptr, params unsafe.Pointer, ctx *driver.Context) {
	*kp = cu.CUDA_KERNEL_NODE_PARAMS_v2{
		GridDimX: uint32(cfg.Grid.X), GridDimY: uint32(cfg.Grid.Y), GridDimZ: uint32(cfg.Grid.Z),
		BlockDimX: uint32(cfg.Block.X), BlockDimY: uint32(cfg.Block.Y), BlockDimZ: uint32(cfg.Block.Z),
		SharedMemBytes: uint32(cfg.SharedMem), KernelParams: (*unsafe.Pointer)(params),
	}
	if kern != 0 {
		kp.Kern, kp.Ctx = cu.CUkernel(kern), cu.CUcontext(seam.Context(ctx))
	} else {
		kp.Func = cu.CUfunction(fh)
	}
}

func checkConfig(op string, cfg driver.LaunchConfig) error {
	for i, v := range [6]int{cfg.Grid.X, cfg.Grid.Y, cfg.Grid.Z, cfg.Block.X, cfg.Block.Y, cfg.Block.Z} {
		if v < 1 || v > 1<<31-1 {
			return invalid(op, "%s dimension %c = %d", [2]string{"grid", "block"}[i/3], "xyz"[i%3], v)
		}
	}
	if cfg.SharedMem < 0 || cfg.SharedMem > 1<<31-1 {
		return invalid(op, "shared memory %d", cfg.SharedMem)
	}
	if cfg.Cluster != (driver.ClusterDim{}) || cfg.Cooperative {
		return invalid(op, "cluster and cooperative launches are not offered for graph nodes")
	}
	return nil
}

// HostFunc adds a host node (cuGraphAddHostNode) that runs f every time the
// graph runs, on a goroutine of purecuda's while a CUDA thread waits. f is
// held for as long as the graph or anything made from it may run it. It
// must not call CUDA. A panic or runtime.Goexit in f is contained and
// reported by Exec.Err. What f writes happens before the return of a wait
// for the launch (Stream.Synchronize after Exec.Launch, or an event
// recorded after it): the waiting goroutine may read it without a lock.
func (b Builder) HostFunc(f func()) (Node, error) {
	const op = "Graph.HostFunc"
	if err := b.check(op); err != nil {
		return Node{}, err
	}
	if f == nil {
		return Node{}, invalid(op, "nil function")
	}
	tramp, err := hostfn.HostFn()
	if err != nil {
		return Node{}, err
	}
	g := b.g
	id := hostfn.Register(hostfn.Callback{Fn: f, Sink: g.sink})
	return g.add(op, b.deps, []release.Owner{hostfn.CallbackOwner(id)}, func(d *cu.CUgraphNode, n uintptr) error {
		g.sink.hosts.Store(true)
		g.scr.host = cu.CUDA_HOST_NODE_PARAMS_v1{Fn: cu.CUhostFn(tramp), UserData: id}
		return cu.GraphAddHostNode(&g.scr.node, g.h, d, n, &g.scr.host)
	})
}

// Memset adds a memset node (cuGraphAddMemsetNode) that sets every
// elemSize-byte element (1, 2 or 4) of dst, which must be device memory,
// to value. dst is held for as long as the node may run. The node runs in
// the Builder's context (On) or the graph's, and dst must belong to it.
func (b Builder) Memset(dst Operand, value uint32, elemSize int) (Node, error) {
	const op = "Graph.Memset"
	if err := b.check(op); err != nil {
		dst.discard()
		return Node{}, err
	}
	ctx, cref, err := b.nodeContext(op, nil)
	if err != nil {
		dst.discard()
		return Node{}, err
	}
	o, err := dst.resolve(op, ctx, false)
	if err != nil {
		_ = cref.Release()
		return Node{}, err
	}
	o.ctx = cref
	var ob [2]release.Owner
	if err := checkMemset(op, value, elemSize); err != nil {
		o.release()
		return Node{}, err
	}
	if o.host {
		o.release()
		return Node{}, invalid(op, "memset nodes set device memory only")
	}
	if o.bytes == 0 || o.bytes%elemSize != 0 {
		o.release()
		return Node{}, invalid(op, "%d bytes are not a positive multiple of %d", o.bytes, elemSize)
	}
	g := b.g
	return g.add(op, b.deps, o.appendOwners(ob[:0]), func(d *cu.CUgraphNode, n uintptr) error {
		g.scr.set = cu.CUDA_MEMSET_NODE_PARAMS_v1{Dst: cu.CUdeviceptr(o.dev), Value: value, ElementSize: uint32(elemSize),
			Width: uintptr(o.bytes / elemSize), Height: 1}
		if err := cu.GraphAddMemsetNode(&g.scr.node, g.h, d, n, &g.scr.set, cu.CUcontext(seam.Context(ctx))); err != nil {
			return err
		}
		if ctx != g.ctx {
			g.markMulti()
		}
		return nil
	})
}

func checkMemset(op string, value uint32, elemSize int) error {
	if elemSize != 1 && elemSize != 2 && elemSize != 4 {
		return invalid(op, "element size %d (want 1, 2 or 4)", elemSize)
	}
	if elemSize < 4 && value >= 1<<(8*elemSize) {
		return invalid(op, "value %#x does not fit %d bytes", value, elemSize)
	}
	return nil
}

// Memcpy adds a memcpy node (cuGraphAddMemcpyNode) that copies all of src
// into the start of dst. Each side may be device memory, pinned host memory
// or a Go slice; both are held (a Go slice pinned) for as long as the node
// may run. Device memory may belong to any context, of any device: the
// node runs in the Builder's context (On) or the graph's, which is the
// ctx argument of cuGraphAddMemcpyNode (see "Several GPUs" in the package
// documentation for which to name).
func (b Builder) Memcpy(dst, src Operand) (Node, error) {
	const op = "Graph.Memcpy"
	if err := b.check(op); err != nil {
		dst.discard()
		src.discard()
		return Node{}, err
	}
	ctx, cref, err := b.nodeContext(op, nil)
	if err != nil {
		dst.discard()
		src.discard()
		return Node{}, err
	}
	d, err := dst.resolve(op, ctx, true)
	if err != nil {
		_ = cref.Release()
		src.discard()
		return Node{}, err
	}
	d.ctx = cref
	s, err := src.resolve(op, ctx, true)
	if err != nil {
		d.release()
		return Node{}, err
	}
	if s.bytes == 0 || s.bytes > d.bytes {
		d.release()
		s.release()
		return Node{}, invalid(op, "copy of %d bytes into %d", s.bytes, d.bytes)
	}
	if g := b.g; g.root != nil && (d.other || s.other) {
		d.release()
		s.release()
		return Node{}, invalid(op, "a conditional node's body runs in the graph's context only (CUDA requires it): memory of another context is refused there")
	}
	g := b.g
	var ob [3]release.Owner
	owners := s.appendOwners(d.appendOwners(ob[:0]))
	multi := ctx != g.ctx || d.other || s.other
	return g.add(op, b.deps, owners, func(dp *cu.CUgraphNode, n uintptr) error {
		c := &g.scr.copy
		*c = cu.CUDA_MEMCPY3D_v2{WidthInBytes: uintptr(s.bytes), Height: 1, Depth: 1}
		c.SrcMemoryType, c.SrcHost, c.SrcDevice = s.side()
		c.DstMemoryType, c.DstHost, c.DstDevice = d.side()
		if err := cu.GraphAddMemcpyNode(&g.scr.node, g.h, dp, n, c, cu.CUcontext(seam.Context(ctx))); err != nil {
			return err
		}
		if multi {
			g.markMulti()
		}
		return nil
	})
}

// MemAllocOptions are the options of a memory-alloc node.
type MemAllocOptions struct {
	// Device is where the memory lives; nil means the graph's device.
	Device *driver.Device
	// AccessFrom are other devices given read-write access to the memory
	// (the device it lives on always has it).
	AccessFrom []*driver.Device
}

// MemAlloc adds a memory-alloc node (cuGraphAddMemAllocNode): bytes of
// device memory on the graph's device, allocated when the node runs, at the
// address returned, which later nodes may use (as a DevicePtr argument or a
// DevicePtr operand). The graph owns the memory: free it with a MemFree
// node, or let an executable made with AutoFreeOnLaunch free it.
func (b Builder) MemAlloc(bytes int, o MemAllocOptions) (Node, driver.DevicePtr, error) {
	const op = "Graph.MemAlloc"
	if err := b.check(op); err != nil {
		return Node{}, 0, err
	}
	if bytes <= 0 {
		return Node{}, 0, invalid(op, "%d bytes", bytes)
	}
	if len(o.AccessFrom) > maxPeers {
		return Node{}, 0, invalid(op, "%d peer devices (at most %d)", len(o.AccessFrom), maxPeers)
	}
	dev := b.g.ctx.Device()
	if o.Device != nil {
		if o.Device.Ordinal() < 0 {
			return Node{}, 0, invalid(op, "zero Device")
		}
		dev = o.Device
	}
	for _, p := range o.AccessFrom {
		if p.Ordinal() < 0 {
			return Node{}, 0, invalid(op, "nil or zero peer device")
		}
	}
	g := b.g
	var ptr driver.DevicePtr
	node, err := g.add(op, b.deps, nil, func(d *cu.CUgraphNode, n uintptr) error {
		a := &g.scr.alloc
		*a = cu.CUDA_MEM_ALLOC_NODE_PARAMS{Bytesize: uintptr(bytes)}
		a.PoolProps.AllocType = cu.CU_MEM_ALLOCATION_TYPE_PINNED
		a.PoolProps.Location = cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(dev.Ordinal())}
		for i, p := range o.AccessFrom {
			g.scr.access[i] = cu.CUmemAccessDesc{
				Location: cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(p.Ordinal())},
				Flags:    cu.CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
			}
		}
		if len(o.AccessFrom) > 0 {
			a.AccessDescs, a.AccessDescCount = &g.scr.access[0], uintptr(len(o.AccessFrom))
		}
		if err := cu.GraphAddMemAllocNode(&g.scr.node, g.h, d, n, a); err != nil {
			return err
		}
		ptr = driver.DevicePtr(a.Dptr)
		return nil
	})
	return node, ptr, err
}

// MemFree adds a memory-free node (cuGraphAddMemFreeNode) for memory a
// MemAlloc node of this graph allocated.
func (b Builder) MemFree(p driver.DevicePtr) (Node, error) {
	const op = "Graph.MemFree"
	if err := b.check(op); err != nil {
		return Node{}, err
	}
	if p == 0 {
		return Node{}, invalid(op, "nil address")
	}
	g := b.g
	return g.add(op, b.deps, nil, func(d *cu.CUgraphNode, n uintptr) error {
		return cu.GraphAddMemFreeNode(&g.scr.node, g.h, d, n, cu.CUdeviceptr(p))
	})
}

// Child adds a child-graph node (cuGraphAddChildGraphNode) that runs a copy
// of child. What child's nodes hold stays alive as long as this graph or
// anything made from it may run the copy, even after child is closed.
func (b Builder) Child(child *Graph) (Node, error) {
	const op = "Graph.Child"
	if err := b.check(op); err != nil {
		return Node{}, err
	}
	g := b.g
	if child == g {
		return Node{}, invalid(op, "a graph cannot be its own child")
	}
	if err := child.acquire(op); err != nil {
		return Node{}, err
	}
	defer child.release()
	if !child.ctx.Same(g.ctx) {
		return Node{}, invalid(op, "the child graph belongs to another context")
	}
	if child.root != nil {
		return Node{}, invalid(op, "a body graph belongs to its node and cannot be a child")
	}
	if child.graphCore == g.top() {
		return Node{}, invalid(op, "a graph cannot be a child of one of its own bodies")
	}
	t := g.top() // a body's root holds the user objects
	// The copy embedded in the node uses what child's tables hold: g takes
	// its own reference on each of child's user objects. child's family
	// lock is held from the snapshot until the driver has copied it, so no
	// node added to child meanwhile can escape the snapshot.
	var uos []cu.CUuserObject
	return g.addWith(op, b.deps, nil, child, func(d *cu.CUgraphNode, n uintptr) error {
		if child.multi && g.root != nil {
			return invalid(op, "the child graph has nodes in several contexts: a conditional node's body runs in the graph's context only (CUDA requires it)")
		}
		uos = append(uos[:0], child.uos...)
		child.shared()
		for i, uo := range uos {
			if err := cu.GraphRetainUserObject(t.h, uo, 1, 0); err != nil {
				for _, r := range uos[:i] {
					_ = cu.GraphReleaseUserObject(t.h, r, 1)
				}
				return err
			}
		}
		if err := cu.GraphAddChildGraphNode(&g.scr.node, g.h, d, n, child.h); err != nil {
			for _, r := range uos {
				_ = cu.GraphReleaseUserObject(t.h, r, 1)
			}
			return err
		}
		t.uos = append(t.uos, uos...) // under g's family lock
		if child.multi {
			t.multi = true
		}
		child.sink.forward(g.sink) // g's executables run child's host nodes
		return nil
	})
}

// EventRecord adds an event-record node (cuGraphAddEventRecordNode); the
// event is held for as long as the node may run.
func (b Builder) EventRecord(e *driver.Event) (Node, error) {
	return b.event("Graph.EventRecord", e, cu.GraphAddEventRecordNode)
}

// EventWait adds an event-wait node (cuGraphAddEventWaitNode); the event is
// held for as long as the node may run.
func (b Builder) EventWait(e *driver.Event) (Node, error) {
	return b.event("Graph.EventWait", e, cu.GraphAddEventWaitNode)
}

func (b Builder) event(op string, e *driver.Event, addFn func(*cu.CUgraphNode, cu.CUgraph, *cu.CUgraphNode, uintptr, cu.CUevent) error) (Node, error) {
	if err := b.check(op); err != nil {
		return Node{}, err
	}
	ref, err := seam.Hold(e)
	if err != nil {
		return Node{}, err
	}
	g := b.g
	if !e.Context().Same(g.ctx) {
		_ = ref.Release()
		return Node{}, invalid(op, "the event belongs to another context than the graph")
	}
	h := cu.CUevent(seam.Event(e))
	return g.add(op, b.deps, []release.Owner{ref}, func(d *cu.CUgraphNode, n uintptr) error {
		return addFn(&g.scr.node, g.h, d, n, h)
	})
}
