package driver

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/purecuda/cuda/internal/cu"
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
// hold a reference to it: Close marks it closed at once, so nothing new can
// be made from it, and releases it when the last of them is closed.
type Context struct {
	h       cu.CUcontext
	dev     *Device
	primary bool

	refs      atomic.Int64 // 1 for the owner + 1 per live child
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	relErr    error

	peerMu sync.Mutex
	peers  map[*Context]bool
}

// PrimaryContext retains the device's primary context
// (cuDevicePrimaryCtxRetain); Close releases it.
func (d *Device) PrimaryContext() (*Context, error) {
	var h cu.CUcontext
	if err := cu.DevicePrimaryCtxRetain(&h, d.h); err != nil {
		return nil, err
	}
	c := &Context{h: h, dev: d, primary: true}
	c.refs.Store(1)
	return c, nil
}

// ContextFlags are cuCtxCreate flags.
type ContextFlags uint32

// Context flags (CU_CTX_*).
const (
	ContextSchedAuto         ContextFlags = ContextFlags(cu.CU_CTX_SCHED_AUTO)
	ContextSchedSpin         ContextFlags = ContextFlags(cu.CU_CTX_SCHED_SPIN)
	ContextSchedYield        ContextFlags = ContextFlags(cu.CU_CTX_SCHED_YIELD)
	ContextSchedBlockingSync ContextFlags = ContextFlags(cu.CU_CTX_SCHED_BLOCKING_SYNC)
	ContextMapHost           ContextFlags = ContextFlags(cu.CU_CTX_MAP_HOST)
	ContextLMemResizeToMax   ContextFlags = ContextFlags(cu.CU_CTX_LMEM_RESIZE_TO_MAX)
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
	if d == nil {
		return nil, invalid(op, "nil device")
	}
	var params *cu.CUctxCreateParams
	var aff cu.CUexecAffinityParam
	if o.SMCount != 0 {
		sms, err := d.MultiprocessorCount()
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
	c := &Context{h: h, dev: d}
	c.refs.Store(1)
	return c, nil
}

// SMCountAffinitySupported reports whether contexts on d can be limited to
// a number of multiprocessors (cuDeviceGetExecAffinitySupport).
func (d *Device) SMCountAffinitySupported() (bool, error) {
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
	var p cu.CUexecAffinityParam
	err := c.use("Context.SMCount", func() error { return cu.CtxGetExecAffinity(&p, cu.CU_EXEC_AFFINITY_TYPE_SM_COUNT) })
	if err != nil {
		return 0, err
	}
	return int(p.Param.SmCount().Val), nil
}

func isNotSupported(err error) bool {
	_, ok := err.(*cu.SymbolError)
	return ok
}

// Device is the context's device.
func (c *Context) Device() *Device { return c.dev }

// check reports whether c can be used for new work.
func (c *Context) check(op string) error {
	if c == nil {
		return invalid(op, "nil context")
	}
	if c.closed.Load() {
		return closedErr(op, "context")
	}
	return nil
}

// use runs f bound to c while holding a reference, so that a Close racing
// with f cannot destroy c under it; it fails once c is closed.
func (c *Context) use(op string, f func() error) error {
	if err := c.acquire(op); err != nil {
		return err
	}
	defer c.release()
	return bound(c, f)
}

// acquire takes a reference for a new child; it fails once c is closed.
func (c *Context) acquire(op string) error {
	if err := c.check(op); err != nil {
		return err
	}
	c.refs.Add(1)
	return nil
}

// release drops a reference; the last one releases the CUDA context.
func (c *Context) release() {
	if c.refs.Add(-1) != 0 {
		return
	}
	if c.primary {
		c.relErr = cu.DevicePrimaryCtxRelease(c.dev.h)
	} else {
		c.relErr = cu.CtxDestroy(c.h)
	}
}

// Close releases the context: at once if nothing made from it is still
// open, otherwise when the last of those is closed. It is idempotent and
// always returns the first call's result; later use of c is an error
// matching ErrClosed.
func (c *Context) Close() error {
	if c == nil {
		return invalid("Context.Close", "nil context")
	}
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.release()
		c.closeErr = c.relErr
	})
	return c.closeErr
}

// Synchronize waits for all work in the context (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	if err := c.acquire("Context.Synchronize"); err != nil {
		return err
	}
	defer c.release()
	return c.sync()
}

// sync waits for the context's work: cuCtxSynchronize with the context
// named (the CUDA 13.0 ABI), or, on older drivers, bound to this thread.
func (c *Context) sync() error {
	err := cu.CtxSynchronize(c.h)
	if err != nil && isNotSupported(err) {
		err = bound(c, cu.CtxSynchronize_v2000)
	}
	return err
}

// MemGetInfo returns the device's free and total memory (cuMemGetInfo).
func (c *Context) MemGetInfo() (free, total uint64, err error) {
	var f, t uintptr
	err = c.use("Context.MemGetInfo", func() error { return cu.MemGetInfo(&f, &t) })
	return uint64(f), uint64(t), err
}

// Limit reads a context limit (cuCtxGetLimit).
func (c *Context) Limit(l Limit) (uint64, error) {
	var v uintptr
	err := c.use("Context.Limit", func() error { return cu.CtxGetLimit(&v, l) })
	return uint64(v), err
}

// SetLimit sets a context limit (cuCtxSetLimit).
func (c *Context) SetLimit(l Limit, v uint64) error {
	return c.use("Context.SetLimit", func() error { return cu.CtxSetLimit(l, uintptr(v)) })
}

// EnablePeerAccess lets kernels in c access memory of peer
// (cuCtxEnablePeerAccess). Buffers of peer may then be passed to kernels
// launched in c.
func (c *Context) EnablePeerAccess(peer *Context) error {
	if err := c.check("Context.EnablePeerAccess"); err != nil {
		return err
	}
	if err := peer.check("Context.EnablePeerAccess"); err != nil {
		return err
	}
	if peer == c {
		return invalid("Context.EnablePeerAccess", "a context is not its own peer")
	}
	if err := c.use("Context.EnablePeerAccess", func() error { return cu.CtxEnablePeerAccess(peer.h, 0) }); err != nil {
		return err
	}
	c.peerMu.Lock()
	if c.peers == nil {
		c.peers = map[*Context]bool{}
	}
	c.peers[peer] = true
	c.peerMu.Unlock()
	return nil
}

// DisablePeerAccess undoes EnablePeerAccess (cuCtxDisablePeerAccess).
func (c *Context) DisablePeerAccess(peer *Context) error {
	if err := c.check("Context.DisablePeerAccess"); err != nil {
		return err
	}
	if err := peer.check("Context.DisablePeerAccess"); err != nil {
		return err
	}
	if err := c.use("Context.DisablePeerAccess", func() error { return cu.CtxDisablePeerAccess(peer.h) }); err != nil {
		return err
	}
	c.peerMu.Lock()
	delete(c.peers, peer)
	c.peerMu.Unlock()
	return nil
}

// canUse reports whether memory of other may be used by work in c.
func (c *Context) canUse(other *Context) bool {
	if other == c {
		return true
	}
	c.peerMu.Lock()
	defer c.peerMu.Unlock()
	return c.peers[other]
}

// Raw calls f with the CUcontext handle. The handle must not be kept after f
// returns: c may be released any time after.
func (c *Context) Raw(f func(handle uintptr) error) error {
	if err := c.acquire("Context.Raw"); err != nil {
		return err
	}
	defer c.release()
	return f(uintptr(c.h))
}
