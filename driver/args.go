package driver

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
)

// inlineArgs is how many arguments of up to 8 bytes an argBlock holds
// within itself; more, or larger values, go to its spill chunks.
const inlineArgs = 8

// argBlock holds kernel argument values and the array of pointers to them
// that cuLaunchKernel takes. CUDA copies the values at launch, so a block
// can be reused as soon as the launch call returns.
//
// A launch reads every line of its block after libcuda has evicted it from
// the CPU caches, so the block keeps small launches inside itself: values
// in fixed slots that never move, pointers to them written as each argument
// is marshalled. After init the slices point into the block itself, so a
// block must not be copied.
type argBlock struct {
	ptrs   []unsafe.Pointer // one per argument: what cuLaunchKernel reads
	sizes  []uint32         // each argument's size
	allocs []*allocation    // buffers named by the arguments, each held until reset
	spill  spill

	ptrsA   [inlineArgs]unsafe.Pointer
	vals    [inlineArgs]uint64 // 8-byte aligned slots for the first arguments
	sizesA  [inlineArgs]uint32
	allocsA [4]*allocation
}

// init points the block's slices at its inline arrays. A zero block works
// too, with its slices on the heap.
func (b *argBlock) init() {
	b.ptrs, b.sizes, b.allocs = b.ptrsA[:0], b.sizesA[:0], b.allocsA[:0]
}

// reset empties the block for reuse and releases the buffers its
// arguments held.
//
// Buffers are forgotten even when no parameter was added (a buffer refused
// as the first argument is held): a pooled block keeping them would have
// its next user release them again.
func (b *argBlock) reset() {
	if len(b.allocs) > 0 {
		for _, a := range b.allocs {
			_ = a.Release()
		}
		clear(b.allocs)
		b.allocs = b.allocs[:0]
	}
	if len(b.ptrs) == 0 {
		return
	}
	b.ptrs = b.ptrs[:0]
	b.sizes = b.sizes[:0]
	b.spill.reset()
}

// slot returns zeroed, 8-byte aligned room for the next argument's value of
// size bytes, and records the argument.
func (b *argBlock) slot(size uintptr) unsafe.Pointer {
	i := len(b.ptrs)
	var p unsafe.Pointer
	if size <= 8 && i < inlineArgs {
		b.vals[i] = 0
		p = unsafe.Pointer(&b.vals[i])
	} else {
		p = b.spill.take(int((size + 7) / 8))
	}
	b.ptrs = append(b.ptrs, p)
	b.sizes = append(b.sizes, uint32(size))
	return p
}

// add appends size bytes from p.
func (b *argBlock) add(p unsafe.Pointer, size uintptr) {
	copy(unsafe.Slice((*byte)(b.slot(size)), size), unsafe.Slice((*byte)(p), size))
}

// finish returns the parameter array for cuLaunchKernel: nil for none.
func (b *argBlock) finish() *unsafe.Pointer {
	if len(b.ptrs) == 0 {
		return nil
	}
	return &b.ptrs[0]
}

// spill holds argument values that do not fit a block's slots, in chunks
// that never move once made (the block points into them) and are reused
// after reset.
type spill struct {
	chunks   [][]uint64
	cur, off int // the chunk in use and its first free word
}

// take returns words zeroed words.
func (s *spill) take(words int) unsafe.Pointer {
	for ; s.cur < len(s.chunks); s.cur, s.off = s.cur+1, 0 {
		if c := s.chunks[s.cur]; s.off+words <= len(c) {
			w := c[s.off : s.off+words]
			clear(w)
			s.off += words
			return unsafe.Pointer(&w[0])
		}
	}
	c := make([]uint64, max(words, 64))
	s.chunks = append(s.chunks, c)
	s.cur, s.off = len(s.chunks)-1, words
	return unsafe.Pointer(&c[0])
}

func (s *spill) reset() { s.cur, s.off = 0, 0 }

// marshal appends one argument. ctx is the launch's context, for checking
// buffers (nil when unknown); s, if not nil, is the launch's stream, for
// stream-ordered buffers used on another stream. A buffer argument is held
// until reset.
func (b *argBlock) marshal(op string, i int, v any, ctx *Context, s *Stream) error {
	if bits, size, ok := scalarBits(v); ok {
		putBits(b.slot(uintptr(size)), bits, size)
		return nil
	}
	switch x := v.(type) {
	case devicePointer:
		if _, data := efaceWords(&v); data == nil {
			// A nil pointer: to a Buffer, or to a type embedding one,
			// whose promoted methods would dereference it.
			return invalid(op, "argument %d: nil buffer (%T)", i, v)
		}
		al, ptr, err := x.arg(op)
		if err != nil {
			return fmt.Errorf("argument %d: %w", i, err)
		}
		b.allocs = append(b.allocs, al) // held: released by reset
		if !al.launchableIn(ctx, s) {
			return invalid(op, "argument %d: the buffer belongs to another context (enable peer access first)", i)
		}
		*(*cu.CUdeviceptr)(b.slot(8)) = ptr // a view's address, inside al
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

// scalarBits returns the bits and size in bytes of a sized scalar argument
// (an integer, float, bool, uintptr or DevicePtr; not a named type of
// one); ok is false for any other value.
func scalarBits(v any) (bits uint64, size uint8, ok bool) {
	bits, size = quickScalar(efaceWords(&v))
	return bits, size, size != 0
}

// quickTypes are the type words of the scalar argument types, the common
// ones first, with their sizes: quickScalar finds a type among them without
// reading its type descriptor (a type switch reads its hash). This is the
// one list of the scalar types a kernel argument may have.
var quickTypes = [...]struct {
	typ  uintptr
	size uint8
}{
	{typeWord(uint32(0)), 4}, {typeWord(int32(0)), 4}, {typeWord(float32(0)), 4},
	{typeWord(uint64(0)), 8}, {typeWord(int64(0)), 8}, {typeWord(float64(0)), 8},
	{typeWord(DevicePtr(0)), 8}, {typeWord(uintptr(0)), 8}, quickBool: {typeWord(false), 1},
	{typeWord(uint8(0)), 1}, {typeWord(int8(0)), 1}, {typeWord(uint16(0)), 2},
	{typeWord(int16(0)), 2},
}

// quickBool is bool's index in quickTypes.
const quickBool = 8

// typeWord is the type word of v's dynamic type.
func typeWord(v any) uintptr {
	t, _ := efaceWords(&v)
	return t
}

// quickScalar returns, for a value of type word typ with data word data,
// the value's bits zero-extended and its size, if it is one of the scalar
// argument types, or size 0. Values of these
// types are stored in an interface indirectly: data points to them.
func quickScalar(typ uintptr, data unsafe.Pointer) (uint64, uint8) {
	for i := range quickTypes { // by index: a range over the array's value copies it
		q := &quickTypes[i]
		if q.typ != typ {
			continue
		}
		switch q.size {
		case 1:
			if typ == quickTypes[quickBool].typ && *(*uint8)(data) != 0 {
				return 1, 1 // a bool's byte may be other than 0 or 1 (unsafe, or memory from the device)
			}
			return uint64(*(*uint8)(data)), 1
		case 2:
			return uint64(*(*uint16)(data)), 2
		case 4:
			return uint64(*(*uint32)(data)), 4
		}
		return *(*uint64)(data), 8
	}
	return 0, 0
}

// putBits stores the low size bytes of bits at p as a value of that size,
// so in the machine's byte order.
func putBits(p unsafe.Pointer, bits uint64, size uint8) {
	switch size {
	case 1:
		*(*uint8)(p) = uint8(bits)
	case 2:
		*(*uint16)(p) = uint16(bits)
	case 4:
		*(*uint32)(p) = uint32(bits)
	default:
		*(*uint64)(p) = bits
	}
}

// The small block's capacity: the common launch fits it.
const (
	smallArgs = 8 // arguments, each of up to 8 bytes
	smallBufs = 4 // of them buffers
)

// smallBlock holds the arguments of one Stream.Launch on the launching
// goroutine's stack, so that a launch takes no shared block and touches few
// cache lines (libcuda's launch evicts the caller's data, and each line a
// launch touches afterwards is a miss). Scalars and buffers fit; anything
// else, or more of them, takes the general path (argBlock). The buffers are
// held until release. The parameter array, apart on the same stack (a block
// pointing into itself would have to live on the heap), points into vals:
// it is handed to cuLaunchKernel through a frame on that stack too, and the
// stack cannot move during the call.
type smallBlock struct {
	vals   [smallArgs]uint64
	allocs [smallBufs]*allocation
	sizes  [smallArgs]uint8
	n, nb  int
	other  bool // a buffer belongs to another context than the stream's
}

// fill marshals args for a launch of f on s. It reports false when an
// argument does not fit the block or is not usable (the general path then
// says why); what it held so far is released by release either way.
//
// A buffer argument whose type is the one f last saw (f.bufType) is read
// without a type assertion, whose lookups miss the CPU caches after a
// launch: every Buffer[T] has the layout of Buffer[byte] (no field depends
// on T). A type is remembered only when its value's data word is the
// Buffer itself (a *Buffer[T], or a pointer to a struct whose first field
// is a Buffer): values of types that embed one elsewhere are not Buffers.
func (b *smallBlock) fill(op string, f *Function, args []any, s *Stream) bool {
	bt := f.bufType.Load()
	for i := range args {
		typ, data := efaceWords(&args[i])
		var al *allocation
		var ptr cu.CUdeviceptr
		var err error
		switch {
		case typ == bt && bt != 0 && b.nb < smallBufs:
			al, ptr, err = (*Buffer[byte])(data).arg(op) // a static call: no itab
		default:
			if bits, size := quickScalar(typ, data); size != 0 {
				putBits(unsafe.Pointer(&b.vals[b.n]), bits, size)
				b.sizes[b.n] = size
				b.n++
				continue
			}
			dp, ok := args[i].(devicePointer)
			if !ok || b.nb == smallBufs || data == nil { // nil: the general path says so
				return false
			}
			if dp.self() == data { // the value is a Buffer, not a type embedding one
				f.bufType.Store(typ)
			}
			al, ptr, err = dp.arg(op)
		}
		if err != nil {
			return false
		}
		b.allocs[b.nb] = al
		b.nb++
		if !al.launchableIn(s.ctx, s) {
			return false
		}
		if al.ctx != s.ctx {
			b.other = true
		}
		b.vals[b.n] = uint64(ptr)
		b.sizes[b.n] = 8
		b.n++
	}
	return true
}

// launchableIn reports whether a buffer argument's memory may be used by a
// launch in context ctx (nil: unknown, not checked), and notes stream s
// (when not nil) as one that used stream-ordered memory, so its free waits
// for s.
//
// Memory of another context than s's is not noted (its free cannot wait
// for a stream of another context): the launch holds it until s has passed
// the kernel instead (holdOthers).
func (a *allocation) launchableIn(ctx *Context, s *Stream) bool {
	if ctx != nil && !a.usableIn(ctx) {
		return false
	}
	if s != nil && a.stream != nil && a.ctx.h == s.ctx.h {
		a.usedOn(s)
	}
	return true
}

// efaceWords returns the type word and data word of *v.
func efaceWords(v *any) (typ uintptr, data unsafe.Pointer) {
	w := (*[2]unsafe.Pointer)(unsafe.Pointer(v))
	return uintptr(w[0]), w[1]
}

// matches reports whether the arguments have the sizes of f's parameters
// (f's shape is shapeSmall).
func (b *smallBlock) matches(f *Function) bool {
	if int(f.nsmall) != b.n {
		return false
	}
	for i := range b.n {
		if f.small[i] != b.sizes[i] {
			return false
		}
	}
	return true
}

// release drops the buffers fill held.
func (b *smallBlock) release() {
	for _, a := range b.allocs[:b.nb] {
		_ = a.Release()
	}
}

// check compares the arguments with the kernel's parameters. c is the
// launch's context, or nil; a library kernel may need one to be read, and
// without c the context of a buffer argument serves.
func (b *argBlock) check(op string, f *Function, c *Context) error {
	if c == nil && len(b.allocs) > 0 {
		c = b.allocs[0].ctx
	}
	params, err := f.paramInfo(c)
	if err != nil || params == nil {
		return err
	}
	if len(params) != len(b.sizes) {
		return invalid(op, "kernel %s takes %d arguments, got %d", f.name, len(params), len(b.sizes))
	}
	for i, p := range params {
		if p.size != uintptr(b.sizes[i]) {
			return invalid(op, "kernel %s: argument %d: the kernel expects %d bytes, got %d", f.name, i, p.size, b.sizes[i])
		}
	}
	return nil
}

var blockPool = sync.Pool{New: func() any {
	b := new(argBlock)
	b.init()
	return b
}}
