package graph

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// InstantiateFlags are cuGraphInstantiate flags.
type InstantiateFlags uint64

// Instantiate flags.
const (
	// AutoFreeOnLaunch frees memory the graph's alloc nodes allocated and
	// did not free when the executable is launched again.
	AutoFreeOnLaunch InstantiateFlags = InstantiateFlags(cu.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
	// Upload uploads the executable on InstantiateOptions.UploadStream as
	// part of instantiation.
	Upload InstantiateFlags = InstantiateFlags(cu.CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
	// DeviceLaunch makes an executable that device code can launch.
	DeviceLaunch InstantiateFlags = InstantiateFlags(cu.CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
	// UseNodePriority launches kernels with their node priority attributes
	// instead of the stream's priority.
	UseNodePriority InstantiateFlags = InstantiateFlags(cu.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)
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
	InstantiateSuccess                  InstantiateResult = InstantiateResult(cu.CUDA_GRAPH_INSTANTIATE_SUCCESS)
	InstantiateFailed                   InstantiateResult = InstantiateResult(cu.CUDA_GRAPH_INSTANTIATE_ERROR)
	InstantiateInvalidStructure         InstantiateResult = InstantiateResult(cu.CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE)
	InstantiateNodeOperationUnsupported InstantiateResult = InstantiateResult(cu.CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED)
	InstantiateMultipleContexts         InstantiateResult = InstantiateResult(cu.CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED)
	InstantiateConditionalHandleUnused  InstantiateResult = InstantiateResult(cu.CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED)
)

// String is the C name of the result.
func (r InstantiateResult) String() string { return cu.CUgraphInstantiateResult(r).String() }

func (e *InstantiateError) Error() string {
	s := fmt.Sprintf("graph: Instantiate: %v (%v)", e.Err, e.Result)
	if !e.Node.IsZero() {
		s += fmt.Sprintf(" at node %#x", uintptr(e.Node.h))
	}
	return s
}

// Unwrap returns the driver's error.
func (e *InstantiateError) Unwrap() error { return e.Err }

// Exec is an executable graph (CUgraphExec). It outlives the graph it was
// made from and keeps everything that graph's nodes held alive until it is
// closed and its launched work has finished.
//
// An Exec holds the streams it was launched on (at most 16 at a time) until
// what an update retired has been released, or a checkpoint lets them go.
//
// An Exec is safe for concurrent use: CUDA's executable graphs are not
// internally synchronised, so purecuda serialises the calls on one Exec
// (launches on different streams still run concurrently on the device).
type Exec struct {
	h      cu.CUgraphExec
	ctx    *driver.Context
	ctxRef lifetime.Ref
	obj    lifetime.Object // owner + calls in flight
	sink   *sink
	src    *Graph // the graph it was instantiated from: per-node updates name its nodes

	mu            sync.Mutex
	last          *driver.Stream // the stream of the latest launch, tracked already
	streams       []tracked      // streams launched on: retired owners wait for their work
	own           map[cu.CUgraphNode][]lifetime.Owner
	held          []lifetime.Owner // user objects of graphs given to Update
	retiring      []retireBatch    // retired owners waiting for launches, in order
	retireRunning bool             // a retire worker is draining retiring
}

// tracked is a stream an Exec was launched on, held so that events can be
// recorded on it when owners are retired.
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
	if err := g.acquire(op); err != nil {
		return nil, err
	}
	defer g.release()
	if g.root != nil {
		return nil, invalid(op, "a body graph runs as part of its node: instantiate the graph it belongs to")
	}
	var sref lifetime.Ref
	if o.UploadStream != nil {
		r, err := o.UploadStream.Hold()
		if err != nil {
			return nil, err
		}
		sref = r
		defer sref.Release()
		if !o.UploadStream.Context().Same(g.ctx) {
			return nil, invalid(op, "the upload stream belongs to another context")
		}
	}
	ref, ok := g.ctxRef.Clone()
	if !ok {
		return nil, closed(op, "graph's context")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p := &cu.CUDA_GRAPH_INSTANTIATE_PARAMS{Flags: uint64(o.Flags)}
	if o.UploadStream != nil {
		p.HUploadStream = cu.CUstream(o.UploadStream.Handle())
	}
	h := new(cu.CUgraphExec)
	err := g.bind(func() error { return cu.GraphInstantiateWithParams(h, g.h, p) })
	if err != nil || p.Result_out != cu.CUDA_GRAPH_INSTANTIATE_SUCCESS {
		_ = ref.Release()
		if err == nil {
			err = fmt.Errorf("graph: %s: %v: %w", op, p.Result_out, driver.ErrInvalidValue)
		}
		ie := &InstantiateError{Err: err, Result: InstantiateResult(p.Result_out)}
		if p.HErrNode_out != 0 {
			ie.Node = Node{g: g, h: p.HErrNode_out}
		}
		return nil, ie
	}
	g.shared()
	e := &Exec{h: *h, ctx: g.ctx, ctxRef: ref, sink: g.sink, src: g}
	e.obj.Init(e.destroy)
	return e, nil
}

// destroy destroys the executable (CUDA frees it once its launched work is
// done) and retires what updates gave it, which is released after that
// work too.
func (e *Exec) destroy() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.ctx.Raw(func(uintptr) error { return cu.GraphExecDestroy(e.h) })
	var os []lifetime.Owner
	for _, o := range e.own {
		os = append(os, o...)
	}
	e.own = nil
	os = append(os, e.held...)
	e.held = nil
	e.retire(os) // lets the tracked streams go, after recording on them
	for _, t := range e.streams {
		_ = t.ref.Release()
	}
	e.streams, e.last = nil, nil
	_ = e.ctxRef.Release()
	return err
}

// retire releases owners once every launch of e enqueued so far has
// finished: it records an event on each stream e was launched on and queues
// the owners behind those events for e's retire worker, one goroutine that
// waits for the batches in order (so pending retires hold no more than one
// OS thread). Owners of an executable never launched are released at once
// (through the release queue). When an event cannot be recorded or waited
// for — a stream being captured refuses both — the owners are never
// released early: the worker waits for the whole context, and if even that
// fails with an error that is not sticky, it keeps them (a leak, counted in
// lifetime.Errors, never a use after free). e.mu is held.
func (e *Exec) retire(os []lifetime.Owner) {
	if len(os) == 0 {
		return
	}
	if len(e.streams) == 0 && !e.retireRunning {
		// Nothing launched since the last batch, and every earlier batch
		// is done: nothing in flight can use os.
		for _, o := range os {
			lifetime.Defer(o)
		}
		return
	}
	e.checkpoint(os)
}

// checkpoint queues a batch of owners (none, for a plain checkpoint) behind
// the launches on every stream tracked so far, then lets those streams go:
// batches are released in order, so any later batch also waits for these
// launches. It keeps an executable launched on many streams from holding
// them all until it is closed. e.mu is held.
func (e *Exec) checkpoint(os []lifetime.Owner) {
	ref, ok := e.ctxRef.Clone()
	if !ok { // cannot happen while e holds its context; never free early
		keepForGood(os)
		return
	}
	b := retireBatch{owners: os, ctx: e.ctx, ctxRef: ref}
	_ = e.ctx.Raw(func(uintptr) error {
		for _, t := range e.streams {
			if isCapturing(t.s) {
				// An event recorded now would join the capture: wait for
				// the stream once the capture is over instead.
				if r, ok := t.ref.Clone(); ok {
					b.later = append(b.later, tracked{t.s, r})
					continue
				}
				b.whole = true
				continue
			}
			var ev cu.CUevent
			if cu.EventCreate(&ev, uint32(cu.CU_EVENT_DISABLE_TIMING)) != nil {
				b.whole = true
				continue
			}
			if cu.EventRecord(ev, cu.CUstream(t.s.Handle())) != nil {
				_ = cu.EventDestroy(ev)
				b.whole = true
				continue
			}
			b.events = append(b.events, ev)
		}
		return nil
	})
	for _, t := range e.streams {
		_ = t.ref.Release()
	}
	e.streams, e.last = e.streams[:0], nil
	e.retiring = append(e.retiring, b)
	if !e.retireRunning {
		e.retireRunning = true
		go e.retireWorker()
	}
}

// maxTracked is how many streams an Exec tracks before a checkpoint lets
// them go.
const maxTracked = 16

// retireBatch is owners waiting for the launches enqueued before they were
// retired.
type retireBatch struct {
	owners []lifetime.Owner
	events []cu.CUevent
	later  []tracked // streams being captured at the retire: waited for after the capture
	whole  bool      // wait for the whole context instead
	ctx    *driver.Context
	ctxRef lifetime.Ref
}

// retireWorker releases retired batches in order, each once its launches
// are done; it ends when none is left.
func (e *Exec) retireWorker() {
	for {
		e.mu.Lock()
		if len(e.retiring) == 0 {
			e.retireRunning = false
			e.mu.Unlock()
			return
		}
		b := e.retiring[0]
		e.retiring = e.retiring[1:]
		e.mu.Unlock()
		b.wait()
	}
}

func (b *retireBatch) wait() {
	safe := true
	_ = b.ctx.Raw(func(uintptr) error {
		for _, ev := range b.events {
			if err := cu.EventSynchronize(ev); err != nil && !sticky(err) {
				b.whole = true
			}
			_ = cu.EventDestroy(ev)
		}
		for _, t := range b.later {
			for isCapturing(t.s) {
				time.Sleep(time.Millisecond)
			}
			if err := cu.StreamSynchronize(cu.CUstream(t.s.Handle())); err != nil && !sticky(err) {
				safe = false
			}
		}
		if b.whole {
			if err := cu.CtxSynchronize_v2000(); err != nil && !sticky(err) {
				safe = false
			}
		}
		return nil
	})
	for _, t := range b.later {
		_ = t.ref.Release()
	}
	if safe {
		for _, o := range b.owners {
			_ = o.Release()
		}
	} else {
		// Cannot tell that the launches finished: keep their owners, for
		// good, and say so.
		keepForGood(b.owners)
		lifetime.Defer(lifetime.OwnerFunc(func() error {
			return fmt.Errorf("graph: %d owners of an executable kept for good: its launches could not be waited for", len(b.owners))
		}))
	}
	_ = b.ctxRef.Release()
}

// kept holds owners that could never be released safely (see retire and
// Graph.unadd): a leak, never a use after free.
var (
	keptMu sync.Mutex
	kept   []lifetime.Owner
)

func keepForGood(os []lifetime.Owner) {
	keptMu.Lock()
	kept = append(kept, os...)
	keptMu.Unlock()
}

// sticky reports whether err leaves the context unusable, so that nothing
// queued runs any more (and what it named may be released).
func sticky(err error) bool {
	var e *driver.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case driver.ErrIllegalAddress, driver.ErrLaunchFailed, driver.ErrAssert, driver.ErrHardwareStackError,
		driver.ErrIllegalInstruction, driver.ErrMisalignedAddress, driver.ErrInvalidAddressSpace,
		driver.ErrInvalidPc, driver.ErrLaunchTimeout, driver.ErrEccUncorrectable, driver.ErrContextIsDestroyed:
		return true
	}
	return false
}

// isCapturing reports whether s is being captured: an event recorded there
// would become part of the capture instead of marking e's launches.
func isCapturing(s *driver.Stream) bool {
	st := new(cu.CUstreamCaptureStatus)
	return cu.StreamIsCapturing(cu.CUstream(s.Handle()), st) != nil || *st != cu.CU_STREAM_CAPTURE_STATUS_NONE
}

func (e *Exec) acquire(op string) error {
	if e == nil {
		return invalid(op, "nil executable graph")
	}
	if !e.obj.Acquire() {
		return closed(op, "executable graph")
	}
	return nil
}

// Launch queues the executable graph on s (cuGraphLaunch). s must be a
// stream of the graph's context; nil is an error. The executable and the
// stream are held for the call.
func (e *Exec) Launch(s *driver.Stream) error {
	if e != nil && e.sink != nil && e.sink.hosts.Load() {
		lifetime.Expect() // its host nodes are served without entering Go
	}
	return e.onStream("Exec.Launch", s, cu.GraphLaunch)
}

// Upload uploads the executable to the device on s (cuGraphUpload), so
// that the first launch does not pay for it.
func (e *Exec) Upload(s *driver.Stream) error {
	return e.onStream("Exec.Upload", s, cu.GraphUpload)
}

func (e *Exec) onStream(op string, s *driver.Stream, call func(cu.CUgraphExec, cu.CUstream) error) error {
	if s == nil {
		return fmt.Errorf("graph: %s: %w", op, driver.ErrNilStream)
	}
	if err := e.acquire(op); err != nil {
		return err
	}
	defer e.obj.Release()
	ref, err := s.Hold()
	if err != nil {
		return err
	}
	defer ref.Release()
	if sc := s.Context(); sc != e.ctx && !sc.Same(e.ctx) {
		return invalid(op, "the stream belongs to another context than the graph")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last != s {
		e.track(s, ref)
	}
	if s.IsLegacy() {
		err = s.Raw(func(h uintptr) error { return call(e.h, cu.CUstream(h)) })
	} else {
		err = call(e.h, cu.CUstream(s.Handle()))
	}
	if err == nil {
		// Launched into a stream capture, the executable becomes a child
		// node of the captured graph: that graph holds the executable (and
		// so what its nodes hold) for as long as it may run.
		if sink := s.InstalledCaptureSink(); sink != nil {
			if r, ok := lifetime.RefOf(&e.obj).Clone(); ok {
				sink.Keep(s, []lifetime.Owner{r})
			}
		}
	}
	return err
}

// track remembers s (held) as a stream e runs on. e.mu is held.
// The reference is cloned from the call's own (held), so tracking works
// even when the stream was closed since the call took it.
func (e *Exec) track(s *driver.Stream, held lifetime.Ref) {
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
// call, joined; nil if none.
func (e *Exec) Err() error {
	if e == nil {
		return invalid("Exec.Err", "nil executable graph")
	}
	return e.sink.take()
}

// Context is the executable's context (nil for a nil Exec).
func (e *Exec) Context() *driver.Context {
	if e == nil {
		return nil
	}
	return e.ctx
}

// Close destroys the executable (cuGraphExecDestroy) once no call is using
// it; work it already launched still runs, and what its nodes hold is
// released after that work. Idempotent; the first result is kept.
func (e *Exec) Close() error {
	if e == nil {
		return invalid("Exec.Close", "nil executable graph")
	}
	if e.ctx == nil {
		return nil
	}
	return e.obj.Close()
}
