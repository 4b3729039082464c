package graph

import (
	"fmt"
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// deviceMemory is what Device takes of a *driver.Buffer.
type deviceMemory interface {
	Ptr() driver.DevicePtr
	Size() int
	Context() *driver.Context
}

// Operand is one side of a memcpy node or the target of a memset node.
// Make one with Device, Host, Slice, RawHost or RawDevice. An Operand holds nothing until
// a node is added with it. It is a value that may be used from several
// goroutines at once (one made by RawHost or RawDevice with an owner is taken by the first
// node added with it; other uses are refused).
type Operand struct {
	dev    deviceMemory
	host   hostMemory
	ptr    unsafe.Pointer // Slice: the Go array, pinned at add
	addr   uintptr        // Raw: the address, never held as a Go pointer (a device address can look like one)
	bytes  int
	isHost bool
	pin    bool
	owner  *rawOwner // Raw's owner, handed over once (or nil)
	err    error
}

type hostMemory interface {
	Pointer() unsafe.Pointer
}

// Device is device memory, b's, held by the node (a view made with
// Buffer.Slice names its part).
func Device[T any](b *driver.Buffer[T]) Operand {
	if b == nil {
		return Operand{err: fmt.Errorf("nil device memory: %w", driver.ErrInvalidArgument)}
	}
	return Operand{dev: b}
}

// Host is pinned host memory (a *driver.HostBuffer), held by the node.
func Host[T any](h *driver.HostBuffer[T]) Operand {
	if h == nil {
		return Operand{err: fmt.Errorf("nil host buffer: %w", driver.ErrInvalidArgument)}
	}
	return Operand{host: h, bytes: h.Len() * int(unsafe.Sizeof(*new(T))), isHost: true}
}

// Slice is ordinary Go memory that the node reads or writes each time it
// runs, in stream order, as it would a HostBuffer: a host node before the
// memcpy node may fill the slice, and one after it sees what the copy
// wrote. From the node's add for as long as the node may run, the slice is
// registered with CUDA as page-locked memory (cuMemHostRegister, whole
// pages, shared with other slices on the same pages) and pinned, so that
// it neither moves nor is freed. Registering costs more than an add (tens
// of microseconds, more for large slices) and is paid once per node, not
// per launch. Its element type must hold no Go pointers. Do not grow it
// past its capacity meanwhile: the node keeps the original array.
func Slice[T any](s []T) Operand {
	if !seam.PlainData(reflect.TypeFor[T]()) {
		return Operand{err: fmt.Errorf("slice of %s, which holds Go pointers: %w", reflect.TypeFor[T](), driver.ErrInvalidArgument)}
	}
	if len(s) == 0 {
		return Operand{err: fmt.Errorf("empty slice: %w", driver.ErrInvalidArgument)}
	}
	return Operand{ptr: unsafe.Pointer(unsafe.SliceData(s)), bytes: len(s) * int(unsafe.Sizeof(s[0])), isHost: true, pin: true}
}

// oneShot wraps a Raw operand's owner so that it is handed over once: an
// Operand is a value and may be copied, but its owner must be released
// exactly once. A second use of the operand is refused.
func oneShot(o release.Owner) *rawOwner {
	if o == nil {
		return nil
	}
	return &rawOwner{o: o}
}

type rawOwner struct {
	taken atomic.Bool
	o     release.Owner
}

// take hands the owner over, once.
func (r *rawOwner) take() (release.Owner, bool) {
	if r.taken.Swap(true) {
		return nil, false
	}
	return r.o, true
}

// discard releases the owner of a Raw operand that a refused call never
// used (nothing for other operands).
func (o Operand) discard() {
	if o.owner != nil {
		if own, ok := o.owner.take(); ok {
			_ = own.Release()
		}
	}
}

// resolved is an Operand with its memory held: owner must be released
// unless handed to an add.
type resolved struct {
	ptr   unsafe.Pointer // host memory
	dev   uintptr        // device memory: an address, not a Go pointer
	bytes int
	host  bool
	other bool // device memory of another context than the node's
	owner release.Owner
	ctx   lifetime.Ref // the node's context when it is not the graph's (set by the add)
}

func (o resolved) owners() []release.Owner {
	if o.owner == nil {
		return nil
	}
	return []release.Owner{o.owner}
}

// appendOwners appends what the node holds for the operand: its memory's
// owner, and the node's context when the add set it.
func (o resolved) appendOwners(dst []release.Owner) []release.Owner {
	if o.owner != nil {
		dst = append(dst, o.owner)
	}
	if o.ctx.Valid() {
		dst = append(dst, o.ctx)
	}
	return dst
}

func (o resolved) release() {
	if o.owner != nil {
		_ = o.owner.Release()
	}
	_ = o.ctx.Release() // the zero Ref releases nothing
}

func (o resolved) side() (cu.CUmemorytype, unsafe.Pointer, cu.CUdeviceptr) {
	if o.host {
		return cu.CU_MEMORYTYPE_HOST, o.ptr, 0
	}
	return cu.CU_MEMORYTYPE_DEVICE, nil, cu.CUdeviceptr(o.dev)
}

// resolve holds the operand's memory and reads its address, for a node
// that runs in ctx. Device memory of another context (a buffer's, as its
// Context method tells) is refused unless peer is set (a memcpy node,
// which copies between the memory of any two contexts; other is set).
func (o Operand) resolve(op string, ctx *driver.Context, peer bool) (resolved, error) {
	if o.err != nil {
		o.discard()
		return resolved{}, fmt.Errorf("graph: %s: %w", op, o.err)
	}
	switch {
	case o.dev != nil:
		ref, err := seam.Hold(o.dev)
		if err != nil {
			return resolved{}, err
		}
		p := uintptr(o.dev.Ptr())
		if p == 0 { // closed between Hold and Ptr: the memory is held, but no new use
			_ = ref.Release()
			return resolved{}, closed(op, "device memory")
		}
		other := false
		if dc := o.dev.Context(); dc != ctx && !dc.Same(ctx) {
			if !peer {
				_ = ref.Release()
				return resolved{}, invalid(op, "the device memory belongs to another context than the node's (the graph's, or Builder.On's)")
			}
			other = true
		}
		return resolved{dev: p, bytes: o.dev.Size(), owner: ref, other: other}, nil
	case o.host != nil:
		ref, err := seam.Hold(o.host)
		if err != nil {
			return resolved{}, err
		}
		return resolved{ptr: o.host.Pointer(), bytes: o.bytes, host: true, owner: ref}, nil
	case o.pin:
		reg, err := seam.RegisterHost(op, ctx, o.ptr, uintptr(o.bytes))
		if err != nil {
			return resolved{}, err
		}
		return resolved{ptr: o.ptr, bytes: o.bytes, host: true, owner: reg}, nil
	}
	var owner release.Owner
	if o.owner != nil {
		own, ok := o.owner.take()
		if !ok {
			return resolved{}, invalid(op, "a Raw operand with an owner can be used once: its owner was handed over already")
		}
		owner = own
	}
	if !o.isHost {
		return resolved{dev: o.addr, bytes: o.bytes, owner: owner}, nil
	}
	// Raw host memory: C's, or Go memory its owner keeps; CUDA's copy
	// parameters take it as a pointer.
	return resolved{ptr: *(*unsafe.Pointer)(unsafe.Pointer(&o.addr)), bytes: o.bytes, host: true, owner: owner}, nil
}
