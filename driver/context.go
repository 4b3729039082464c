package driver

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// Context is a CUDA context: a device's primary context (retained) or one
// made with NewContext.
//
// # Concurrency
//
// A Context is safe for concurrent use. CUDA's current context is per OS
// thread and goroutines move between threads, so every call that needs a
// current context locks the OS thread, makes this context current, calls,
// and unlocks. Users never call LockOSThread or set a context themselves.
//
// # Lifetime
//
// Objects made from a context (streams, events, buffers, modules, pools)
// hold a reference to it, and so does every call in flight: Close marks it
// closed at once, so nothing new can be made from it, and releases it when
// the last of them is done. Two Context values of one device's primary
// context (two PrimaryContext calls) are the same context: buffers of one
// launch on streams of the other. A Context dropped without Close is
// released by a cleanup once nothing made from it is left.
//
// # Faults
//
// A kernel fault (an error matching ErrSticky) does not stay in the
// context whose kernel caused it: CUDA fails every context of the process
// from then on, this one, the primary context and any made afterwards.
type Context struct {
	h       cu.CUcontext
	dev     *Device
	primary bool
	obj     lifetime.Object // the owner + 1 per call in flight + 1 per live child

	peerMu sync.Mutex
	peers  map[cu.CUcontext]bool

	// Host functions queued on the context's streams and not yet run: when
	// a sticky error means CUDA will never run them, what they hold is
	// released (see cancelPending).
	pendMu  sync.Mutex
	pending []uintptr

	staging *stagingPool // page-locked blocks for copies of Go slices

	// Panics of host functions whose stream was closed before they were
	// returned, for the next Synchronize (see hostPanicked).
	errMu sync.Mutex
	nerrs atomic.Int32 // len(errs), for Synchronize to skip errMu when none
	errs  []error

	cleanup runtime.Cleanup // releases a Context that became unreachable without Close
}

// PrimaryContext retains the device's primary context
// (cuDevicePrimaryCtxRetain); Close releases it.
func (d *Device) PrimaryContext() (*Context, error) {
	const op = "Device.PrimaryContext"
	if err := d.check(op); err != nil {
		return nil, err
	}
	var h cu.CUcontext
	if err := cu.DevicePrimaryCtxRetain(&h, d.h); err != nil {
		return nil, err
	}
	return newContext(h, d, true), nil
}

func newContext(h cu.CUcontext, d *Device, primary bool) *Context {
	pool := &stagingPool{}
	c := &Context{h: h, dev: d, primary: primary, staging: pool}
	dh := d.h
	destroy := func() error {
		forgetContext(h, primary)
		// Nothing holds c any more, so no copy uses a staging block.
		serr := boundTo(h, pool.drain)
		var err error
		if primary {
			err = cu.DevicePrimaryCtxRelease(dh)
		} else {
			err = cu.CtxDestroy(h)
		}
		if err == nil {
			err = serr
		}
		return err
	}
	initDropped(c, &c.obj, &c.cleanup, dropped{destroy: destroy})
	return c
}

// ContextFlags are cuCtxCreate flags.
type ContextFlags uint32

// Context flags (CU_CTX_*).
const (
	ContextSchedAuto         ContextFlags = 0  // CU_CTX_SCHED_AUTO
	ContextSchedSpin         ContextFlags = 1  // CU_CTX_SCHED_SPIN
	ContextSchedYield        ContextFlags = 2  // CU_CTX_SCHED_YIELD
	ContextSchedBlockingSync ContextFlags = 4  // CU_CTX_SCHED_BLOCKING_SYNC
	ContextMapHost           ContextFlags = 8  // CU_CTX_MAP_HOST
	ContextLMemResizeToMax   ContextFlags = 16 // CU_CTX_LMEM_RESIZE_TO_MAX
)

// NewContext creates a context on d (cuCtxCreate); Close destroys it. Most
// programs want PrimaryContext, which the CUDA runtime and other libraries
// share.
func (d *Device) NewContext(flags ContextFlags) (*Context, error) {
	return d.NewContextWith(ContextOptions{Flags: flags})
}

// ContextOptions are the parameters of NewContextWith.
type ContextOptions struct {
	// Flags are the cuCtxCreate flags.
	Flags ContextFlags
	// SMCount, when above 0, limits the context to that many
	// multiprocessors (execution affinity, CU_EXEC_AFFINITY_TYPE_SM_COUNT).
	// CUDA supports it on Volta and later under MPS only; see
	// Device.SMCountAffinitySupported. The driver may round the count up.
	SMCount int
}

// NewContextWith creates a context on d with options (cuCtxCreate with
// CUctxCreateParams); Close destroys it. Graphics-interop (CIG) parameters
// are not offered.
func (d *Device) NewContextWith(o ContextOptions) (*Context, error) {
	const op = "Device.NewContext"
	if err := d.check(op); err != nil {
		return nil, err
	}
	var params *cu.CUctxCreateParams
	var aff cu.CUexecAffinityParam
	if o.SMCount != 0 {
		sms, err := d.SMCount()
		if err != nil {
			return nil, err
		}
		if o.SMCount < 0 || o.SMCount > sms {
			return nil, invalid(op, "SM count %d (the device has %d)", o.SMCount, sms)
		}
		ok, err := d.SMCountAffinitySupported()
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("driver: %s: an SM-count limit needs execution-affinity support (Volta+ under MPS), which %s lacks: %w",
				op, d, ErrUnsupportedExecAffinity)
		}
		aff.Type = cu.CU_EXEC_AFFINITY_TYPE_SM_COUNT
		aff.Param.SmCount().Val = uint32(o.SMCount)
		params = &cu.CUctxCreateParams{ExecAffinityParams: &aff, NumExecAffinityParams: 1}
	}
	var h cu.CUcontext
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := cu.CtxCreate(&h, params, uint32(o.Flags), d.h)
	if err != nil && isNotSupported(err) {
		if params != nil {
			return nil, err
		}
		err = cu.CtxCreate_v3020(&h, uint32(o.Flags), d.h)
	}
	if err != nil {
		return nil, err
	}
	// cuCtxCreate pushed the new context on this thread: pop it, so the
	// thread is left as it was.
	var popped cu.CUcontext
	_ = cu.CtxPopCurrent(&popped)
	return newContext(h, d, false), nil
}

// SMCountAffinitySupported reports whether contexts on d can be limited to
// a number of multiprocessors (cuDeviceGetExecAffinitySupport).
func (d *Device) SMCountAffinitySupported() (bool, error) {
	if err := d.check("Device.SMCountAffinitySupported"); err != nil {
		return false, err
	}
	var v int32
	if err := cu.DeviceGetExecAffinitySupport(&v, cu.CU_EXEC_AFFINITY_TYPE_SM_COUNT, d.h); err != nil {
		return false, err
	}
	return v != 0, nil
}

// SMCount is the number of multiprocessors the context may use
// (cuCtxGetExecAffinity): the device's count unless the context was made
// with ContextOptions.SMCount.
func (c *Context) SMCount() (int, error) {
	p := new(cu.CUexecAffinityParam)
	err := c.with("Context.SMCount", func() error { return cu.CtxGetExecAffinity(p, cu.CU_EXEC_AFFINITY_TYPE_SM_COUNT) })
	if err != nil {
		return 0, err
	}
	return int(p.Param.SmCount().Val), nil
}

func isNotSupported(err error) bool {
	_, ok := err.(*SymbolError)
	return ok
}

// Device is the context's device (nil for a nil or zero Context).
func (c *Context) Device() *Device {
	if c == nil {
		return nil
	}
	return c.dev
}

// holdRef takes a reference on c for a child made from it (released by the
// child's destroy) or for a call; it fails once c is closed.
func (c *Context) hold(op string) error {
	if c == nil {
		return invalid(op, "nil context")
	}
	if !c.obj.Acquire() {
		return notOpen(op, "context")
	}
	return nil
}

// release drops a reference taken with hold.
func (c *Context) release() { _ = c.obj.Release() }

// with is the one verb for "run f with c current": it holds a reference on
// c for the call, so that a Close racing with f cannot destroy c under it,
// and runs f bound to c (see bound). It fails once c is closed.
func (c *Context) with(op string, f func() error) error {
	if err := c.hold(op); err != nil {
		return err
	}
	defer c.release()
	return bound(c, f)
}

// Close releases the context: at once if nothing made from it is still
// open and no call is using it, otherwise when the last of those is done.
// It is idempotent and always returns the first call's result; later use
// of c is an error matching ErrClosed. Panics of host functions on closed
// streams that Synchronize has not returned, and those that happen after
// Close, are reported through lifetime.Errors.
func (c *Context) Close() error {
	if c == nil {
		return invalid("Context.Close", "nil context")
	}
	if c.dev == nil {
		return nil // a zero Context owns nothing
	}
	err := c.obj.Close()
	// After the closed flag: hostPanicked reports what comes later.
	c.errMu.Lock()
	errs := c.errs
	c.errs = nil
	c.nerrs.Store(0)
	c.errMu.Unlock()
	for _, e := range errs {
		release.NoteLost(e)
	}
	return err
}

// Synchronize waits for all work in the context (cuCtxSynchronize). It
// also returns, once, the panics of host functions that ran on streams of
// c that were closed before a Synchronize of theirs could return them
// (see Stream.LaunchHostFunc).
func (c *Context) Synchronize() error {
	const op = "Context.Synchronize"
	if err := c.hold(op); err != nil {
		return err
	}
	defer c.release()
	return c.takeErrs(c.sawError(c.sync()))
}

// sync waits for the context's work: cuCtxSynchronize with the context
// named (the CUDA 13.0 ABI), or, on older drivers, bound to this thread.
// The caller holds c.
func (c *Context) sync() error {
	err := cu.CtxSynchronize(c.h)
	if err != nil && isNotSupported(err) {
		err = bound(c, cu.CtxSynchronize_v2000)
	}
	return err
}

// MemGetInfo returns the device's free and total memory in bytes
// (cuMemGetInfo).
func (c *Context) MemGetInfo() (free, total int, err error) {
	sc := getScratch()
	defer putScratch(sc)
	err = c.with("Context.MemGetInfo", func() error { return cu.MemGetInfo(&sc[0], &sc[1]) })
	return int(sc[0]), int(sc[1]), err
}

// Limit reads a context limit (cuCtxGetLimit): a size in bytes or a count.
func (c *Context) Limit(l Limit) (int, error) {
	sc := getScratch()
	defer putScratch(sc)
	err := c.with("Context.Limit", func() error { return cu.CtxGetLimit(&sc[0], cu.CUlimit(l)) })
	return int(sc[0]), err
}

// SetLimit sets a context limit (cuCtxSetLimit); v must not be negative.
func (c *Context) SetLimit(l Limit, v int) error {
	if v < 0 {
		return invalid("Context.SetLimit", "negative value %d for %v", v, l)
	}
	return c.with("Context.SetLimit", func() error { return cu.CtxSetLimit(cu.CUlimit(l), uintptr(v)) })
}

// EnablePeerAccess lets kernels in c access memory of peer
// (cuCtxEnablePeerAccess). Buffers of peer may then be passed to kernels
// launched in c, except memory allocated in stream order or imported from
// another process, which peer access does not reach (see MemPool.SetAccess).
// A kernel given a peer's buffer without peer access is not refused (CUDA
// offers no query of the access in force: NCCL, for one, enables it on its
// own): its accesses fault, an unrecoverable error of the context
// (ErrSticky). Enabling it again fails with an error matching
// ErrPeerAccessAlreadyEnabled, which callers may ignore.
func (c *Context) EnablePeerAccess(peer *Context) error {
	return c.peerAccess("Context.EnablePeerAccess", peer, true)
}

// DisablePeerAccess undoes EnablePeerAccess (cuCtxDisablePeerAccess).
func (c *Context) DisablePeerAccess(peer *Context) error {
	return c.peerAccess("Context.DisablePeerAccess", peer, false)
}

func (c *Context) peerAccess(op string, peer *Context, enable bool) error {
	if err := c.hold(op); err != nil {
		return err
	}
	defer c.release()
	if err := peer.hold(op); err != nil {
		return err
	}
	defer peer.release()
	if peer.h == c.h {
		return invalid(op, "a context is not its own peer")
	}
	err := bound(c, func() error {
		if enable {
			return cu.CtxEnablePeerAccess(peer.h, 0)
		}
		return cu.CtxDisablePeerAccess(peer.h)
	})
	if err != nil {
		return err
	}
	c.peerMu.Lock()
	if c.peers == nil {
		c.peers = map[cu.CUcontext]bool{}
	}
	if enable {
		c.peers[peer.h] = true
	} else {
		delete(c.peers, peer.h)
	}
	c.peerMu.Unlock()
	return nil
}

// canUse reports whether memory of other may be used by work in c. Two
// Context values for one CUDA context (two PrimaryContext handles of a
// device) are the same context.
func (c *Context) canUse(other *Context) bool {
	if other == c || other.h == c.h {
		return true
	}
	c.peerMu.Lock()
	defer c.peerMu.Unlock()
	return c.peers[other.h]
}

// Raw calls f with the CUcontext handle, with the context current on the
// calling OS thread (locked for the call) and held (it works after Close
// while something made from the context still holds it), so that other CUDA
// libraries, and purecuda's graph layer, can make calls that need it. The
// handle must not be kept after f returns, and f must leave the thread's
// context stack as it found it.
func (c *Context) Raw(f func(handle uintptr) error) error {
	const op = "Context.Raw"
	if f == nil {
		return invalid(op, "nil function")
	}
	// Not c.hold: Raw works while anything still holds the context (a graph
	// made in it, say), even after Close; only a destroyed context fails.
	if c == nil {
		return invalid(op, "nil context")
	}
	if !c.obj.Retain() {
		return notOpen(op, "context")
	}
	defer c.release()
	return bound(c, func() error { return f(uintptr(c.h)) })
}

// holdRef takes a reference that keeps the CUDA context alive after Close
// until it is released: for dependents such as graphs (seam.Hold). It
// fails once c is closed.
func (c *Context) holdRef() (lifetime.Ref, error) {
	if c == nil {
		return lifetime.Ref{}, invalid("hold", "nil context")
	}
	r, ok := c.obj.Hold()
	if !ok {
		return lifetime.Ref{}, notOpen("hold", "context")
	}
	return r, nil
}

// Same reports whether c and other are the same CUDA context (two
// PrimaryContext handles of one device are).
func (c *Context) Same(other *Context) bool {
	return c != nil && other != nil && c.h == other.h && c.dev != nil
}

// addPending records a host-function callback queued on one of c's
// streams; pruned of callbacks that ran once the list grows.
func (c *Context) addPending(id uintptr) {
	c.pendMu.Lock()
	if len(c.pending) >= 64 && len(c.pending) == cap(c.pending) {
		kept := c.pending[:0]
		for _, p := range c.pending {
			if hostfn.Pending(p) {
				kept = append(kept, p)
			}
		}
		clear(c.pending[len(kept):])
		c.pending = kept
	}
	c.pending = append(c.pending, id)
	c.pendMu.Unlock()
}

// cancelPending releases what every not-yet-run host function of c holds:
// after a sticky error CUDA runs nothing more on the context.
func (c *Context) cancelPending() {
	c.pendMu.Lock()
	ids := c.pending
	c.pending = nil
	c.pendMu.Unlock()
	for _, id := range ids {
		hostfn.Cancel(id)
	}
}

// sawError looks at an error a call on c returned: a sticky error (the
// context is unusable, and CUDA will run nothing more on it) cancels the
// pending host functions. It returns err.
func (c *Context) sawError(err error) error {
	if err != nil && isSticky(err) {
		c.cancelPending()
	}
	return err
}

// isSticky reports whether err is a CUDA error that leaves the context
// unusable: nothing queued on it runs any more. That is every error
// matching ErrSticky, and two that end a context without being documented
// as ending the process: an uncorrectable ECC error and a destroyed
// context.
func isSticky(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code.sticky() || e.Code == ErrEccUncorrectable || e.Code == ErrContextIsDestroyed
}
