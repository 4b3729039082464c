package driver

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// Function is a kernel: from a Module (bound to its context) or a Library
// (launchable in any context). A module or library hands out one Function
// per name; the Function holds its module or library loaded until that is
// closed and nothing holds the Function any more.
//
// A Function is safe for concurrent use: launches of it, NewArgs and its
// attribute calls may run at once from several goroutines (SetAttribute
// applies to launches made after it returns). It has no Close of its own:
// its module's or library's Close closes it, after the calls in flight;
// calls that start after that fail with ErrClosed, while Args made before
// still launch.
type Function struct {
	// What Launch reads comes first, within one cache line: the Function
	// is 192 bytes, a size class whose objects start on a line.
	h      cu.CUfunction
	ctx    *Context         // nil for library kernels
	shape  atomic.Uint32    // shapeUnread until params were read
	quickN atomic.Int32     // with shapeSmall: nsmall+1, for Launch's quick path; else 0
	nsmall uint8            // with shapeSmall: the parameter count …
	small  [smallArgs]uint8 // … and their sizes
	// bufType is the type word of the *Buffer[T] last passed to Launch
	// with f, so that the next such argument is known without a type
	// assertion (see smallBlock.fill).
	bufType atomic.Uintptr
	// obj is the Function's own lifetime: owner (its module or library,
	// which closes it on Close) + calls in flight + holders (Args, graph
	// nodes). Its destroy drops the Function's reference on the module or
	// library, so a launch counts on f's line alone.
	obj lifetime.Object

	params     []paramInfo // nil when the driver cannot say (before 12.4)
	paramsDone atomic.Bool // params were read
	paramsMu   sync.Mutex  // held while reading params
	kernel     cu.CUkernel // library kernels only
	mod        *Module
	lib        *Library
	name       string
	_          [16]byte // to 192 bytes (TestLaunchLayout)
}

type paramInfo struct{ offset, size uintptr }

// A kernel's shape says whether Launch can marshal its arguments into a
// small block on the stack (see smallBlock), and how to check them there.
const (
	shapeUnread  = iota // parameters not read yet: the general path reads them
	shapeUnknown        // the driver cannot say (before 12.4): nothing to check
	shapeSmall          // up to smallArgs parameters of up to 8 bytes: nsmall, small
	shapeLarge          // more or larger parameters: the general path
)

// Name is the kernel's name as looked up ("" for a nil Function).
func (f *Function) Name() string {
	if f == nil {
		return ""
	}
	return f.name
}

// acquire keeps the function's module or library loaded during a call.
func (f *Function) acquire(op string) error {
	if f == nil {
		return invalid(op, "nil function")
	}
	if !f.obj.Acquire() {
		return notOpen(op, "function's module or library")
	}
	return nil
}

func (f *Function) release() { _ = f.obj.Release() }

// Raw calls fn with the CUfunction handle, for use with other CUDA
// libraries. The module or library stays loaded while fn runs; the handle
// must not be kept after fn returns.
func (f *Function) Raw(fn func(handle uintptr) error) error {
	if fn == nil {
		return invalid("Function.Raw", "nil function")
	}
	if err := f.acquire("Function.Raw"); err != nil {
		return err
	}
	defer f.release()
	return fn(uintptr(f.h))
}

// holdRef takes a reference that keeps the kernel's module or library loaded
// after Close until it is released: for graph nodes that launch it
// (seam.Hold).
func (f *Function) holdRef() (lifetime.Ref, error) {
	if err := f.acquire("hold"); err != nil {
		return lifetime.Ref{}, err
	}
	return lifetime.RefOf(&f.obj), nil
}

// Context is the context of a module kernel, nil for a library kernel
// (which may run in any context) or a nil Function.
func (f *Function) Context() *Context {
	if f == nil {
		return nil
	}
	return f.ctx
}

// paramInfo returns each parameter's offset and size, read once
// (cuFuncGetParamInfo, or cuKernelGetParamInfo for a library kernel; CUDA
// 12.4+). On older drivers it returns nil and launches are not checked. c is
// a context a library kernel's query may bind (nil if the caller has none).
func (f *Function) paramInfo(c *Context) ([]paramInfo, error) {
	if f.paramsDone.Load() {
		return f.params, nil
	}
	return f.readParams(c)
}

// readParams reads the parameters. A library kernel's query needs a current
// context: c, which the caller keeps alive, or else device 0's primary
// context if it is active. A failure is not kept, so that a later call with
// a context can succeed.
func (f *Function) readParams(c *Context) ([]paramInfo, error) {
	f.paramsMu.Lock()
	defer f.paramsMu.Unlock()
	if f.paramsDone.Load() {
		return f.params, nil
	}
	ps, known := []paramInfo{}, true
	query := func() error {
		for i := uintptr(0); ; i++ {
			var off, size uintptr
			var err error
			if f.lib != nil {
				err = cu.KernelGetParamInfo(f.kernel, i, &off, &size)
			} else {
				err = cu.FuncGetParamInfo(f.h, i, &off, &size)
			}
			switch {
			case err == nil:
				ps = append(ps, paramInfo{off, size})
			case isNotSupported(err):
				known = false
				return nil
			case errors.Is(err, ErrInvalidValue):
				return nil // past the last parameter
			default:
				return err
			}
		}
	}
	var err error
	switch {
	case f.lib == nil:
		err = query()
	case c != nil:
		err = bound(c, query)
	default:
		err = withActivePrimary("Function.ParamCount", query)
	}
	if err != nil {
		return nil, err
	}
	shape := uint32(shapeUnknown)
	if known {
		f.params = ps
		shape = shapeSmall
		if len(ps) > smallArgs {
			shape = shapeLarge
		}
		for i, p := range ps {
			if p.size > 8 || shape == shapeLarge {
				shape = shapeLarge
				break
			}
			f.small[i] = uint8(p.size)
		}
		f.nsmall = uint8(min(len(ps), smallArgs))
	}
	f.paramsDone.Store(true)
	f.shape.Store(shape) // after nsmall and small: Launch reads them once it sees it
	if shape == shapeSmall {
		f.quickN.Store(int32(f.nsmall) + 1) // the same for Launch's quick path
	}
	return f.params, nil
}

// withActivePrimary runs f with device 0's primary context current, if that
// context is active; it does not activate it.
func withActivePrimary(op string, f func() error) error {
	d, err := DeviceByOrdinal(0)
	if err != nil {
		return err
	}
	var flags uint32
	var active int32
	if err := cu.DevicePrimaryCtxGetState(d.h, &flags, &active); err != nil {
		return err
	}
	if active == 0 {
		return fmt.Errorf("driver: %s: a library kernel's parameters can be read only with a context current, and device 0's primary context is not active: launch on a stream or pass a buffer first: %w",
			op, ErrInvalidContext)
	}
	c, err := d.PrimaryContext()
	if err != nil {
		return err
	}
	err = bound(c, f)
	if e := c.Close(); err == nil {
		err = e
	}
	return err
}

// ParamCount is the number of kernel parameters, and whether the driver
// could tell (it can from CUDA 12.4).
func (f *Function) ParamCount() (int, bool, error) {
	if err := f.acquire("Function.ParamCount"); err != nil {
		return 0, false, err
	}
	defer f.release()
	ps, err := f.paramInfo(nil)
	return len(ps), ps != nil, err
}

// Attribute reads a kernel attribute (cuFuncGetAttribute). For a library
// kernel, which belongs to no context, it reads the attribute on device 0;
// AttributeOn names the device.
func (f *Function) Attribute(a FunctionAttribute) (int, error) {
	return f.AttributeOn(nil, a)
}

// AttributeOn reads a kernel attribute on device d (cuKernelGetAttribute
// for library kernels). A module kernel belongs to one context, so d must be
// nil or that context's device.
func (f *Function) AttributeOn(d *Device, a FunctionAttribute) (int, error) {
	const op = "Function.Attribute"
	if err := f.acquire(op); err != nil {
		return 0, err
	}
	defer f.release()
	var v int32
	dev, err := f.attrDevice(op, d)
	if err != nil {
		return 0, err
	}
	if f.lib != nil {
		err = cu.KernelGetAttribute(&v, cu.CUfunction_attribute(a), f.kernel, dev)
	} else {
		err = bound(f.ctx, func() error { return cu.FuncGetAttribute(&v, cu.CUfunction_attribute(a), f.h) })
	}
	return int(v), err
}

// SetAttribute sets a kernel attribute such as
// FuncAttrMaxDynamicSharedSizeBytes (cuFuncSetAttribute). For a library
// kernel it sets it on device 0; SetAttributeOn names the device.
func (f *Function) SetAttribute(a FunctionAttribute, v int) error {
	return f.SetAttributeOn(nil, a, v)
}

// SetAttributeOn sets a kernel attribute on device d (cuKernelSetAttribute
// for library kernels); for a module kernel d must be nil or its context's
// device.
func (f *Function) SetAttributeOn(d *Device, a FunctionAttribute, v int) error {
	const op = "Function.SetAttribute"
	if err := f.acquire(op); err != nil {
		return err
	}
	defer f.release()
	dev, err := f.attrDevice(op, d)
	if err != nil {
		return err
	}
	if f.lib != nil {
		return cu.KernelSetAttribute(cu.CUfunction_attribute(a), int32(v), f.kernel, dev)
	}
	return bound(f.ctx, func() error { return cu.FuncSetAttribute(f.h, cu.CUfunction_attribute(a), int32(v)) })
}

// attrDevice is the device an attribute call names: d, or device 0 for a
// library kernel when d is nil. A module kernel's device is fixed.
func (f *Function) attrDevice(op string, d *Device) (cu.CUdevice, error) {
	if f.lib == nil {
		if d != nil && f.ctx.dev.h != d.h {
			return 0, invalid(op, "kernel %s belongs to a context on %s, not %s", f.name, f.ctx.dev, d)
		}
		return f.ctx.dev.h, nil
	}
	if d != nil {
		return d.h, nil
	}
	var dev cu.CUdevice
	err := cu.DeviceGet(&dev, 0)
	return dev, err
}

// MaxThreadsPerBlock is the largest block this kernel can be launched with.
func (f *Function) MaxThreadsPerBlock() (int, error) { return f.Attribute(FuncAttrMaxThreadsPerBlock) }

// NumRegisters is the number of registers each thread uses.
func (f *Function) NumRegisters() (int, error) { return f.Attribute(FuncAttrNumRegs) }

// SharedMemory is the kernel's static shared memory in bytes.
func (f *Function) SharedMemory() (int, error) { return f.Attribute(FuncAttrSharedSizeBytes) }

func (f *Function) occupancyCheck(op string) error {
	if err := f.acquire(op); err != nil {
		return err
	}
	if f.ctx == nil {
		f.release()
		return invalid(op, "occupancy needs a module kernel (library kernels have no context)")
	}
	return nil
}

// MaxActiveBlocksPerSM is how many blocks of blockSize threads, with
// dynamicSharedMem bytes of dynamic shared memory each, fit on one
// streaming multiprocessor (cuOccupancyMaxActiveBlocksPerMultiprocessor).
func (f *Function) MaxActiveBlocksPerSM(blockSize, dynamicSharedMem int) (int, error) {
	const op = "Function.MaxActiveBlocksPerSM"
	if blockSize <= 0 || dynamicSharedMem < 0 {
		return 0, invalid(op, "block size %d, shared memory %d", blockSize, dynamicSharedMem)
	}
	if err := f.occupancyCheck(op); err != nil {
		return 0, err
	}
	defer f.release()
	var n int32
	err := bound(f.ctx, func() error {
		return cu.OccupancyMaxActiveBlocksPerMultiprocessor(&n, f.h, int32(blockSize), uintptr(dynamicSharedMem))
	})
	return int(n), err
}

// SuggestedBlockSize is the block size that maximises occupancy and the
// smallest grid that fills the device at it (cuOccupancyMaxPotentialBlockSize).
func (f *Function) SuggestedBlockSize(dynamicSharedMem int) (minGrid, blockSize int, err error) {
	const op = "Function.SuggestedBlockSize"
	if dynamicSharedMem < 0 {
		return 0, 0, invalid(op, "shared memory %d", dynamicSharedMem)
	}
	if err := f.occupancyCheck(op); err != nil {
		return 0, 0, err
	}
	defer f.release()
	var g, b int32
	err = bound(f.ctx, func() error {
		return cu.OccupancyMaxPotentialBlockSize(&g, &b, f.h, 0, uintptr(dynamicSharedMem), 0)
	})
	return int(g), int(b), err
}
