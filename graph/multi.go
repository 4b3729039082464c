package graph

import (
	"runtime"
	"sync/atomic"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Nodes in several contexts (several GPUs).
//
// A graph has one context, the one it binds for its CUDA calls, but CUDA
// runs each kernel, memcpy and memset node in a context of its own: a
// kernel node in its CUfunction's context (or, for a library kernel, the
// params' ctx field), a memcpy or memset node in the context passed to
// cuGraphAddMemcpyNode or cuGraphAddMemsetNode. A node whose context is
// not the graph's holds that context in its owners, like everything else
// it names; the graph is marked as spanning several contexts (multi),
// which CUDA refuses for device launches and which per-node executable
// updates of kernels, memsets and memcpys do not cover.

// On returns a Builder whose kernel, memcpy and memset nodes run in ctx
// instead of the graph's context: on ctx's device. nil means the graph's
// context. A module's kernel must belong to ctx (a library's kernel runs
// in any). A node made through it holds ctx for as long as the graph or
// anything made from it may run the node. Other nodes (host, event,
// child, memory and conditional nodes) and captures through the Builder
// are as without On. See "Several GPUs" in the package documentation.
func (b Builder) On(ctx *driver.Context) Builder {
	b.ctx = ctx
	return b
}

// On returns a Builder whose root nodes run in ctx; see Builder.On.
func (g *Graph) On(ctx *driver.Context) Builder { return g.After().On(ctx) }

// nodeContext is the context a kernel, memcpy or memset node runs in: the
// Builder's (On), else own (a module kernel's context, nil for anything
// else), else the graph's. When it is not the graph's, the node holds it
// with the returned reference (the zero Ref otherwise). A body graph's
// nodes must run in its context, which CUDA requires of a conditional
// node's bodies.
func (b Builder) nodeContext(op string, own *driver.Context) (*driver.Context, lifetime.Ref, error) {
	g := b.g
	ctx := b.ctx
	if ctx == nil {
		ctx = own
	}
	if ctx == nil || ctx == g.ctx || ctx.Same(g.ctx) {
		if own != nil && own != g.ctx && !own.Same(g.ctx) {
			return nil, lifetime.Ref{}, invalid(op, "the kernel belongs to another context than the node's (Builder.On)")
		}
		return g.ctx, lifetime.Ref{}, nil
	}
	if own != nil && !own.Same(ctx) {
		return nil, lifetime.Ref{}, invalid(op, "the kernel belongs to another context than the node's (Builder.On)")
	}
	if g.root != nil {
		return nil, lifetime.Ref{}, invalid(op, "a conditional node's body runs in the graph's context only (CUDA requires it)")
	}
	if b.ctx == nil {
		return ctx, lifetime.Ref{}, nil // a module kernel's: its Function holds its module, which holds the context
	}
	ref, err := seam.Hold(ctx)
	if err != nil {
		return nil, lifetime.Ref{}, err
	}
	return ctx, ref, nil
}

// markMulti notes that a node of g (or of a graph embedded in it) runs in
// or names another context than g's; the family lock is held.
func (c *graphCore) markMulti() { c.top().multi = true }

// refuseMultiDeviceLaunch is Instantiate's check of the DeviceLaunch flag:
// CUDA instantiates a graph for device launch only when all its nodes run
// in one context (CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED). The
// family lock is held.
func (c *graphCore) refuseMultiDeviceLaunch(op string, flags InstantiateFlags) error {
	if flags&DeviceLaunch != 0 && c.top().multi {
		return invalid(op, "a graph with nodes in several contexts cannot be instantiated for device launch (CUDA requires one context)")
	}
	return nil
}

// singleContext refuses a per-node update of a kernel, memset or memcpy
// node of an executable whose graph has nodes in several contexts: the
// update would name the graph's context, and CUDA keeps a node in its
// context. Exec.Update, or a new executable, changes such graphs.
func (e *Exec) singleContext(op string) error {
	e.mu.Lock()
	multi := e.multi
	e.mu.Unlock()
	if multi {
		return invalid(op, "the executable's graph has nodes in several contexts: per-node updates of kernels, memsets and memcpys are not offered for it (use Exec.Update, or instantiate again)")
	}
	return nil
}

// boundCall is a launch or upload of an executable whose graph has nodes
// in several contexts, made with the executable's context current on a
// locked OS thread and the thread left as it was found. A single-context
// launch needs no current context (the stream carries it, DESIGN fact 1);
// this one is not known to, and libcuda crashed once inside it (SIGSEGV at
// address 0x68, the graph stress on an H200) on a thread without one, as
// it does for node adds. e.mu is held; e holds its context.
func (e *execCore) boundCall(call func(cu.CUgraphExec, cu.CUstream) error, s cu.CUstream) (err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.CtxPushCurrent(cu.CUcontext(seam.Context(e.ctx))); err != nil {
		return err
	}
	defer func() {
		if perr := cu.CtxSetCurrent(0); err == nil {
			err = perr
		}
	}()
	return call(e.h, s)
}

// destroyAfterWork is destroy for an executable with nodes in several
// contexts. CUDA destroys a running executable once its work is done, on
// its own time, while what the nodes name (another context among them) is
// released once that work is done too, possibly first; so such an
// executable is destroyed only after the work queued so far has finished,
// and what it held is released after that.
func (e *execCore) destroyAfterWork() error {
	e.mu.Lock()
	var rest []release.Owner
	for _, o := range e.own {
		rest = append(rest, o)
	}
	e.own = nil
	rest = e.argOwners(rest)
	if e.held != nil {
		rest = append(rest, e.held)
		e.held = nil
	}
	e.checkpoint([]release.Owner{&lateDestroy{e: e, rest: rest}})
	e.mu.Unlock()
	return nil
}

// lateDestroy destroys a multi-context executable once its work is done,
// then releases what it held (see destroyAfterWork).
type lateDestroy struct {
	e    *execCore
	rest []release.Owner
	done atomic.Bool
}

// Release destroys the executable, once; while a capture runs in its
// family, the destroy waits for the capture's end.
func (d *lateDestroy) Release() error {
	if d.done.Swap(true) {
		return lifetime.ErrOverRelease
	}
	return d.run()
}

func (d *lateDestroy) run() error {
	e := d.e
	f := e.fam
	f.mu.Lock()
	if f.capture != nil {
		f.later = append(f.later, d.run)
		f.mu.Unlock()
		return nil
	}
	err := e.ctx.Raw(func(uintptr) error { return cu.GraphExecDestroy(e.h) })
	f.mu.Unlock()
	if err != nil {
		// Close returned long ago, and whoever releases d (the release
		// queue, a stream's wait, a capture's end) drops the error: it is
		// counted and kept for lifetime.Errors here, once.
		release.NoteError(err)
		err = lifetime.Counted(err)
	}
	for _, o := range d.rest {
		if rerr := o.Release(); err == nil {
			err = rerr
		}
	}
	d.rest = nil
	_ = e.srcRef.Release()
	_ = e.ctxRef.Release()
	return err
}
