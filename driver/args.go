package driver

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
)

// argBlock holds kernel argument values and the array of pointers to them
// that cuLaunchKernel takes. CUDA copies the values at launch, so a block
// can be reused as soon as the launch call returns.
type argBlock struct {
	data   []uint64 // 8-byte aligned storage for the values
	offs   []int    // word offset of each argument
	sizes  []uintptr
	ptrs   []unsafe.Pointer
	allocs []*allocation // buffers named by the arguments
}

func (b *argBlock) reset() {
	b.data = b.data[:0]
	b.offs = b.offs[:0]
	b.sizes = b.sizes[:0]
	b.ptrs = b.ptrs[:0]
	clear(b.allocs)
	b.allocs = b.allocs[:0]
}

// add appends size bytes from p.
func (b *argBlock) add(p unsafe.Pointer, size uintptr) {
	words := int((size + 7) / 8)
	off := len(b.data)
	for i := 0; i < words; i++ {
		b.data = append(b.data, 0)
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&b.data[off])), size), unsafe.Slice((*byte)(p), size))
	b.offs = append(b.offs, off)
	b.sizes = append(b.sizes, size)
}

// finish points ptrs at the values (data may have moved while growing).
func (b *argBlock) finish() *unsafe.Pointer {
	if len(b.offs) == 0 {
		return nil
	}
	for _, off := range b.offs {
		b.ptrs = append(b.ptrs, unsafe.Pointer(&b.data[off]))
	}
	return &b.ptrs[0]
}

// marshal appends one argument. ctx is the launch's context, for checking
// buffers.
func (b *argBlock) marshal(op string, i int, v any, ctx *Context) error {
	switch x := v.(type) {
	case int8:
		b.add(unsafe.Pointer(&x), 1)
	case uint8:
		b.add(unsafe.Pointer(&x), 1)
	case bool:
		b.add(unsafe.Pointer(&x), 1)
	case int16:
		b.add(unsafe.Pointer(&x), 2)
	case uint16:
		b.add(unsafe.Pointer(&x), 2)
	case int32:
		b.add(unsafe.Pointer(&x), 4)
	case uint32:
		b.add(unsafe.Pointer(&x), 4)
	case float32:
		b.add(unsafe.Pointer(&x), 4)
	case int64:
		b.add(unsafe.Pointer(&x), 8)
	case uint64:
		b.add(unsafe.Pointer(&x), 8)
	case float64:
		b.add(unsafe.Pointer(&x), 8)
	case uintptr:
		b.add(unsafe.Pointer(&x), 8)
	case DevicePtr:
		b.add(unsafe.Pointer(&x), 8)
	case devicePointer:
		p, owner, err := x.devPtr(op)
		if err != nil {
			return fmt.Errorf("argument %d: %w", i, err)
		}
		if ctx != nil && !ctx.canUse(owner) {
			return invalid(op, "argument %d: the buffer belongs to another context (enable peer access first)", i)
		}
		b.add(unsafe.Pointer(&p), 8)
		b.allocs = append(b.allocs, bufferAllocation(x))
	case int, uint:
		return invalid(op, "argument %d: %T has no fixed C size: use int32 or int64 (C int is int32)", i, v)
	case nil:
		return invalid(op, "argument %d: nil", i)
	default:
		rv := reflect.ValueOf(v)
		t := rv.Type()
		if (t.Kind() != reflect.Struct && t.Kind() != reflect.Array) || !plainData(t) {
			return invalid(op, "argument %d: unsupported type %T (integers, floats, DevicePtr, *Buffer, or a struct or array without Go pointers)", i, v)
		}
		cp := reflect.New(t)
		cp.Elem().Set(rv)
		b.add(cp.UnsafePointer(), t.Size())
	}
	return nil
}

// bufferAllocation returns the allocation behind a *Buffer[T].
func bufferAllocation(x devicePointer) *allocation {
	if h, ok := x.(interface{ allocation() *allocation }); ok {
		return h.allocation()
	}
	return nil
}

func (b *Buffer[T]) allocation() *allocation { return b.a }

// check compares the arguments with the kernel's parameters.
func (b *argBlock) check(op string, f *Function) error {
	params, err := f.paramInfo()
	if err != nil || params == nil {
		return err
	}
	if len(params) != len(b.sizes) {
		return invalid(op, "kernel %s takes %d arguments, got %d", f.name, len(params), len(b.sizes))
	}
	for i, p := range params {
		if p.size != b.sizes[i] {
			return invalid(op, "kernel %s: argument %d: the kernel expects %d bytes, got %d", f.name, i, p.size, b.sizes[i])
		}
	}
	return nil
}

var blockPool = sync.Pool{New: func() any { return new(argBlock) }}

// Args are kernel arguments marshalled once, for launching many times with
// no allocation (Stream.LaunchArgs). Until Close, and until launches in
// progress have returned, Args keep the kernel's module or library loaded
// and retain the buffers named in them, so neither can be freed while the
// Args can still launch.
type Args struct {
	// What LaunchArgs reads comes first, copied from f so that a launch
	// reads neither f nor its module.
	fh      cu.CUfunction
	fctx    *Context
	kparams *unsafe.Pointer
	loaded  // Args' own use count: 1 for the owner + 1 per launch in progress
	frame   hotFrame

	f       *Function
	blk     argBlock
	cleanup runtime.Cleanup
}

// argsHeld is what Args hold until their last use: the buffers' allocations
// and the module or library.
type argsHeld struct {
	allocs []*allocation
	ld     *loaded
}

// free releases what the Args held (the unload of Args' use count).
func (h *argsHeld) free() error {
	err := releaseAllocs(h.allocs)
	h.ld.release()
	return err
}

// orphan is the cleanup of Args that were never closed.
func (h *argsHeld) orphan() {
	for _, a := range h.allocs {
		dropOrphan(a)
	}
	go h.ld.release() // may unload the module: not on the cleanup goroutine
}

// NewArgs marshals and checks args for f once.
func (f *Function) NewArgs(args ...any) (*Args, error) {
	const op = "Function.NewArgs"
	if err := f.acquire(op); err != nil {
		return nil, err
	}
	a, err := f.newArgs(op, args)
	if err != nil {
		f.release()
		return nil, err
	}
	return a, nil
}

func (f *Function) newArgs(op string, args []any) (*Args, error) {
	a := &Args{f: f, fh: f.h, fctx: f.ctx}
	for i, v := range args {
		if err := a.blk.marshal(op, i, v, f.ctx); err != nil {
			return nil, err
		}
	}
	if err := a.blk.check(op, f); err != nil {
		return nil, err
	}
	retained := slices.DeleteFunc(a.blk.allocs, func(al *allocation) bool { return al == nil })
	if err := retainAllocs(op, retained); err != nil {
		return nil, err
	}
	if err := a.frame.ready(); err != nil {
		_ = releaseAllocs(retained)
		return nil, err
	}
	a.blk.allocs = retained
	a.kparams = a.blk.finish()
	held := &argsHeld{allocs: retained, ld: f.ld}
	a.loaded.init("args", held.free)
	a.cleanup = runtime.AddCleanup(a, (*argsHeld).orphan, held)
	return a, nil
}

// SetArg replaces argument i with v, which must have the same size as the
// argument it replaces. It allocates nothing. Do not call it concurrently
// with a launch of the same Args.
func SetArg[T any](a *Args, i int, v T) error {
	if a == nil || a.closed.Load() {
		return closedErr("SetArg", "args")
	}
	if i < 0 || i >= len(a.blk.sizes) {
		return invalid("SetArg", "argument %d of %d", i, len(a.blk.sizes))
	}
	size := unsafe.Sizeof(v)
	if size != a.blk.sizes[i] {
		return invalid("SetArg", "argument %d is %d bytes, %T is %d", i, a.blk.sizes[i], v, size)
	}
	switch any(v).(type) {
	case int, uint:
		return invalid("SetArg", "%T has no fixed C size", v)
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&a.blk.data[a.blk.offs[i]])), size), unsafe.Slice((*byte)(unsafe.Pointer(&v)), size))
	return nil
}

// Close releases the buffers the arguments retained and the kernel's
// module: at once, or when the last launch in progress returns. It is
// idempotent and returns the first call's result.
func (a *Args) Close() error {
	if a == nil {
		return invalid("Args.Close", "nil args")
	}
	a.cleanup.Stop()
	return a.loaded.close()
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

func dim(x int, yz []int) Dim3 {
	d := Dim3{X: x, Y: 1, Z: 1}
	if len(yz) > 0 {
		d.Y = yz[0]
	}
	if len(yz) > 1 {
		d.Z = yz[1]
	}
	if len(yz) > 2 {
		d.Z = -1 // rejected at launch
	}
	return d
}

// Grid is a grid of x (by y by z) blocks.
func Grid(x int, yz ...int) Dim3 { return dim(x, yz) }

// Block is a block of x (by y by z) threads.
func Block(x int, yz ...int) Dim3 { return dim(x, yz) }

func checkDims(op string, d *dimLimits, grid, block Dim3) error {
	for i, v := range [3]int{grid.X, grid.Y, grid.Z} {
		if v < 1 || v > d.maxGrid[i] {
			return invalid(op, "grid dimension %c = %d, the device allows 1 to %d", "xyz"[i], v, d.maxGrid[i])
		}
	}
	for i, v := range [3]int{block.X, block.Y, block.Z} {
		if v < 1 || v > d.maxBlock[i] {
			return invalid(op, "block dimension %c = %d, the device allows 1 to %d", "xyz"[i], v, d.maxBlock[i])
		}
	}
	if n := block.X * block.Y * block.Z; n > d.maxThreads {
		return invalid(op, "block of %d threads, the device allows %d", n, d.maxThreads)
	}
	return nil
}
