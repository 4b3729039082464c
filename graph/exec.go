package graph

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// InstantiateFlags are cuGraphInstantiate flags.
type InstantiateFlags uint64

// Instantiate flags.
const (
	// AutoFreeOnLaunch frees memory the graph's alloc nodes allocated and
	// did not free when the executable is launched again.
	AutoFreeOnLaunch InstantiateFlags = 1 // CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
	// Upload uploads the executable on InstantiateOptions.UploadStream as
	// part of instantiation.
	Upload InstantiateFlags = 2 // CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD
	// DeviceLaunch makes an executable that device code can launch.
	DeviceLaunch InstantiateFlags = 4 // CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH
	// UseNodePriority launches kernels with their node priority attributes
	// instead of the stream's priority.
	UseNodePriority InstantiateFlags = 8 // CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY
)

// InstantiateOptions are the options of InstantiateWith.
type InstantiateOptions struct {
	Flags InstantiateFlags
	// UploadStream is the stream the Upload flag uploads on.
	UploadStream *driver.Stream
}

// InstantiateError is a failed instantiation with the driver's detail: the
// result code and the node it blames, if any.
type InstantiateError struct {
	Err    error             // the driver's error
	Result InstantiateResult // why, per the driver
	Node   Node              // the offending node, or the zero Node
}

// InstantiateResult is the driver's reason for a failed instantiation
// (CUgraphInstantiateResult).
type InstantiateResult int

// Instantiation results.
const (
	InstantiateSuccess                  InstantiateResult = 0 // CUDA_GRAPH_INSTANTIATE_SUCCESS
	InstantiateFailed                   InstantiateResult = 1 // CUDA_GRAPH_INSTANTIATE_ERROR
	InstantiateInvalidStructure         InstantiateResult = 2 // CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE
	InstantiateNodeOperationUnsupported InstantiateResult = 3 // CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED
	InstantiateMultipleContexts         InstantiateResult = 4 // CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED
	InstantiateConditionalHandleUnused  InstantiateResult = 5 // CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED
)

// String is the C name of the result.
func (r InstantiateResult) String() string { return cu.CUgraphInstantiateResult(r).String() }

func (e *InstantiateError) Error() string {
	if e == nil {
		return "graph: Instantiate: <nil>"
	}
	s := fmt.Sprintf("graph: Instantiate: %v (%v)", e.Err, e.Result)
	if !e.Node.IsZero() {
		s += fmt.Sprintf(" at node %#x", uintptr(e.Node.h))
	}
	return s
}

// Unwrap returns the driver's error.
func (e *InstantiateError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Exec is an executable graph (CUgraphExec). It outlives the graph it was
// made from — it keeps that graph's CUDA object, and everything the
// graph's nodes held, alive until it is closed and its launched work has
// finished — and its per-node methods keep working after the graph's
// Close.
//
// An Exec holds the streams it was launched on (at most 16 at a time)
// until what an update retired has been released, or a checkpoint lets
// them go. An Exec that becomes unreachable without Close is closed by a
// cleanup, on purecuda's release goroutine.
//
// An Exec is safe for concurrent use: purecuda serialises the calls on one
// executable, and its destroy and updates with the calls on the graph it
// came from. CUDA runs the launches of one executable one after another,
// whatever their streams: instantiate a graph several times to run it
// concurrently. A Close racing with calls destroys the executable only
// after the calls in flight; calls that start after it fail with
// driver.ErrClosed, and work already launched still runs.
type Exec struct {
	*execCore
	src *Graph // the graph it was instantiated from: per-node updates name its nodes
}

// execCore is what an Exec's cleanup closes; it never points back at the
// Exec handle or the source Graph's.
type execCore struct {
	h      cu.CUgraphExec
	ctx    *driver.Context
	ctxRef lifetime.Ref
	obj    lifetime.Object // owner + calls in flight
	sink   *sink
	src    *graphCore   // the graph it came from, held by srcRef until the executable is destroyed
	srcRef lifetime.Ref // (CUDA's calls on the executable name that graph's nodes)
	fam    *family      // the source graph's family

	mu      sync.Mutex
	last    *driver.Stream // the stream of the latest launch, tracked already
	streams []tracked      // streams launched on: retired owners wait for their work
	own     map[cu.CUgraphNode]*ownerSet
	held    *ownerSet                      // user objects of the graph given to Update
	kargs   map[cu.CUgraphNode]*kernelArgs // kernel nodes' parameters as last set (update_args.go); nil: not known
	updated bool                           // updated as a whole: the source graph's nodes no longer tell its parameters
	multi   bool                           // its graph had nodes in several contexts (multi.go); under mu
	prev    *retireLink                    // the latest retired batch
}

// tracked is a stream an Exec was launched on, held so that retired owners
// can wait for the work queued there.
type tracked struct {
	s   *driver.Stream
	ref lifetime.Ref
}

// Instantiate makes an executable graph (cuGraphInstantiateWithParams).
func (g *Graph) Instantiate() (*Exec, error) { return g.InstantiateWith(InstantiateOptions{}) }

// InstantiateWith makes an executable graph with flags. On failure the
// error is an *InstantiateError carrying the driver's reason and node.
func (g *Graph) InstantiateWith(o InstantiateOptions) (*Exec, error) {
	const op = "Graph.Instantiate"
	if o.Flags&Upload != 0 && o.UploadStream == nil {
		return nil, fmt.Errorf("graph: %s: the Upload flag needs an UploadStream: %w", op, driver.ErrNilStream)
	}
	var sref lifetime.Ref
	if o.UploadStream != nil {
		r, err := seam.Hold(o.UploadStream)
		if err != nil {
			return nil, err
		}
		sref = r
		defer sref.Release()
	}
	if err := g.enter(op); err != nil {
		return nil, err
	}
	defer g.leave()
	if g.root != nil {
		return nil, invalid(op, "a body graph runs as part of its node: instantiate the graph it belongs to")
	}
	if o.UploadStream != nil && !o.UploadStream.Context().Same(g.ctx) {
		return nil, invalid(op, "the upload stream belongs to another context")
	}
	if err := g.refuseMultiDeviceLaunch(op, o.Flags); err != nil {
		return nil, err
	}
	ref, ok := g.ctxRef.Clone()
	if !ok {
		return nil, closed(op, "graph's context")
	}
	srcRef, ok := lifetime.RefOf(&g.obj).Clone() // g is held for the call
	if !ok {
		_ = ref.Release()
		return nil, closed(op, "graph")
	}
	p := &cu.CUDA_GRAPH_INSTANTIATE_PARAMS{Flags: uint64(o.Flags)}
	if o.UploadStream != nil {
		p.HUploadStream = cu.CUstream(seam.Stream(o.UploadStream))
	}
	h := new(cu.CUgraphExec)
	err := g.bind(func() error { return cu.GraphInstantiateWithParams(h, g.h, p) })
	if err != nil || p.Result_out != cu.CUDA_GRAPH_INSTANTIATE_SUCCESS {
		_ = ref.Release()
		_ = srcRef.Release() // g is held: this is not the last reference
		if err == nil {
			err = fmt.Errorf("graph: %s: %v: %w", op, p.Result_out, driver.ErrInvalidValue)
		}
		ie := &InstantiateError{Err: err, Result: InstantiateResult(p.Result_out)}
		if p.HErrNode_out != 0 {
			ie.Node = g.nodeOf(p.HErrNode_out)
		}
		return nil, ie
	}
	g.shared()
	c := &execCore{h: *h, ctx: g.ctx, ctxRef: ref, sink: g.sink, src: g.graphCore, srcRef: srcRef, fam: g.fam, multi: g.multi}
	c.obj.Init(c.destroy)
	e := &Exec{execCore: c, src: g}
	runtime.AddCleanup(e, func(c *execCore) { release.Defer(execCloser{c}) }, c)
	return e, nil
}

// execCloser closes the executable of an unreachable Exec handle, on the
// release queue (a release.Owner).
type execCloser struct{ c *execCore }

func (x execCloser) Release() error { return lifetime.Counted(x.c.obj.Close()) }

// destroy destroys the executable (CUDA frees it once its launched work is
// done), retires what it held, which is released after that work too, and
// lets go of the source graph. While a capture runs in the family, it
// waits for the capture's end (an executable's destroy touches its graph).
func (e *execCore) destroy() error {
	e.mu.Lock()
	multi := e.multi
	e.mu.Unlock()
	if multi {
		return e.destroyAfterWork()
	}
	f := e.fam
	f.mu.Lock()
	if f.capture != nil {
		f.later = append(f.later, e.destroy)
		f.mu.Unlock()
		return nil
	}
	err := e.ctx.Raw(func(uintptr) error { return cu.GraphExecDestroy(e.h) })
	f.mu.Unlock()
	e.mu.Lock()
	var os []release.Owner
	for _, o := range e.own {
		os = append(os, o)
	}
	e.own = nil
	os = e.argOwners(os)
	if e.held != nil {
		os = append(os, e.held)
		e.held = nil
	}
	e.checkpoint(os) // lets the tracked streams go
	e.mu.Unlock()
	_ = e.srcRef.Release()
	_ = e.ctxRef.Release()
	return err
}

// check fails for a nil or zero Exec, before a method reads its fields.
func (e *Exec) check(op string) error {
	if e == nil {
		return invalid(op, "nil executable graph")
	}
	if e.execCore == nil {
		return closed(op, "executable graph")
	}
	return nil
}

func (e *Exec) acquire(op string) error {
	if e == nil {
		return invalid(op, "nil executable graph")
	}
	if e.execCore == nil || !e.obj.Acquire() {
		return closed(op, "executable graph")
	}
	return nil
}

// Launch queues the executable graph on s (cuGraphLaunch). s must be a
// stream of the graph's context; nil is an error. The executable and the
// stream are held for the call.
//
// A panic (or runtime.Goexit) in a host node is contained: the launch and
// the stream go on, and Err reports it — not Stream.Synchronize, which
// reports host functions launched on the stream itself.
//
// On a stream being captured (Capture, BeginCapture and their Graph and
// Builder forms) it is refused with driver.ErrStreamCaptureUnsupported
// before CUDA sees it, and the capture goes on. CUDA 13.0's driver refuses
// a graph launch into a capture too, but it invalidates the capture, and
// that raced libcuda's other calls on the capture's streams into a crash
// (and left a graph captured into damaged).
func (e *Exec) Launch(s *driver.Stream) error {
	if e != nil && e.execCore != nil && e.sink.hosts.Load() {
		hostfn.Expect() // its host nodes are served without entering Go
	}
	return e.onStream("Exec.Launch", s, cu.GraphLaunch)
}

// Upload uploads the executable to the device on s (cuGraphUpload), so
// that the first launch does not pay for it. Like Launch, it is refused on
// a stream being captured.
func (e *Exec) Upload(s *driver.Stream) error {
	return e.onStream("Exec.Upload", s, cu.GraphUpload)
}

func (e *Exec) onStream(op string, s *driver.Stream, call func(cu.CUgraphExec, cu.CUstream) error) error {
	// Written out, without defers, as driver's Event.Record is: with this
	// many returns Go would not open-code them, and a launch would pay for
	// defer records. Nothing between a hold and its release can panic.
	if s == nil {
		return fmt.Errorf("graph: %s: %w", op, driver.ErrNilStream)
	}
	if err := e.acquire(op); err != nil {
		return err
	}
	ref, err := seam.Hold(s)
	if err == nil {
		err = e.onHeldStream(op, s, ref, call)
		_ = ref.Release()
	}
	_ = e.obj.Release()
	return err
}

// onHeldStream is onStream once e and s (by ref) are held.
func (e *Exec) onHeldStream(op string, s *driver.Stream, ref lifetime.Ref, call func(cu.CUgraphExec, cu.CUstream) error) error {
	if sc := s.Context(); sc != e.ctx && !sc.Same(e.ctx) {
		return invalid(op, "the stream belongs to another context than the graph")
	}
	e.mu.Lock()
	if e.last != s {
		e.track(s, ref)
	}
	var err error
	sink := capture.Enter(s)
	switch {
	case sink != nil:
		// Driver 580 refuses a graph launch or upload into a capture and
		// invalidates the capture; the invalidation racing a record or
		// wait on the capture's streams crashed libcuda (a C program on
		// an H100 shows it), and one into a capture into an existing
		// graph left that graph damaged. Refused before CUDA sees it;
		// the capture goes on.
		err = fmt.Errorf("graph: %s: the stream is being captured: %w", op, driver.ErrStreamCaptureUnsupported)
	case s.IsLegacy():
		err = s.Raw(func(h uintptr) error { return call(e.h, cu.CUstream(h)) })
	case e.multi:
		err = e.boundCall(call, cu.CUstream(seam.Stream(s)))
	default:
		err = call(e.h, cu.CUstream(seam.Stream(s)))
	}
	warmed(e.obj.Refs(), e.last, s.Context())
	capture.Leave(s, sink)
	e.mu.Unlock()
	return err
}

// warmed takes values an executable's launch reads right after libcuda
// returns, before its unlock and releases: libcuda's launch evicts the
// caller's data from the CPU caches, and these plain reads of the
// executable's lines and the stream's first line miss at once, where each
// locked operation would wait for its own miss in turn. The values are
// only kept from being optimised away, combined into one that is never
// negative (a count, and addresses below 1<<63), so that no load is left
// to a branch that does not run.
func warmed(refs int64, last *driver.Stream, ctx *driver.Context) {
	if v := refs | int64(uintptr(unsafe.Pointer(last))) | int64(uintptr(unsafe.Pointer(ctx))); v < 0 {
		warmSink.Store(v)
	}
}

var warmSink atomic.Int64

// track remembers s (held) as a stream e runs on. e.mu is held.
// The reference is cloned from the call's own (held), so tracking works
// even when the stream was closed since the call took it.
func (e *execCore) track(s *driver.Stream, held lifetime.Ref) {
	for _, t := range e.streams {
		if t.s == s {
			e.last = s
			return
		}
	}
	if len(e.streams) >= maxTracked {
		e.checkpoint(nil)
	}
	if r, ok := held.Clone(); ok {
		e.streams = append(e.streams, tracked{s, r})
		e.last = s
	}
}

// Err returns, once, the panics and Goexits of host callbacks that ran in
// this executable, the graph it came from, or their clones since the last
// call, joined; nil if none. Panics of callbacks that came from another
// graph — a child graph's, the graph of an Update — are reported here and
// by that graph's executables alike.
func (e *Exec) Err() error {
	if e == nil || e.execCore == nil {
		return invalid("Exec.Err", "nil or zero executable graph")
	}
	return e.sink.take()
}

// Context is the executable's context (nil for a nil or zero Exec).
func (e *Exec) Context() *driver.Context {
	if e == nil || e.execCore == nil {
		return nil
	}
	return e.ctx
}

// Close destroys the executable (cuGraphExecDestroy) once no call is using
// it; work it already launched still runs, and what its nodes hold is
// released after that work. An executable with nodes in several contexts
// (Builder.On) is destroyed only after that work, off the caller's
// goroutine: its Close returns nil, and a failure of the destroy is
// reported through lifetime.Errors. Idempotent; the first result is kept.
func (e *Exec) Close() error {
	if e == nil {
		return invalid("Exec.Close", "nil executable graph")
	}
	if e.execCore == nil {
		return nil
	}
	return e.obj.Close()
}
