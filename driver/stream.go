package driver

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// StreamFlags are cuStreamCreate flags.
type StreamFlags uint32

// Stream flags.
const (
	// StreamDefault streams synchronise with the legacy default stream.
	StreamDefault StreamFlags = 0 // CU_STREAM_DEFAULT
	// StreamNonBlocking streams run concurrently with the legacy default stream.
	StreamNonBlocking StreamFlags = 1 // CU_STREAM_NON_BLOCKING
)

// Stream is a CUDA stream. Stream-ordered work in purecuda always names its
// stream; a nil *Stream is an error (ErrNilStream), never the default stream.
//
// A Stream is safe for concurrent use; work submitted from several goroutines
// is ordered as CUDA receives it. Every call holds the stream while it runs,
// so Close racing with calls never destroys the CUDA stream under one; the
// stream is destroyed when Close has been called and the last call, the
// last stream-ordered buffer allocated on it and the last host function
// queued on it are done. A Stream dropped
// without Close is destroyed by a cleanup.
type Stream struct {
	// The fields a launch reads come first, together; capture is set while
	// package graph captures s, and inflight counts the uncaptured calls
	// queueing work (see capture.go), with the destroy's two flags above
	// the count (see quickHold).
	h        cu.CUstream
	ctx      *Context
	capture  atomic.Pointer[captureHook]
	inflight atomic.Int32
	quickFn  uintptr         // launchFn for the launch fast paths; 0 on a special stream
	obj      lifetime.Object // owner + calls in flight + stream-ordered buffers (its count within the first 64 bytes)
	launchFn uintptr         // cuLaunchKernel; 0 if it could not be resolved
	special  bool            // the legacy default stream: needs its context current
	lim      dimLimits       // the device's, copied (read when a launch exceeds what every device allows)

	errMu sync.Mutex
	nerrs atomic.Int32 // len(errs), for Synchronize to skip errMu when none
	errs  []error      // host-function panics, returned by the next Synchronize
	cap   *capState    // capture bookkeeping; nil for the legacy stream

	// cleanup destroys a stream that became unreachable without Close. It
	// makes a Stream 192 bytes: in that allocation size class objects start
	// on a 64-byte line, so the fields above obj share one.
	cleanup runtime.Cleanup
}

// NewStream creates a stream (cuStreamCreate).
func (c *Context) NewStream(flags StreamFlags) (*Stream, error) {
	return c.newStream("Context.NewStream", func(h *cu.CUstream) error { return cu.StreamCreate(h, uint32(flags)) })
}

// NewStreamWithPriority creates a stream with a priority; lower numbers are
// higher priorities, within StreamPriorityRange (cuStreamCreateWithPriority).
func (c *Context) NewStreamWithPriority(flags StreamFlags, priority int) (*Stream, error) {
	return c.newStream("Context.NewStreamWithPriority", func(h *cu.CUstream) error {
		return cu.StreamCreateWithPriority(h, uint32(flags), int32(priority))
	})
}

func (c *Context) newStream(op string, create func(*cu.CUstream) error) (*Stream, error) {
	if err := c.hold(op); err != nil {
		return nil, err
	}
	s := newStreamFor(c, 0, false)
	if err := bound(c, func() error { return create(&s.h) }); err != nil {
		c.release()
		return nil, err
	}
	s.obj.Init(s.destroy)
	h := s.h
	s.cleanup = runtime.AddCleanup(s, deferDrop, dropped{destroy: func() error { return destroyStream(h, c) }})
	noteStream(s)
	return s, nil
}

// destroy is s's destroy function (the last reference is gone). A record
// that holds s by its in-flight count alone (quickHold) may still be in
// libcuda: then the last of those destroys s instead, and destroy returns
// nil.
func (s *Stream) destroy() error {
	s.cleanup.Stop()
	if s.inflight.Or(streamDying)&streamCount != 0 || !s.inflight.CompareAndSwap(streamDying, streamDying|streamDone) {
		return nil
	}
	return destroyStreamFn(s.h, s.ctx)
}

// The bits of Stream.inflight above the count of uncaptured calls.
const (
	streamDying = 1 << 30 // the last reference is gone: the last quick holder destroys s
	streamDone  = 1 << 29 // the destroy was claimed (by destroy or by endQuick)
	streamCount = streamDone - 1
)

// quickHold holds s for a call by its in-flight count alone, without a
// reference: the cheapest hold there is, for Event.Record's fast path. It
// fails on the legacy stream, a zero Stream, a closed stream and one being
// captured, where the caller takes the general path. A quick holder
// releases nothing while it holds s (a capture beginning on s waits for
// it, and a release could wait for that capture), and ends with endQuick.
//
// Why it is safe: quickHold adds to the count before it reads the closed
// flag; Close sets the flag before it drops the owner's reference, and the
// destroy sets streamDying and reads the count in one atomic operation
// after that. So the destroy either sees a quick holder that read "open"
// and leaves the CUDA call to its last endQuick, or every such holder has
// already ended. Exactly one of them claims the destroy, with streamDone.
func (s *Stream) quickHold() bool {
	if s == nil || s.cap == nil { // nil, the legacy stream, or a zero Stream
		return false
	}
	s.inflight.Add(1)
	if s.capture.Load() == nil && !s.obj.Closed() {
		return true
	}
	s.endQuick()
	return false
}

// endQuick ends what quickHold began.
func (s *Stream) endQuick() {
	if s.inflight.Add(-1) == streamDying {
		s.destroyLate()
	}
}

// destroyLate destroys s for a destroy that found a quick holder still in
// flight, unless another claimed it first. Like a release (I8), it queues
// the destroy when it runs in a callback.
func (s *Stream) destroyLate() {
	if !s.inflight.CompareAndSwap(streamDying, streamDying|streamDone) {
		return
	}
	h, c := s.h, s.ctx
	destroy := func() error { return destroyStreamFn(h, c) }
	if hostfn.InCallback() {
		release.Defer(lifetime.OwnerFunc(destroy))
		return
	}
	if err := destroy(); err != nil {
		release.NoteError(err)
	}
}

// destroyStreamFn is destroyStream, where the stream's destroy and its
// quick holders call it (a test of their protocol counts the calls).
var destroyStreamFn = destroyStream

// destroyStream destroys stream h of context c and releases c: the last
// step of a Stream's lifetime, whichever way it ends (Close, the last
// reference, a quick holder, the cleanup).
func destroyStream(h cu.CUstream, c *Context) error {
	err := bound(c, func() error { return cu.StreamDestroy(h) })
	c.release()
	return err
}

// newStreamFor makes the Stream value: an owned stream (h set by the
// caller, obj initialised by it) or the legacy default stream.
func newStreamFor(c *Context, h cu.CUstream, special bool) *Stream {
	s := &Stream{h: h, ctx: c, special: special, lim: c.dev.lim}
	// Without cuLaunchKernel launches take the path that resolves it, and
	// report the missing symbol.
	s.launchFn, _ = cu.LaunchKernelProc()
	if !special {
		s.quickFn = s.launchFn
		s.cap = new(capState)
	}
	return s
}

// StreamPriorityRange returns the least and greatest stream priorities
// (cuCtxGetStreamPriorityRange).
func (c *Context) StreamPriorityRange() (least, greatest int, err error) {
	sc := getScratch()
	defer putScratch(sc)
	p := (*[2]int32)(unsafe.Pointer(sc))
	err = c.with("Context.StreamPriorityRange", func() error { return cu.CtxGetStreamPriorityRange(&p[0], &p[1]) })
	return int(p[0]), int(p[1]), err
}

// LegacyStream is the context's legacy default stream (CU_STREAM_LEGACY),
// which synchronises with every blocking stream. It holds no reference of
// its own: each call on it holds the context, and fails once the context is
// closed. Close on it does nothing.
//
// (CUDA's per-thread default stream is not offered: it names the calling
// OS thread's stream, and goroutines move between threads, so successive
// calls from one goroutine could land on different streams, unordered.)
func (c *Context) LegacyStream() *Stream {
	if c == nil || c.dev == nil {
		return nil
	}
	// s.obj stays zero: calls on the legacy stream hold the context, and
	// an initialised Object that Close never releases would count as live.
	return newStreamFor(c, cu.CU_STREAM_LEGACY, true)
}

// Context is the stream's context (nil for a nil Stream).
func (s *Stream) Context() *Context {
	if s == nil {
		return nil
	}
	return s.ctx
}

// acquire holds s for a call; release lets it go. The legacy stream holds
// its context instead (see LegacyStream).
func (s *Stream) acquire(op string) error {
	if s == nil {
		return fmt.Errorf("driver: %s: %w", op, ErrNilStream)
	}
	if s.special {
		return s.ctx.hold(op)
	}
	if !s.obj.Acquire() {
		return notOpen(op, "stream")
	}
	return nil
}

func (s *Stream) release() {
	if s.special {
		s.ctx.release()
		return
	}
	_ = s.obj.Release()
}

// do is the one verb for a call that names s: it holds s for the call and
// runs f, with the context current when f needs it (bind) or when the
// stream does not carry its context (the legacy stream); streams made with
// NewStream carry theirs, so their hot paths skip the binding.
func (s *Stream) do(op string, bind bool, f func() error) error {
	if err := s.acquire(op); err != nil {
		return err
	}
	defer s.release() // deferred: f may be a caller's (Raw) and panic
	var err error
	if bind || s.special {
		err = bound(s.ctx, f)
	} else {
		err = f()
	}
	return s.ctx.sawError(err)
}

// Raw calls f with the CUstream handle, for use with other CUDA libraries.
// The stream is held while f runs, and its context is current on the
// calling OS thread (locked for the call). The handle must not be kept after
// f returns.
func (s *Stream) Raw(f func(handle uintptr) error) error {
	if f == nil {
		return invalid("Stream.Raw", "nil function")
	}
	return s.do("Stream.Raw", true, func() error { return f(uintptr(s.h)) })
}

// holdRef takes a reference that keeps the CUDA stream alive after Close until
// it is released: for work that outlives a call (seam.Hold). It fails once
// s is closed.
func (s *Stream) holdRef() (lifetime.Ref, error) {
	const op = "hold"
	if s == nil {
		return lifetime.Ref{}, fmt.Errorf("driver: %s: %w", op, ErrNilStream)
	}
	r, ok := s.lifetimeObj().Hold()
	if !ok {
		return lifetime.Ref{}, notOpen(op, "stream")
	}
	return r, nil
}

// lifetimeObj is what a reference on s counts on: its own Object, or, for
// the legacy stream, which has none, its context's.
func (s *Stream) lifetimeObj() *lifetime.Object {
	if s.special {
		return &s.ctx.obj
	}
	return &s.obj
}

// Close destroys the stream (cuStreamDestroy) once no call is using it, no
// buffer allocated on it in stream order is left and its host functions
// have run. Work already queued still runs. Panics of its host functions that Synchronize has not
// returned, and those of host functions that run after Close, go to the
// stream's Context: its next Synchronize returns them. Close is idempotent
// and returns the first call's result.
func (s *Stream) Close() error {
	if s == nil {
		return fmt.Errorf("driver: Stream.Close: %w", ErrNilStream)
	}
	if s.special || s.ctx == nil {
		return nil
	}
	err := s.obj.Close()
	// After the closed flag: callbackPanicked sends what comes later.
	s.errMu.Lock()
	errs := s.errs
	s.errs = nil
	s.nerrs.Store(0)
	s.errMu.Unlock()
	s.ctx.hostPanicked(errs...)
	return err
}

// Synchronize waits until all work on the stream has run
// (cuStreamSynchronize). It also returns, once, the panics of host
// functions that ran on the stream since the last call (on the legacy
// stream, those its Context keeps: see LaunchHostFunc). On a stream being
// captured it is refused (ErrStreamCaptureUnsupported), and the capture
// goes on.
func (s *Stream) Synchronize() error {
	// Written out, without defers or a closure, as Event.Record is: an idle
	// stream's synchronize is a short call. Nothing between acquire and
	// release can panic.
	const op = "Stream.Synchronize"
	if err := s.acquire(op); err != nil {
		return err // closed: its host functions' panics go to its context
	}
	if err := s.enterUncaptured(op); err != nil {
		s.release()
		return err
	}
	var err error
	if s.special {
		err = bound(s.ctx, func() error { return cu.StreamSynchronize(s.h) })
	} else {
		err = cu.StreamSynchronize(s.h)
	}
	s.leave(nil)
	s.release()
	return s.takeErrs(s.ctx.sawError(err))
}

// Query reports whether all work on the stream has run (cuStreamQuery).
// Like Synchronize, it is refused on a stream being captured.
func (s *Stream) Query() (bool, error) {
	const op = "Stream.Query"
	if err := s.acquire(op); err != nil {
		return false, err
	}
	if err := s.enterUncaptured(op); err != nil {
		s.release()
		return false, err
	}
	var err error
	if s.special {
		err = bound(s.ctx, func() error { return cu.StreamQuery(s.h) })
	} else {
		err = cu.StreamQuery(s.h)
	}
	s.leave(nil)
	s.release()
	err = s.ctx.sawError(err)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotReady):
		return false, nil
	}
	return false, err
}

// SynchronizeContext waits like Synchronize but gives up when ctx is done,
// returning ctx.Err(); the work itself goes on. It polls cuStreamQuery with
// a back-off from 5µs to 1ms, so it does not keep a core busy.
func (s *Stream) SynchronizeContext(ctx context.Context) error {
	const op = "Stream.SynchronizeContext"
	if ctx == nil {
		return invalid(op, "nil context.Context")
	}
	if err := s.acquire(op); err != nil {
		return err
	}
	s.release()
	wait := 5 * time.Microsecond
	var timer *time.Timer
	for {
		done, err := s.Query()
		if err != nil || done {
			return s.takeErrs(err)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		if wait < time.Millisecond {
			wait *= 2
		}
	}
}

// WaitEvent makes later work on s wait for e (cuStreamWaitEvent). If e
// was last recorded on a stream being captured, s joins that capture: the
// work queued on it from now on is captured too, until the capture ends.
// If that capture cannot take s in (it is ending, or s is captured into
// another), the wait is refused (ErrStreamCaptureIsolation).
func (s *Stream) WaitEvent(e *Event) error {
	const op = "Stream.WaitEvent"
	if err := e.acquire(op); err != nil {
		return err
	}
	defer e.release()
	if err := s.acquire(op); err != nil {
		return err
	}
	defer s.release()
	for joinTried := false; ; {
		if c := e.capture.Load(); c != nil && !c.over.Load() && s.cap != nil && s.capture.Load() == nil {
			// Join before the wait (the sink installs itself, its gate
			// held), so that the calls on s after the wait are captured.
			joinTried = true
			if o := &s.obj; o.Retain() {
				if token, ok := c.sink.Join(s, lifetime.RefOf(o)); ok {
					err := s.do(op, false, func() error { return cu.StreamWaitEvent(s.h, e.h, 0) })
					if err == nil {
						s.setState(c.sink, hookBegun)
					}
					c.sink.Joined(token, err == nil)
					return err
				}
				_ = o.Release()
			}
		}
		h := s.enter()
		if c := e.capture.Load(); c != nil && !c.over.Load() && (h == nil || h.sink != c.sink) {
			s.leave(h)
			if h == nil && !joinTried {
				// s was being brought into a capture (its sink installed)
				// and is not any more: try to join e's capture now.
				joinTried = true
				continue
			}
			// e was recorded in a capture that is still going and did
			// not take s in (it is ending, or s is captured otherwise):
			// the wait would bring s into it behind purecuda's back,
			// racing its end.
			return fmt.Errorf("driver: %s: the event was recorded in a capture that the stream cannot join: %w", op, ErrStreamCaptureIsolation)
		}
		err := s.do(op, false, func() error { return cu.StreamWaitEvent(s.h, e.h, 0) })
		s.leave(h)
		return err
	}
}

// enterUncaptured begins a wait for s as an uncaptured call (no capture
// begins on s until leave(nil)), or refuses it while package graph
// captures s: CUDA refuses it too, but invalidates the capture, and an
// invalidation racing a record or wait on the capture's streams crashed
// libcuda (driver 580, a graph launch there; seen on an H100).
func (s *Stream) enterUncaptured(op string) error {
	if h := s.enter(); h != nil {
		s.leave(h)
		return fmt.Errorf("driver: %s: the stream is being captured: %w", op, ErrStreamCaptureUnsupported)
	}
	return nil
}

// Priority is the stream's priority (cuStreamGetPriority).
func (s *Stream) Priority() (int, error) {
	sc := getScratch()
	defer putScratch(sc)
	p := (*int32)(unsafe.Pointer(sc))
	err := s.do("Stream.Priority", false, func() error { return cu.StreamGetPriority(s.h, p) })
	return int(*p), err
}

// LaunchHostFunc queues f to run once the work before it on s has run
// (cuLaunchHostFunc). f runs exactly once, on a goroutine of purecuda's
// while a CUDA thread waits for it, and is then released. f must not call
// CUDA, nor a purecuda method that waits for the device (Synchronize, a
// synchronous copy): the device waits for f. Closing objects in f itself
// is safe: what the last reference frees or unloads is queued and done
// after f returns. That holds on f's goroutine only,
// not on one f starts and waits for, and not when another goroutine is
// closing the same object at that moment (f's Close waits for that one,
// which may wait for f). A panic in f, or a runtime.Goexit (t.FailNow),
// is contained: the process and the stream go on, and the stream's next
// Synchronize returns it as an error; once the stream is closed, the next
// Synchronize of its Context does (it waits for the stream's work too),
// and once that context is closed as well, lifetime.Errors. On the legacy
// stream the panic is the context's from the start: the next Synchronize
// of the legacy stream or of the context returns it. Until f has run it
// keeps a stream made with NewStream from being destroyed, even after
// Close. If a kernel fault
// (ErrSticky) stops CUDA, f never runs and is released, with s, when the
// error is seen (a Synchronize, or the wait of a free in the context).
//
// While s is being captured into a graph (package graph), f becomes a
// host node instead: it runs at every launch of the graph, is held for as
// long as the graph may run it, and its panics go to the capture's sink.
func (s *Stream) LaunchHostFunc(f func()) error {
	const op = "Stream.LaunchHostFunc"
	if f == nil {
		return invalid(op, "nil function")
	}
	if s == nil || s.cap == nil {
		return s.enqueueHost(op, hostfn.Callback{Fn: f, Once: true, Sink: streamPanics{s}})
	}
	tramp, err := hostfn.HostFn()
	if err != nil {
		return err
	}
	if err := s.acquire(op); err != nil {
		return err
	}
	defer s.release()
	h := s.enter()
	defer s.leave(h)
	if h != nil {
		return s.enqueueCapturedHost(h, f)
	}
	// No capture can begin on s before leave: f runs on s, once. Until it
	// has run (or CUDA drops it) f holds s, closed or not: a free waits for
	// the work of the context's streams without keeping captures out (see
	// drain), and a stream destroyed under a queued f would hide it.
	s.obj.Retain() // cannot fail: s is held
	id := hostfn.Register(hostfn.Callback{Fn: f, Once: true, Sink: streamPanics{s}, Held: lifetime.RefOf(&s.obj)})
	hostfn.Expect()
	if err := bound(s.ctx, func() error { return cu.LaunchHostFunc(s.h, cu.CUhostFn(tramp), id) }); err != nil {
		hostfn.Cancel(id) // it will never run
		return s.ctx.sawError(err)
	}
	s.ctx.addPending(id)
	return nil
}

// enqueueHost queues a registered callback on s. When CUDA refuses it, the
// callback is cancelled (its Done released) and nothing is left behind.
func (s *Stream) enqueueHost(op string, cb hostfn.Callback) error {
	tramp, err := hostfn.HostFn()
	if err != nil {
		return err
	}
	if err := s.acquire(op); err != nil {
		return err
	}
	defer s.release()
	id := hostfn.Register(cb)
	hostfn.Expect()
	if err := bound(s.ctx, func() error { return cu.LaunchHostFunc(s.h, cu.CUhostFn(tramp), id) }); err != nil {
		hostfn.Cancel(id) // it will never run
		return s.ctx.sawError(err)
	}
	s.ctx.addPending(id)
	return nil
}
