package driver

import (
	"encoding/binary"
	"os"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
)

// NewExportableMemPool creates a pool of pinned device memory on c's device
// whose memory can be shared with other processes on the machine (Linux,
// devices with unified addressing): cuMemPoolCreate with POSIX file
// descriptor handles. It is otherwise a pool like NewMemPool's; Close
// destroys it.
//
// Only memory allocated with AllocFromPool from such a pool can be shared.
// Memory from Alloc, AllocManaged, AllocAsync (the device's current pool),
// the default pool or a pool made with NewMemPool cannot: ExportBuffer
// refuses it with an error matching ErrInvalidArgument. (CUDA's older
// cuIpcGetMemHandle does not work on stream-ordered memory at all; it is
// shared through its pool instead.)
//
// The steps, in the exporting process:
//
//  1. pool := ctx.NewExportableMemPool(); buf := AllocFromPool[T](s, pool, n)
//  2. f := pool.ExportFD(); send f to the other process (SendFD over a Unix
//     socket) and close f.
//  3. e := ExportBuffer(buf); send e (MarshalBinary; it is data, not a
//     handle, and may travel by any means).
//  4. Make an event with EventInterprocess|EventDisableTiming, record it on
//     s after the work that fills buf, and send its IPCHandle: the importer
//     must not touch the memory before the allocation and that work are
//     done.
//
// In the importing process:
//
//  1. f := ReceiveFD(conn); pool := ctx.ImportMemPool(f); f.Close()
//  2. b := ImportBuffer[T](pool, e); ev := ctx.OpenIPCEvent(h);
//     stream.WaitEvent(ev) (or ev.Synchronize()) before using b.
//  3. b.Close() (which frees the import before it returns), ev.Close(),
//     pool.Close(); then tell the exporter it is done.
//
// What the exporter must keep: each exported buffer stays allocated (not
// closed) until every importer has freed its import (CUDA requires the
// importers' frees to come first), and the exported event stays open until
// the importers have closed theirs (CUDA leaves the use of an opened event
// whose original was destroyed undefined). Neither process sees the other's
// Close: agree on the order, for instance with a message from the importer
// once it has closed everything.
//
// What is safe: the exporter may Close its MemPool, and the file, at any
// time after exporting them: the pool is destroyed once its buffers are
// freed. The importer's buffer holds its imported pool, so the importer may
// Close the pool first, and an imported pool, buffer or opened event
// dropped without Close is released by a cleanup (a buffer dropped so is
// freed at a time nobody can tell the exporter: Close it).
func (c *Context) NewExportableMemPool() (*MemPool, error) {
	return c.newMemPool("Context.NewExportableMemPool", true)
}

// ExportFD exports p to a file descriptor (cuMemPoolExportToShareableHandle),
// returned as a file the caller owns and closes: send it to another process
// (SendFD), which imports the pool with ImportMemPool. The pool must come
// from NewExportableMemPool; any other pool is refused with an error
// matching ErrInvalidArgument. Closing the file does not affect the pool.
func (p *MemPool) ExportFD() (*os.File, error) {
	const op = "MemPool.ExportFD"
	if err := p.acquire(op); err != nil {
		return nil, err
	}
	defer p.release()
	if !p.exportable {
		return nil, invalid(op, "only a pool made with NewExportableMemPool can be exported")
	}
	fd := new(int32)
	err := bound(p.ctx, func() error {
		return cu.MemPoolExportToShareableHandle(unsafe.Pointer(fd), p.h, cu.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
	})
	if err != nil {
		return nil, p.ctx.sawError(err)
	}
	closeOnExec(int(*fd)) // as every descriptor Go opens: not handed to programs this one starts
	return os.NewFile(uintptr(*fd), "cuda-mempool"), nil
}

// ImportMemPool imports a pool exported by another process (MemPool.ExportFD)
// from the file f, received for instance with ReceiveFD
// (cuMemPoolImportFromShareableHandle). f stays the caller's: close it once
// ImportMemPool has returned. The pool must live on c's device (the same
// GPU, whatever ordinal each process gives it); a pool of another device is
// refused with an error matching ErrInvalidArgument.
//
// An imported pool allocates nothing (AllocFromPool refuses it); ImportBuffer
// imports the exporter's buffers from it. Every imported buffer holds the
// pool, so Close destroys it (cuMemPoolDestroy) only after they are closed.
// A nil or closed file is refused with an error matching ErrInvalidArgument.
func (c *Context) ImportMemPool(f *os.File) (*MemPool, error) {
	const op = "Context.ImportMemPool"
	if !fileOK(f) {
		return nil, invalid(op, "nil or zero file")
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, invalid(op, "the file: %v", err)
	}
	if err := c.hold(op); err != nil {
		return nil, err
	}
	p := &MemPool{ctx: c, owned: true, imported: true}
	var cerr error
	ctlErr := rc.Control(func(fd uintptr) {
		// A POSIX descriptor is passed by value, in the pointer's place.
		h := fd
		handle := *(*unsafe.Pointer)(unsafe.Pointer(&h))
		cerr = bound(c, func() error {
			return cu.MemPoolImportFromShareableHandle(&p.h, handle, cu.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
		})
	})
	if ctlErr != nil {
		c.release()
		return nil, invalid(op, "the file: %v", ctlErr)
	}
	if cerr != nil {
		c.release()
		return nil, c.sawError(cerr)
	}
	// An imported pool is accessible from its own device only: one that
	// reads no read-write access from c's device lives on another, and
	// kernels in c would fault on its buffers.
	flags := new(cu.CUmemAccess_flags)
	loc := &cu.CUmemLocation{Type: cu.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(c.dev.ordinal)}
	gerr := bound(c, func() error { return cu.MemPoolGetAccess(flags, p.h, loc) })
	if gerr == nil && *flags != cu.CU_MEM_ACCESS_FLAGS_PROT_READWRITE {
		_ = bound(c, func() error { return cu.MemPoolDestroy(p.h) })
		c.release()
		return nil, invalid(op, "the pool lives on another device than the context's (%v)", c.dev)
	}
	p.startOwned()
	return p, nil
}

// fileOK reports whether f is an open file's handle: not nil, and not a
// zero os.File (whose methods dereference nil).
func fileOK(f *os.File) bool { return f != nil && *f != (os.File{}) }

// BufferExport identifies a buffer of an exportable pool to another process
// (cuMemPoolExportPointer's 64 bytes of export data, and the buffer's size):
// plain data, to send by any means (MarshalBinary). The zero BufferExport
// identifies nothing.
type BufferExport struct {
	data  cu.CUmemPoolPtrExportData
	bytes uint64
}

// bufferExportSize is the length of a marshalled BufferExport.
const bufferExportSize = 64 + 8

// Bytes is the size of the exported buffer in bytes.
func (e BufferExport) Bytes() int { return int(min(e.bytes, uint64(^uint(0)>>1))) }

// MarshalBinary encodes e in 72 bytes: the export data, then the size
// (little-endian).
func (e BufferExport) MarshalBinary() ([]byte, error) {
	b := make([]byte, bufferExportSize)
	copy(b, e.data.Reserved[:])
	binary.LittleEndian.PutUint64(b[64:], e.bytes)
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary encoded; any other length is
// an error matching ErrInvalidArgument, and leaves e as it was.
func (e *BufferExport) UnmarshalBinary(b []byte) error {
	if e == nil {
		return invalid("BufferExport.UnmarshalBinary", "nil BufferExport")
	}
	if len(b) != bufferExportSize {
		return invalid("BufferExport.UnmarshalBinary", "%d bytes, want %d", len(b), bufferExportSize)
	}
	copy(e.data.Reserved[:], b[:64])
	e.bytes = binary.LittleEndian.Uint64(b[64:])
	return nil
}

// ExportBuffer makes the data that lets another process, which imported
// b's pool, import b (cuMemPoolExportPointer). b must be a whole buffer
// (not a view) allocated with AllocFromPool from a pool made with
// NewExportableMemPool: memory from Alloc, AllocManaged, AllocAsync or any
// other pool cannot be shared, and is refused with an error matching
// ErrInvalidArgument. b must stay allocated (not closed) until every
// importer has closed its import.
func ExportBuffer[T any](b *Buffer[T]) (BufferExport, error) {
	const op = "ExportBuffer"
	a, err := b.use(op)
	if err != nil {
		return BufferExport{}, err
	}
	defer a.Release()
	if a.pool == nil || !a.pool.exportable || a.stream == nil {
		return BufferExport{}, invalid(op, "only memory allocated with AllocFromPool from a pool made with NewExportableMemPool can be shared between processes")
	}
	if b.off != 0 || b.size != a.bytes {
		return BufferExport{}, invalid(op, "a view cannot be exported: export the whole buffer")
	}
	e := new(BufferExport)
	if err := bound(a.ctx, func() error { return cu.MemPoolExportPointer(&e.data, a.base) }); err != nil {
		return BufferExport{}, a.ctx.sawError(err)
	}
	e.bytes = uint64(a.bytes)
	return *e, nil
}

// ImportBuffer imports, from p, a pool imported with ImportMemPool, the
// buffer another process exported as e (cuMemPoolImportPointer), as a
// Buffer of e.Bytes()/sizeof(T) elements in p's context. The memory must
// not be used before the exporter's allocation and the work that filled it
// are done: wait for an event the exporter recorded after them (OpenIPCEvent).
//
// The Buffer holds p until it is freed. Close frees the import (cuMemFree,
// once the work queued in p's context is done) before it returns, unless
// something else still holds the buffer (a call in flight, a view from
// Slice not yet closed, prepared Args, a graph, work queued on a stream of
// another context until that stream has passed it), a capture is under
// way on a stream of p's context (the free waits for its end), or Close
// runs in a host function: then the free comes later, and nothing tells
// when. The exporter must not free its buffer before the import is freed:
// close the views, Args and graphs first, synchronize the other contexts'
// streams that used the buffer, and once Close has returned, tell it. A
// Buffer dropped without Close is freed by a cleanup, at a time nobody can
// tell the exporter.
// A pool that was not imported, the zero BufferExport, a size that is
// not a whole number of elements, or one larger than the exported memory
// (damaged) is refused with an error matching ErrInvalidArgument.
func ImportBuffer[T any](p *MemPool, e BufferExport) (*Buffer[T], error) {
	const op = "ImportBuffer"
	if e.bytes == 0 {
		return nil, invalid(op, "zero BufferExport")
	}
	size, err := byteSize[T](op, 1)
	if err != nil {
		return nil, err
	}
	if e.bytes%uint64(size) != 0 || e.bytes > uint64(maxAlloc) {
		return nil, invalid(op, "%d bytes is not a whole number of %d-byte elements", e.bytes, size)
	}
	if err := p.acquire(op); err != nil { // kept by the allocation
		return nil, err
	}
	if !p.imported {
		p.release()
		return nil, invalid(op, "the pool was not imported from another process (ImportMemPool)")
	}
	c := p.ctx
	if err := c.hold(op); err != nil { // kept by the allocation
		p.release()
		return nil, err
	}
	a := &allocation{bytes: uintptr(e.bytes), ctx: c, pool: p}
	data := new(cu.CUmemPoolPtrExportData)
	*data = e.data
	if err := bound(c, func() error { return cu.MemPoolImportPointer(&a.base, p.h, data) }); err != nil {
		c.release()
		p.release()
		return nil, c.sawError(err)
	}
	// The size travels beside CUDA's export data, which does not vouch for
	// it: a damaged one longer than the memory is refused (where CUDA
	// tells the memory's extent), the import undone.
	var base cu.CUdeviceptr
	var extent uintptr
	err = bound(c, func() error { return cu.MemGetAddressRange(&base, &extent, a.base) })
	if err == nil && (a.base < base || uint64(a.base-base)+e.bytes > uint64(extent)) {
		_ = bound(c, func() error { return cu.MemFree(a.base) })
		c.release()
		p.release()
		return nil, invalid(op, "the export names %d bytes, more than the imported memory holds (a damaged BufferExport)", e.bytes)
	}
	return newBuffer[T](a, int(e.bytes/uint64(size))), nil
}

// maxAlloc bounds an imported buffer's size: its element count is an int.
const maxAlloc = uintptr(^uint(0) >> 1)

// IPCEventHandle identifies an interprocess event to another process
// (CUipcEventHandle): plain data, to send by any means.
type IPCEventHandle [64]byte

// IPCHandle returns the handle by which another process opens e
// (cuIpcGetEventHandle): e must have been made with EventInterprocess and
// EventDisableTiming. Records of e in either process are seen by both.
// e must stay open until the other processes have closed what they opened.
func (e *Event) IPCHandle() (IPCEventHandle, error) {
	const op = "Event.IPCHandle"
	if err := e.acquire(op); err != nil {
		return IPCEventHandle{}, err
	}
	defer e.release()
	h := new(cu.CUipcEventHandle)
	if err := bound(e.ctx, func() error { return cu.IpcGetEventHandle(h, e.h) }); err != nil {
		return IPCEventHandle{}, e.ctx.sawError(err)
	}
	return IPCEventHandle(h.Reserved), nil
}

// OpenIPCEvent opens in c an event another process exported with
// Event.IPCHandle (cuIpcOpenEventHandle). The Event behaves like one made
// with EventDisableTiming: Record, Synchronize, Query and Stream.WaitEvent
// work on it in both processes. Close destroys the opened event; one
// dropped without Close is destroyed by a cleanup. The zero handle is
// refused with an error matching ErrInvalidArgument.
func (c *Context) OpenIPCEvent(h IPCEventHandle) (*Event, error) {
	const op = "Context.OpenIPCEvent"
	if h == (IPCEventHandle{}) {
		return nil, invalid(op, "zero IPCEventHandle")
	}
	if err := c.hold(op); err != nil {
		return nil, err
	}
	e := &Event{ctx: c}
	if err := bound(c, func() error { return cu.IpcOpenEventHandle(&e.h, cu.CUipcEventHandle{Reserved: h}) }); err != nil {
		c.release()
		return nil, c.sawError(err)
	}
	eh := e.h
	initDropped(e, &e.obj, &e.cleanup, dropped{destroy: func() error { return destroyEvent(eh, c) }})
	return e, nil
}
