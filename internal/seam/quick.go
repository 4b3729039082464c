package seam

import "unsafe"

// QuickBufs is the most buffers one Quick holds.
const QuickBufs = 4

// Quick is the cheapest hold there is for one call that queues work on a
// stream outside package driver (a cuBLAS routine, an NCCL operation), in
// the common case: the stream is held by its count of uncaptured calls in
// flight (no reference), which keeps it from being destroyed and a capture
// from beginning on it until Leave, and each buffer's memory by a
// reference, released by Release. libcuda and the libraries evict the
// caller's data and code from the CPU caches between calls: this is one
// call into package driver, which touches little.
//
// The caller sets Buf[:N] and calls Use; driver sets the rest.
type Quick struct {
	Buf [QuickBufs]unsafe.Pointer // in: *driver.Buffer[T] values, of any T (their layout is T's alone)
	N   int                       // in: how many of Buf

	Ptr   [QuickBufs]uintptr // out: each buffer's device address (its element 0)
	Bytes [QuickBufs]uintptr // out: each buffer's size in bytes
	Ctx   uintptr            // out: the stream's CUcontext
	Strm  uintptr            // out: the CUstream

	Held [QuickBufs]unsafe.Pointer // driver's: what it holds
}

// QuickUse, QuickLeave and QuickRelease are set by package driver; call
// them through Use, Leave and Release.
var (
	QuickUse     func(s unsafe.Pointer, q *Quick) bool
	QuickLeave   func(s unsafe.Pointer)
	QuickRelease func(q *Quick)
)

// Use holds, for one call that queues work on s (a *driver.Stream), s and
// the memory of q.Buf[:N], and sets q's outputs. It reports false,
// holding nothing, for what the caller's general path handles or
// explains: a nil, zero, legacy, closed or captured stream, a nil or
// closed buffer, a buffer of another context than s's, more than
// QuickBufs buffers. After true (and only then) the caller makes its C
// call, then Leave(s), then Release(q). Between Use and Leave it releases
// nothing (a release may wait for a capture beginning on s, which waits
// for Leave), and it takes any lock it shares with a path that enters s
// (capture.Enter) before Use, as that path does. A caller that holds no
// reference on s of its own (a handle's, a communicator's) must expect
// Leave to destroy a stream closed meanwhile, a CUDA call.
func Use(s unsafe.Pointer, q *Quick) bool {
	return QuickUse(s, (*Quick)(noescape(unsafe.Pointer(q))))
}

// Leave ends Use's hold on s.
func Leave(s unsafe.Pointer) { QuickLeave(s) }

// Release releases the buffers' memory that Use held, after Leave. A
// buffer closed meanwhile is freed once the work queued on its context's
// streams has run.
func Release(q *Quick) { QuickRelease((*Quick)(noescape(unsafe.Pointer(q)))) }
