// Package driver is purecuda's safe, idiomatic API over the CUDA driver:
// devices, contexts, explicit streams, events, device and host memory,
// memory pools, modules and libraries, and typed kernel launches.
//
// It stands on package lifetime (references and releases) and on package
// loader, which finds and opens libcuda; package nvrtc sits beside it, and
// package graph builds on it.
//
//	dev, err := driver.DeviceByOrdinal(0)          // loads and initialises the driver
//	ctx, err := dev.PrimaryContext()               // Close releases it
//	s, err := ctx.NewStream(driver.StreamNonBlocking)
//	mod, _, err := ctx.CompileModule(src, nvrtc.Options{})
//	fn, err := mod.Function("add_one")
//	buf, err := driver.Alloc[int32](ctx, 1024)
//	err = s.Launch(fn, driver.Grid(4), driver.Block(256), buf, int32(1024))
//	err = s.Synchronize()
//
// # Contexts and threads
//
// CUDA's current context belongs to an OS thread, and goroutines move
// between threads. Every call here that needs a current context locks the
// OS thread, pushes the right context, calls, pops it and unlocks, so the
// thread keeps the context it had; calls that carry their context in a
// stream (launches, event records, asynchronous copies, stream
// synchronisation) skip that. Callers never lock threads or set contexts
// themselves, and no migration can crash the process. No thread is left
// with a context of ours current: CUDA keeps a destroyed context current on
// every thread that had it, and fails every call there.
//
// # Streams
//
// Stream-ordered work always names its stream. A nil *Stream is an error
// (ErrNilStream), never the default stream; ask for that by name with
// (*Context).LegacyStream. (CUDA's per-thread default stream is not
// offered: goroutines move between OS threads.)
//
// That holds for the synchronous copies and memsets too: b.ToHost(s),
// b.CopyToHost(s, dst), b.CopyFromHost(s, src), b.CopyFrom(s, src),
// b.Memset32(s, v), AllocCopy(s, src) and the rest queue their work on s,
// after everything queued there before, and return once it is done. So a
// kernel launched on s and a ToHost(s) right after it need no Synchronize
// in between. (CUDA's own synchronous copies run on the legacy default
// stream, which does not wait for streams made with StreamNonBlocking: a
// read there can return before a kernel on such a stream has written.) On
// a stream being captured into a graph they are refused with
// ErrStreamCaptureUnsupported, and the capture goes on.
//
// # Several devices
//
// Each device has its own contexts, and memory belongs to the context that
// allocated it. dst.CopyFrom(s, src) and dst.CopyFromAsync(s, src) copy
// between buffers of two contexts (of two devices, or two of one device)
// on a stream of either context, with or without peer access
// (Context.EnablePeerAccess; Device.CanAccessPeer says whether the devices
// have it); the copy is ordered on that stream only, and both buffers stay
// allocated until it has run. Kernels use another context's memory only
// with peer access enabled from their context, or, for buffers allocated
// from a MemPool, once MemPool.SetAccess has given their device access to
// the pool. A buffer of another context passed to a kernel stays allocated
// until the kernel's stream has passed it. Peer access does not reach
// memory allocated in stream order (AllocAsync, AllocFromPool) or imported
// from another process: CUDA maps a pool's memory only for its own device
// and the devices MemPool.SetAccess names, so kernels of other devices are
// refused it (memory from AllocAsync cannot be given to them: allocate
// from a MemPool instead).
//
// # Between processes
//
// Memory allocated from a pool made with Context.NewExportableMemPool can
// be shared with other processes on the machine (Linux): MemPool.ExportFD
// and Context.ImportMemPool share the pool through a file descriptor
// (SendFD and ReceiveFD pass it over a Unix socket), ExportBuffer and
// ImportBuffer share one buffer of it, and Event.IPCHandle and
// Context.OpenIPCEvent share an event that orders the two processes' work.
// Memory from Alloc, AllocAsync or any other pool cannot be shared.
// Context.NewExportableMemPool's documentation gives the steps and what
// each side must keep until the other is done.
//
// # Lifetime
//
// Close is idempotent and keeps its first result; use after Close is an
// error matching ErrClosed. Objects hold what they were made from: a
// context is released when it and everything made from it are closed, and a
// module stays loaded while one of its kernels is being launched. Device
// memory is reference counted: views, Args and graph nodes keep it
// allocated after Close until they let go. Buffer.Close never waits for
// the device: memory that a kernel may still use is freed on a goroutine
// of purecuda's once the work queued before Close is done. Buffer.Slice
// makes a view of part of a buffer without a copy; it holds its own
// reference, so the memory lives until the buffer and every view are
// closed. Code handed a buffer that must outlive its owner's Close keeps a
// view of all of it (b.Slice(0, b.Len())) and closes that view when done.
//
// A Context, Stream, Event, MemPool, Module, Library, Buffer, Args or
// Registered that becomes unreachable without Close is released by a
// cleanup, on a goroutine of ours (never on a thread CUDA owns), as Close
// would have released it: a safety net, not a way to time a release.
// HostBuffer and a managed Buffer whose host slice was taken have none,
// since the slice may still be in use.
//
// # Memory
//
// Sizes and counts are ints: Len is in elements, Size and the byte counts
// of Device.TotalMemory, Context.MemGetInfo and pools are in bytes.
// Besides Alloc and the copies, AllocZeroed, AllocCopy (allocate and copy
// from a slice), Buffer.ToHost (copy to a new slice) and the memsets
// (Memset8/16/32, MemsetFloat32) cover the common cases in one call.
//
// # Host functions and the Go memory model
//
// What a host function writes (Stream.LaunchHostFunc, a graph's host node,
// and the copy into a Go slice that CopyToHostAsync makes) happens before
// the return of every wait that waited for it: Stream.Synchronize,
// Event.Synchronize of an event recorded after it, Context.Synchronize, and
// the synchronous copies and memsets on its stream. So the goroutine that
// returns from the wait may read what the host function wrote without a
// lock or an atomic, and the race detector agrees. Reading it before such a
// wait is a data race.
//
// # Launch arguments
//
// Launch takes sized integers (int8 … uint64), float32, float64, bool,
// DevicePtr, *Buffer[T] and structs or arrays without Go pointers, passed by
// value. Go's int and uint are refused: C's int is 32 bits. Where the driver
// can tell (CUDA 12.4 and later) the number and size of the arguments are
// checked against the kernel before launching. Function.NewArgs marshals
// arguments once for LaunchArgs, which allocates nothing; SetArg changes a
// value argument between launches. Function.Raw and Stream.Raw hand the
// CUDA handles to other libraries.
//
// # Concurrency
//
// Every type here that stands for a CUDA object (Context, Stream, Event,
// Buffer, HostBuffer, Registered, MemPool, Module, Library, Function, Args,
// Device) is safe for concurrent use; each type's doc says what a Close
// racing with calls does, and the one exception (SetArg against launches
// of the same Args). In short, Close never destroys anything under a call
// in flight or under queued work: the destroy waits for the last of them,
// and calls that start after Close fail with ErrClosed. The other types
// (Dim3, LaunchConfig, options, flags, errors) are plain values.
//
// # Errors
//
// A failed driver call returns a *Error naming the C function and its
// Status (the C CUresult); every status is also an Err… constant for
// errors.Is (ErrOutOfMemory, ErrInvalidValue, …), and errors.As gives the
// fields. Arguments purecuda refuses before calling CUDA match
// ErrInvalidArgument; ErrInvalidValue, by contrast, is CUDA's own
// CUDA_ERROR_INVALID_VALUE, returned by the C function the *Error names. A
// function the loaded driver lacks returns a *SymbolError matching
// ErrNotSupported. Every error that means this machine has no usable GPU
// (no driver library found, an operating system without CUDA, no device, a
// driver older than CUDA 12.0) matches ErrNoGPU, whichever call returns it;
// a missing NVRTC does not, and a missing driver library also matches
// loader.ErrNotFound, its message listing every place searched.
//
// Most CUDA errors concern the call that returned them. A fault in a
// kernel is different: an illegal address (ErrIllegalAddress), a
// device-side assert, a launch failure and the others that ErrSticky
// lists are reported by a later call (usually the next synchronisation),
// and from then on every CUDA call of the process that runs or waits for
// work returns the same error — in every context, the primary context and
// contexts created afterwards included, not only in the context whose
// kernel faulted. CUDA cannot recover from it within the process: test for
// it with errors.Is(err, ErrSticky) and exit (or restart the worker
// process). Close still releases what purecuda holds.
//
// Nothing in this package panics on
// anything a caller or the machine can cause; a panic in a host function is
// recovered and returned by the stream's next Synchronize, or, once the
// stream is closed, by its context's next Synchronize (and once the context
// is closed too, through lifetime.Errors).
package driver
