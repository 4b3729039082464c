package driver

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/cu"
)

// LaunchConfig is everything about a launch but the kernel and arguments.
type LaunchConfig struct {
	Grid  GridDim
	Block BlockDim
	// SharedMem is the dynamic shared memory per block, in bytes.
	SharedMem int
	// Cluster, when set, is the thread-block cluster shape (compute 9.0+).
	Cluster ClusterDim
	// Cooperative launches the grid cooperatively (grid-wide sync allowed).
	Cooperative bool
}

// Launch queues kernel f on s over grid × block threads with args
// (cuLaunchKernel). Arguments may be sized integers (int8 … uint64),
// float32, float64, bool, DevicePtr, *Buffer[T], or a struct or array
// without Go pointers, passed by value. Where the driver can tell (CUDA
// 12.4+), the count and size of the arguments are checked against the kernel
// first. For hot loops without allocations see Function.NewArgs and
// LaunchArgs.
//
// On linux/amd64, up to 8 arguments of up to 8 bytes are marshalled on the
// calling goroutine's stack, which cannot move while cuLaunchKernel runs,
// unless Go code runs on the same thread inside it: a program that
// registers a Go function as a driver API callback (CUPTI, through purego)
// must launch with LaunchArgs, whose arguments live on the heap.
func (s *Stream) Launch(f *Function, grid GridDim, block BlockDim, args ...any) error {
	// The common case is written out here, in one function: a module
	// kernel of known small shape, on a stream of ours in its context,
	// with scalar arguments and buffers of the type the kernel last saw,
	// and grid and block sizes every device allows. libcuda's launch
	// evicts the caller's code from the CPU caches, and each function a
	// launch runs costs misses of its own; this runs few. Anything unusual
	// takes launchSlow, having launched nothing and holding nothing: the
	// general path does the same work, or says what is wrong. Few
	// branches: each may miss in the branch predictor, which libcuda's
	// launch has evicted too.
	if !ccall.StackFrames || s == nil || f == nil || s.quickFn == 0 || f.ctx != s.ctx ||
		uint(f.quickN.Load()) != uint(len(args))+1 || !quickDims(grid, block) || !s.obj.Acquire() {
		return s.launchSlow(f, grid, block, args)
	}
	if !f.obj.Acquire() {
		_ = s.obj.Release()
		return s.launchSlow(f, grid, block, args)
	}
	// The call's frame is filled first, so that the sizes need no
	// registers while the arguments are marshalled.
	var cf ccall.Short
	s.launchFrame(&cf, f.h, grid, block)
	var vals [smallArgs]uint64
	var ptrs [smallArgs]unsafe.Pointer
	var allocs [smallBufs]*allocation
	var err error
	var params *unsafe.Pointer
	nb := 0
	bt := f.bufType.Load()
	for i := range args {
		typ, data := efaceWords(&args[i])
		ptrs[i] = unsafe.Pointer(&vals[i])
		if typ == bt && bt != 0 {
			b := (*Buffer[byte])(data)
			if b == nil || nb == smallBufs || f.small[i] != 8 {
				goto bail
			}
			a := b.a
			if a == nil || b.closed.Load() || a.ctx != s.ctx || !a.obj.Retain() {
				goto bail
			}
			allocs[nb] = a
			nb++
			vals[i] = uint64(b.at(a))
			continue
		}
		v, size := quickScalar(typ, data)
		if size == 0 || size != f.small[i] {
			goto bail
		}
		vals[i] = v // the value's bytes at the start of its slot (little-endian)
	}
	for _, a := range allocs[:nb] {
		if a.stream != nil {
			a.usedOn(s)
		}
	}
	if len(args) > 0 {
		params = &ptrs[0]
	}
	// Uncaptured, counted (see capture.go); a captured launch takes the
	// general path.
	if s.inflight.Add(1); s.capture.Load() != nil {
		s.inflight.Add(-1)
		goto bail
	}
	// Pointers into this stack become integers here, and nothing between
	// here and the C call can move the stack (ccall.StackFrames).
	cf.Args[9] = uintptr(unsafe.Pointer(params))
	err = cu.LaunchKernelStatus(cf.Call())
	{
		w := s.obj.Refs() + f.obj.Refs()
		for _, a := range allocs[:nb] {
			w += a.obj.Refs()
		}
		warmed(w)
	}
	s.inflight.Add(-1) // after the reads above, which fetch its line
	for _, a := range allocs[:nb] {
		_ = a.obj.Release()
	}
	_ = f.obj.Release()
	if err != nil {
		err = s.ctx.sawError(err)
	}
	_ = s.obj.Release()
	return err

bail: // launched nothing: let go of what was held
	for _, a := range allocs[:nb] {
		_ = a.obj.Release()
	}
	_ = f.obj.Release()
	_ = s.obj.Release()
	return s.launchSlow(f, grid, block, args)
}

// launchFrame fills cf, a zero frame, for a cuLaunchKernel (s.quickFn) of
// kernel fh on s over grid × block, without dynamic shared memory; the
// caller sets the parameters (Args[9]).
func (s *Stream) launchFrame(cf *ccall.Short, fh cu.CUfunction, grid GridDim, block BlockDim) {
	cf.Fn = s.quickFn
	cf.Args[0] = uintptr(fh)
	cf.Args[1], cf.Args[2], cf.Args[3] = uintptr(uint32(grid.X)), uintptr(uint32(grid.Y)), uintptr(uint32(grid.Z))
	cf.Args[4], cf.Args[5], cf.Args[6] = uintptr(uint32(block.X)), uintptr(uint32(block.Y)), uintptr(uint32(block.Z))
	cf.Args[8] = uintptr(s.h)
}

// launchSlow is Launch's general path.
//
//go:noinline
func (s *Stream) launchSlow(f *Function, grid GridDim, block BlockDim, args []any) error {
	return s.LaunchWith(f, LaunchConfig{Grid: grid, Block: block}, args...)
}

// quickDims reports whether grid × block is within what every device CUDA
// 13 supports allows, in few branches: it takes grid y and z up to 32768
// only, not 65535 (checkDims checks the rest).
func quickDims(grid GridDim, block BlockDim) bool {
	return uint(grid.X-1) < 1<<31-1 && uint(grid.Y-1)|uint(grid.Z-1) < 1<<15 &&
		uint(block.X-1)|uint(block.Y-1) < 1024 && uint(block.Z-1) < 64 && block.X*block.Y*block.Z <= 1024
}

// LaunchWith is Launch with shared memory, clusters or cooperative launch
// (cuLaunchKernelEx when a cluster or cooperation is asked for). The
// stream, the kernel's module or library and the buffers among the
// arguments are held for the call, so a Close racing with it cannot destroy
// or free any of them before the kernel is queued.
func (s *Stream) LaunchWith(f *Function, cfg LaunchConfig, args ...any) error {
	const op = "Stream.Launch"
	if err := s.acquire(op); err != nil {
		return err
	}
	err := s.launchHeld(op, f, cfg, args)
	s.release()
	return err
}

func (s *Stream) launchHeld(op string, f *Function, cfg LaunchConfig, args []any) error {
	if err := s.launchCheck(op, f, cfg); err != nil {
		return err
	}
	if err := f.acquire(op); err != nil {
		return err
	}
	if f.ctx == nil { // a library kernel: its Close waits for s.ctx's work
		f.lib.launchedIn(s.ctx)
	}
	var err error
	if sh := f.shape.Load(); ccall.StackFrames && (sh == shapeSmall || sh == shapeUnknown) && !s.special && cfg.Cluster == (ClusterDim{}) && !cfg.Cooperative {
		var ok bool
		if ok, err = s.launchSmall(op, f, cfg, sh, args); ok {
			f.release()
			return s.ctx.sawError(err)
		}
	}
	blk := blockPool.Get().(*argBlock)
	err = s.marshalAndLaunch(op, f, cfg, blk, args)
	blk.reset()
	blockPool.Put(blk)
	f.release()
	return s.ctx.sawError(err)
}

// launchSmall launches through a small block on the stack when the
// arguments fit it and pass its checks (a plain launch on a stream of
// ours: the caller checked); it reports false, having launched
// nothing and released what it held, when they do not, and the caller
// takes the general path, which explains what is wrong.
func (s *Stream) launchSmall(op string, f *Function, cfg LaunchConfig, shape uint32, args []any) (bool, error) {
	var blk smallBlock
	if len(args) > smallArgs || !blk.fill(op, f, args, s) || (shape == shapeSmall && !blk.matches(f)) {
		blk.release()
		return false, nil
	}
	var ptrs [smallArgs]unsafe.Pointer
	var params *unsafe.Pointer
	if blk.n > 0 {
		for i := range blk.n {
			ptrs[i] = unsafe.Pointer(&blk.vals[i])
		}
		params = &ptrs[0]
	}
	h := s.enter()
	err := launchKernel(s.launchFn, f.h, cfg.Grid, cfg.Block, cfg.SharedMem, s.h, params)
	if h != nil && err == nil {
		h.keepLaunch(f, blk.allocs[:blk.nb]) // captured: the graph holds them
	} else if blk.other && err == nil {
		holdOthers(s, blk.allocs[:blk.nb]) // their free waits for their own context only
	}
	s.leave(h)
	w := s.obj.Refs() + f.obj.Refs()
	for _, a := range blk.allocs[:blk.nb] {
		w += a.obj.Refs()
	}
	warmed(w)
	blk.release()
	return true, err
}

// marshalAndLaunch marshals args into blk (holding their buffers until the
// caller resets blk) and launches.
func (s *Stream) marshalAndLaunch(op string, f *Function, cfg LaunchConfig, blk *argBlock, args []any) error {
	for i, v := range args {
		if err := blk.marshal(op, i, v, s.ctx, s); err != nil {
			return err
		}
	}
	if err := blk.check(op, f, s.ctx); err != nil {
		return err
	}
	h := s.enter()
	err := s.launch(op, f, cfg, blk.finish())
	if h != nil && err == nil {
		h.keepLaunch(f, blk.allocs) // captured: the graph holds them
	} else if err == nil {
		holdOthers(s, blk.allocs) // their free waits for their own context only
	}
	s.leave(h)
	return err
}

// LaunchArgs launches with arguments marshalled by Function.NewArgs. It
// allocates nothing, and reads only s and a: everything it needs from the
// kernel was copied into a by NewArgs, and a keeps the kernel loaded.
func (s *Stream) LaunchArgs(a *Args, grid GridDim, block BlockDim) error {
	// The common case in one function (see Launch): a module kernel
	// of the stream's context, nothing to check per launch.
	if s != nil && a != nil && s.quickFn != 0 && a.checks == 0 && a.fctx == s.ctx && a.hold != nil && quickDims(grid, block) {
		if h := a.hold; h.obj.Acquire() {
			if s.obj.Acquire() {
				var cf ccall.Short
				s.launchFrame(&cf, a.fh, grid, block)
				cf.Args[9] = uintptr(unsafe.Pointer(a.kparams)) // on the heap, held by a
				if s.inflight.Add(1); s.capture.Load() != nil { // captured: the general path
					s.inflight.Add(-1)
					_ = s.obj.Release()
					_ = h.obj.Release()
					return s.launchArgsHeld(a, grid, block)
				}
				err := cu.LaunchKernelStatus(cf.Call())
				runtime.KeepAlive(a) // and so the parameters, read by the call
				warmed(s.obj.Refs() + h.obj.Refs())
				s.inflight.Add(-1) // after the reads above, which fetch its line
				if err != nil {
					err = s.ctx.sawError(err)
				}
				_ = s.obj.Release()
				_ = h.obj.Release()
				return err
			}
			_ = h.obj.Release()
		}
	}
	return s.launchArgsHeld(a, grid, block)
}

// launchArgsHeld is LaunchArgs in general: it holds a and s for the launch.
func (s *Stream) launchArgsHeld(a *Args, grid GridDim, block BlockDim) error {
	const op = "Stream.LaunchArgs"
	if err := a.acquire(op); err != nil {
		return err
	}
	if err := s.acquire(op); err != nil {
		a.release()
		return err
	}
	err := s.launchArgs(op, a, grid, block)
	s.release()
	a.release()
	return err
}

func (s *Stream) launchArgs(op string, a *Args, grid GridDim, block BlockDim) error {
	if err := s.checkTarget(op, a.f, a.fctx, grid, block); err != nil {
		return err
	}
	if a.checks != 0 {
		if a.checks&argsLibrary != 0 { // its Close waits for s.ctx's work
			a.f.lib.launchedIn(s.ctx)
		}
		for _, al := range a.hold.allocs {
			// Memory of another context is checked at every launch: the
			// peer access or pool access that let NewArgs take it may
			// have been taken away since.
			if a.checks&(argsCheckContexts|argsOtherContext) != 0 && al.ctx.h != s.ctx.h && !al.usableIn(s.ctx) {
				return invalid(op, "a buffer argument belongs to another context than the stream (enable peer access first)")
			}
			if al.stream != nil && al.ctx.h == s.ctx.h {
				al.usedOn(s)
			}
		}
	}
	if s.special {
		err := bound(s.ctx, func() error { return launchKernel(s.launchFn, a.fh, grid, block, 0, s.h, a.kparams) })
		if err == nil && a.checks&argsOtherContext != 0 {
			holdOthers(s, a.hold.allocs)
		}
		return s.ctx.sawError(err)
	}
	h := s.enter()
	err := launchKernel(s.launchFn, a.fh, grid, block, 0, s.h, a.kparams)
	if h != nil && err == nil {
		h.keepObjs(&a.hold.obj) // captured: the graph holds the Args
	} else if err == nil && a.checks&argsOtherContext != 0 {
		holdOthers(s, a.hold.allocs) // their free waits for their own context only
	}
	s.leave(h)
	warmed(s.obj.Refs() + a.hold.obj.Refs())
	return s.ctx.sawError(err)
}

// warmed takes the sum of the reference counts a launch reads right after
// cuLaunchKernel returns, before it releases them or drops the stream's
// in-flight count (on the line of its reference count). libcuda's launch evicts
// the caller's data from the CPU caches: plain reads of every count miss
// at once, where each locked release would wait for its own miss in turn.
// The sum is only kept from being optimised away (counts are never
// negative).
func warmed(sum int64) {
	if sum < 0 {
		warmSink.Store(sum)
	}
}

var warmSink atomic.Int64

// launchKernel calls cuLaunchKernel, resolved into fn (a Stream's
// launchFn), through a frame on the stack; with fn 0 it resolves it, and
// reports why it cannot.
func launchKernel(fn uintptr, fh cu.CUfunction, grid GridDim, block BlockDim, shmem int, st cu.CUstream, params *unsafe.Pointer) error {
	gx, gy, gz := uint32(grid.X), uint32(grid.Y), uint32(grid.Z)
	bx, by, bz := uint32(block.X), uint32(block.Y), uint32(block.Z)
	if fn == 0 {
		return cu.LaunchKernel(fh, gx, gy, gz, bx, by, bz, uint32(shmem), st, params, nil)
	}
	return cu.LaunchKernelShort(fn, fh, gx, gy, gz, bx, by, bz, uint32(shmem), st, params, nil)
}

// checkTarget checks that a kernel f of context fctx (nil for a library
// kernel; passed apart so that LaunchArgs need not read f) can run on s over
// grid × block.
func (s *Stream) checkTarget(op string, f *Function, fctx *Context, grid GridDim, block BlockDim) error {
	if fctx != nil && fctx != s.ctx && fctx.h != s.ctx.h {
		return invalid(op, "kernel %s belongs to another context than the stream", f.name)
	}
	return checkDims(op, &s.lim, grid, block)
}

func (s *Stream) launchCheck(op string, f *Function, cfg LaunchConfig) error {
	if f == nil {
		return invalid(op, "nil function")
	}
	if err := s.checkTarget(op, f, f.ctx, cfg.Grid, cfg.Block); err != nil {
		return err
	}
	if cfg.SharedMem < 0 || cfg.SharedMem > 1<<31-1 {
		return invalid(op, "shared memory %d", cfg.SharedMem)
	}
	if cfg.Cluster != (ClusterDim{}) {
		for i, v := range [3]int{cfg.Cluster.X, cfg.Cluster.Y, cfg.Cluster.Z} {
			if v < 1 {
				return invalid(op, "cluster dimension %c = %d", "xyz"[i], v)
			}
		}
	}
	return nil
}

func (s *Stream) launch(op string, f *Function, cfg LaunchConfig, params *unsafe.Pointer) error {
	if cfg.Cluster == (ClusterDim{}) && !cfg.Cooperative {
		if s.special {
			return bound(s.ctx, func() error { return launchKernel(s.launchFn, f.h, cfg.Grid, cfg.Block, cfg.SharedMem, s.h, params) })
		}
		return launchKernel(s.launchFn, f.h, cfg.Grid, cfg.Block, cfg.SharedMem, s.h, params)
	}
	var attrs [2]cu.CUlaunchAttribute
	n := 0
	if cfg.Cluster != (ClusterDim{}) {
		attrs[n].Id = cu.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
		d := attrs[n].Value.ClusterDim()
		d.X, d.Y, d.Z = uint32(cfg.Cluster.X), uint32(cfg.Cluster.Y), uint32(cfg.Cluster.Z)
		n++
	}
	if cfg.Cooperative {
		attrs[n].Id = cu.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
		*attrs[n].Value.Cooperative() = 1
		n++
	}
	lc := cu.CUlaunchConfig{
		GridDimX: uint32(cfg.Grid.X), GridDimY: uint32(cfg.Grid.Y), GridDimZ: uint32(cfg.Grid.Z),
		BlockDimX: uint32(cfg.Block.X), BlockDimY: uint32(cfg.Block.Y), BlockDimZ: uint32(cfg.Block.Z),
		SharedMemBytes: uint32(cfg.SharedMem), HStream: s.h, Attrs: &attrs[0], NumAttrs: uint32(n),
	}
	return bound(s.ctx, func() error { return cu.LaunchKernelEx(&lc, f.h, params, nil) })
}
