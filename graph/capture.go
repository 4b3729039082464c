package graph

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// CaptureMode is how a capture interacts with other threads
// (CUstreamCaptureMode).
type CaptureMode int

// Capture modes.
const (
	// CaptureGlobal refuses potentially unsafe calls on every thread while
	// the capture lasts.
	CaptureGlobal CaptureMode = CaptureMode(cu.CU_STREAM_CAPTURE_MODE_GLOBAL)
	// CaptureThreadLocal refuses them on the capturing thread only.
	CaptureThreadLocal CaptureMode = CaptureMode(cu.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
	// CaptureRelaxed refuses nothing beyond what conflicts with capture.
	CaptureRelaxed CaptureMode = CaptureMode(cu.CU_STREAM_CAPTURE_MODE_RELAXED)
)

// String names the mode.
func (m CaptureMode) String() string {
	switch m {
	case CaptureGlobal:
		return "global"
	case CaptureThreadLocal:
		return "thread-local"
	case CaptureRelaxed:
		return "relaxed"
	}
	return fmt.Sprintf("CaptureMode(%d)", int(m))
}

// CaptureStatus is a stream's capture state (CUstreamCaptureStatus).
type CaptureStatus int

// Capture states.
const (
	NotCapturing       CaptureStatus = CaptureStatus(cu.CU_STREAM_CAPTURE_STATUS_NONE)
	Capturing          CaptureStatus = CaptureStatus(cu.CU_STREAM_CAPTURE_STATUS_ACTIVE)
	CaptureInvalidated CaptureStatus = CaptureStatus(cu.CU_STREAM_CAPTURE_STATUS_INVALIDATED)
)

// String names the state.
func (c CaptureStatus) String() string {
	switch c {
	case NotCapturing:
		return "not capturing"
	case Capturing:
		return "capturing"
	case CaptureInvalidated:
		return "capture invalidated"
	}
	return fmt.Sprintf("CaptureStatus(%d)", int(c))
}

// ErrCapturing is matched by the error for beginning a capture, or forking
// into one, on a stream that is being captured already.
var ErrCapturing = errors.New("graph: the stream is being captured already")

// ErrNotCapturing is matched by the error for ending, forking or joining a
// capture that is over (or a nil or zero StreamCapture).
var ErrNotCapturing = errors.New("graph: no capture in progress")

// IsCapturing reports s's capture state (cuStreamIsCapturing).
func IsCapturing(s *driver.Stream) (CaptureStatus, error) {
	if s == nil {
		return 0, fmt.Errorf("graph: IsCapturing: %w", driver.ErrNilStream)
	}
	st := new(cu.CUstreamCaptureStatus)
	err := s.Raw(func(h uintptr) error { return cu.StreamIsCapturing(cu.CUstream(h), st) })
	return CaptureStatus(*st), err
}

// Capture records the work f queues on s into a new graph and returns it;
// the caller owns it (Close). f runs between cuStreamBeginCapture and
// cuStreamEndCapture with the calling goroutine locked to its OS thread;
// it gets s back. The graph holds what the captured work names (see
// StreamCapture).
//
// If f returns an error, the capture is ended, the partial graph destroyed
// and f's error returned. If f panics (or calls runtime.Goexit), the same
// cleanup runs and the panic then goes on, unchanged.
func Capture(s *driver.Stream, mode CaptureMode, f func(s *driver.Stream) error) (*Graph, error) {
	c, err := captureFunc("Capture", s, mode, nil, nil, f)
	if err != nil {
		return nil, err
	}
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	return c.st.graph, nil
}

// Capture records the work f queues on s into g, as root nodes (see
// Builder.Capture).
func (g *Graph) Capture(s *driver.Stream, mode CaptureMode, f func(s *driver.Stream) error) ([]Node, error) {
	return g.After().Capture(s, mode, f)
}

// BeginCapture begins capturing s into g, as root nodes (see
// Builder.BeginCapture).
func (g *Graph) BeginCapture(s *driver.Stream, mode CaptureMode) (*StreamCapture, error) {
	return g.After().BeginCapture(s, mode)
}

// Capture records the work f queues on s into b's graph, after b's nodes
// (cuStreamBeginCaptureToGraph, CUDA 12.3+), as the package-level Capture
// does into a new graph; the graph may be a conditional node's body. It
// returns the nodes the capture ended on, for adding work after it.
func (b Builder) Capture(s *driver.Stream, mode CaptureMode, f func(s *driver.Stream) error) ([]Node, error) {
	if err := b.check("Graph.Capture"); err != nil {
		return nil, err
	}
	c, err := captureFunc("Graph.Capture", s, mode, b.g, b.deps, f)
	if err != nil {
		return nil, err
	}
	return c.Tail(), nil
}

// BeginCapture begins capturing s into a new graph
// (cuStreamBeginCapture). End returns the graph; defer Abort right after
// BeginCapture so that no path leaves s capturing. In CaptureGlobal and
// CaptureThreadLocal, the capture begins and ends on an OS thread of its
// own (see StreamCapture).
func BeginCapture(s *driver.Stream, mode CaptureMode) (*StreamCapture, error) {
	return beginCapture("BeginCapture", s, mode, nil, nil, mode != CaptureRelaxed)
}

// BeginCapture begins capturing s into b's graph after b's nodes
// (cuStreamBeginCaptureToGraph, CUDA 12.3+); End returns that graph.
func (b Builder) BeginCapture(s *driver.Stream, mode CaptureMode) (*StreamCapture, error) {
	if err := b.check("Graph.BeginCapture"); err != nil {
		return nil, err
	}
	return beginCapture("Graph.BeginCapture", s, mode, b.g, b.deps, mode != CaptureRelaxed)
}

// StreamCapture is a capture in progress, from BeginCapture until End or
// Abort. Stream capture records the work queued on a stream into a graph
// instead of running it (cuStreamBeginCapture … cuStreamEndCapture).
// Capture and BeginCapture make a new graph; Graph.Capture,
// Graph.BeginCapture and the Builder's capture into an existing graph or a
// conditional node's body, after given nodes
// (cuStreamBeginCaptureToGraph).
//
// # Lifetime
//
// A captured graph holds what its nodes name, like one built node by node:
// while a stream is captured, purecuda installs a driver.CaptureSink on it,
// so that every purecuda call queueing work there (kernel launches with
// their buffer arguments and Args, asynchronous copies and memsets of
// buffers, pinned host buffers and Go slices, host functions) hands the
// capture a reference on what it names. At the end they move into the
// graph's owner table, recorded against the node each call added (found
// with cuStreamGetCaptureInfo), so the caller may close or drop buffers,
// Args, slices and closures as soon as the call returns. A host function
// launched during the capture runs at every launch of the graph and its
// panics are reported by Exec.Err. If the capture fails or is aborted, the
// partial graph is destroyed and what it held is released.
//
// Work queued through Raw handles or other libraries is not seen: hold what
// it names yourself. AllocAsync on a captured stream is refused (use a
// memory-alloc node).
//
// # Guard
//
// No stream is left capturing. Capture ends the capture on every path out
// of f: a returned error, a panic, a runtime.Goexit. With BeginCapture,
// defer Abort right after it: Abort does nothing after End, and ends the
// capture and destroys the partial graph on every other path. A
// StreamCapture dropped without End or Abort is aborted by a cleanup, late.
//
// # Modes and threads
//
// CaptureRelaxed suits Go best. In CaptureGlobal, CUDA refuses "unsafe"
// calls (cuMemAlloc, cuMemFree, synchronous copies…) on every thread while
// the capture lasts, including the releases purecuda makes for you: a
// buffer whose last reference goes meanwhile (a Close, or the cleanup of
// an unreachable Buffer) may fail to be freed, which lifetime.Errors
// reports. CaptureThreadLocal refuses them on the capturing thread only. CUDA ends a global or thread-local capture only on the OS
// thread that began it: Capture locks the calling goroutine to its thread
// while f runs (f's own calls are on that thread, as CUDA means), and
// BeginCapture in those modes begins and ends on a thread of its own, so
// End and Abort work from any goroutine (and CaptureThreadLocal restricts
// none of the caller's calls).
//
// # Concurrency
//
// The methods are safe for concurrent use, but work queued on a captured
// stream concurrently with Fork, Join, End or Abort is captured or not as
// CUDA happens to see it.
type StreamCapture struct {
	st      *captureState
	cleanup runtime.Cleanup
}

func beginCapture(op string, s *driver.Stream, mode CaptureMode, target *Graph, deps []Node, thread bool) (*StreamCapture, error) {
	st, err := begin(op, s, mode, target, deps, thread)
	if err != nil {
		return nil, err
	}
	c := &StreamCapture{st: st}
	c.cleanup = runtime.AddCleanup(c, abortLeaked, st)
	return c, nil
}

// captureFunc runs f between begin and end on the calling goroutine, locked
// to its thread; on every path out of f the capture ends.
func captureFunc(op string, s *driver.Stream, mode CaptureMode, target *Graph, deps []Node, f func(*driver.Stream) error) (*StreamCapture, error) {
	if f == nil {
		return nil, invalid(op, "nil function")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st, err := begin(op, s, mode, target, deps, false)
	if err != nil {
		return nil, err
	}
	c := &StreamCapture{st: st}
	returned := false
	defer func() {
		if !returned { // f panicked or called runtime.Goexit: clean up, let it go on
			_ = c.Abort()
		}
	}()
	ferr := f(s)
	returned = true
	if ferr != nil {
		if err := c.Abort(); err != nil {
			return nil, errors.Join(ferr, err)
		}
		return nil, ferr
	}
	if _, err := c.End(); err != nil {
		return nil, err
	}
	return c, nil
}

// abortLeaked is the cleanup of a StreamCapture dropped while capturing:
// it aborts on the release goroutine.
func abortLeaked(st *captureState) {
	lifetime.Defer(lifetime.OwnerFunc(func() error {
		_, err := st.end(true)
		if errors.Is(err, ErrNotCapturing) {
			return nil
		}
		return err
	}))
}

func (c *StreamCapture) state(op string) (*captureState, error) {
	if c == nil || c.st == nil {
		return nil, fmt.Errorf("graph: %s: nil or zero StreamCapture: %w", op, ErrNotCapturing)
	}
	return c.st, nil
}

// Stream is the stream the capture began on (nil for a nil StreamCapture).
func (c *StreamCapture) Stream() *driver.Stream {
	if c == nil || c.st == nil {
		return nil
	}
	return c.st.origin
}

// Fork brings other into the capture: work queued on other from now on is
// captured too, after the work captured on the capture's stream so far
// (an event recorded there, waited for on other). other must be a stream of
// the same context that is not being captured. End joins every forked
// stream back; Join does it earlier, where the order matters.
func (c *StreamCapture) Fork(other *driver.Stream) error {
	const op = "StreamCapture.Fork"
	st, err := c.state(op)
	if err != nil {
		return err
	}
	return st.fork(op, other)
}

// Join makes the work captured on the capture's stream from now on wait for
// the work captured on other, a stream brought in with Fork (or by waiting
// for an event recorded on a captured stream).
func (c *StreamCapture) Join(other *driver.Stream) error {
	const op = "StreamCapture.Join"
	st, err := c.state(op)
	if err != nil {
		return err
	}
	return st.join(op, other)
}

// End ends the capture (cuStreamEndCapture) and returns the graph: a new
// graph the caller owns, or the graph captured into. Streams forked into
// the capture and not joined back are joined first. End always ends the
// capture: on failure (an invalidated capture, say) the partial graph is
// destroyed, what the capture held is released, and the error returned.
// End after End or Abort is an error matching ErrNotCapturing.
func (c *StreamCapture) End() (*Graph, error) {
	st, err := c.state("StreamCapture.End")
	if err != nil {
		return nil, err
	}
	g, tail, err := st.finish(false)
	c.cleanup.Stop()
	if err != nil {
		return nil, err
	}
	var nodes []Node
	for _, h := range tail {
		nodes = append(nodes, Node{g: g, h: h})
	}
	st.mu.Lock()
	st.graph, st.tail = g, nodes
	st.mu.Unlock()
	return g, nil
}

// Tail returns, after a successful End, the nodes the capture's stream
// depended on last: the captured work's last nodes, for g.After(Tail()...).
// It is nil before End, and for a capture that added nothing.
func (c *StreamCapture) Tail() []Node {
	if c == nil || c.st == nil {
		return nil
	}
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	return slices.Clone(c.st.tail)
}

// Abort ends the capture, destroys what it captured (the new graph, or the
// nodes captured into an existing one) and releases what it held. It does
// nothing after End or Abort, so it can be deferred right after
// BeginCapture.
func (c *StreamCapture) Abort() error {
	if c == nil || c.st == nil {
		return nil
	}
	_, _, err := c.st.finish(true)
	c.cleanup.Stop()
	if errors.Is(err, ErrNotCapturing) {
		return nil
	}
	return err
}

// captureState is a capture's bookkeeping, and the driver.CaptureSink
// installed on its streams.
type captureState struct {
	origin *driver.Stream
	mode   CaptureMode
	ctx    *driver.Context
	ctxRef lifetime.Ref // for the new graph
	target *Graph       // the graph captured into, held; nil for a new graph
	before map[cu.CUgraphNode]bool
	psink  *sink     // where captured host functions report panics
	thread *osThread // begins and ends the capture; nil: the caller's thread

	mu      sync.Mutex
	ending  bool             // End or Abort has begun
	done    bool             // the capture is over and the sink off its streams
	streams []heldStream     // the sink is installed on these; origin first
	kept    []keptOwner      // what captured work names
	after   []lifetime.Owner // releases waiting for the end (AfterCapture)
	graph   *Graph           // after End: the graph
	tail    []Node           // after End: the last nodes

	evMu sync.Mutex // fork and join record and wait in pairs
	ev   cu.CUevent

	qmu sync.Mutex // cuStreamGetCaptureInfo's out-parameters
	q   captureInfo
}

type heldStream struct {
	s   *driver.Stream
	ref lifetime.Ref
}

type keptOwner struct {
	node cu.CUgraphNode
	o    lifetime.Owner
}

type captureInfo struct {
	status cu.CUstreamCaptureStatus
	deps   *cu.CUgraphNode // CUDA's array, valid until the next call on the stream
	edges  *cu.CUgraphEdgeData
	n      uintptr
}

// begin installs the capture's sink on s and begins capturing, into target
// after deps when target is set.
func begin(op string, s *driver.Stream, mode CaptureMode, target *Graph, deps []Node, thread bool) (st *captureState, err error) {
	if s == nil {
		return nil, fmt.Errorf("graph: %s: %w", op, driver.ErrNilStream)
	}
	if mode != CaptureGlobal && mode != CaptureThreadLocal && mode != CaptureRelaxed {
		return nil, invalid(op, "capture mode %d", int(mode))
	}
	if s.IsLegacy() {
		return nil, invalid(op, "CUDA does not capture the legacy default stream: use a stream made with NewStream")
	}
	sref, err := s.Hold()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = sref.Release()
		}
	}()
	ctx := s.Context()
	st = &captureState{origin: s, mode: mode, ctx: ctx, target: target, psink: &sink{}}
	if target != nil {
		if err := target.acquire(op); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				target.release()
			}
		}()
		if !target.ctx.Same(ctx) {
			return nil, invalid(op, "the stream belongs to another context than the graph")
		}
		st.psink = target.top().sink
	} else {
		ref, err := ctx.Hold()
		if err != nil {
			return nil, err
		}
		st.ctxRef = ref
		defer func() {
			if err != nil {
				_ = ref.Release()
			}
		}()
	}
	if err := s.SetCaptureSink(st); err != nil {
		if s.InstalledCaptureSink() != nil {
			return nil, fmt.Errorf("graph: %s: %w", op, ErrCapturing)
		}
		return nil, err
	}
	st.streams = []heldStream{{s, sref}}
	if thread {
		st.thread = newOSThread()
	}
	if target != nil {
		err = st.beginInto(op, deps)
	} else {
		err = st.run(func() error {
			if err := notCapturing(op, s); err != nil {
				return err
			}
			return cu.StreamBeginCapture(cu.CUstream(s.Handle()), cu.CUstreamCaptureMode(mode))
		})
	}
	if err != nil {
		s.ClearCaptureSink(st)
		st.mu.Lock()
		st.done = true // what is handed over from now on is released at once
		kept, after := st.kept, st.after
		st.kept, st.after, st.streams = nil, nil, nil
		st.mu.Unlock()
		if st.thread != nil {
			st.thread.stop()
		}
		if len(kept) > 0 { // work queued meanwhile ran uncaptured: release once it has
			_ = s.Synchronize()
			for _, k := range kept {
				_ = k.o.Release()
			}
		}
		// Stream-ordered frees and unloads that found the sink installed
		// and were held back for a capture that never began.
		releaseOwners(after)
		return nil, err
	}
	return st, nil
}

// beginInto begins capturing into st.target after deps, noting the nodes
// the target had, so that an abort can remove what the capture added.
func (st *captureState) beginInto(op string, deps []Node) error {
	g := st.target
	if err := g.lock(op); err != nil {
		return err
	}
	defer g.mu.Unlock()
	hs := make([]cu.CUgraphNode, 0, len(deps))
	for _, n := range deps {
		if err := g.node(op, n); err != nil {
			return err
		}
		hs = append(hs, n.h)
	}
	var dp *cu.CUgraphNode
	if len(hs) > 0 {
		dp = &hs[0]
	}
	return st.run(func() error {
		if err := notCapturing(op, st.origin); err != nil {
			return err
		}
		nodes, err := fetchNodes(func(p *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetNodes(g.h, p, n) })
		if err != nil {
			return err
		}
		st.before = make(map[cu.CUgraphNode]bool, len(nodes))
		for _, h := range nodes {
			st.before[h] = true
		}
		return cu.StreamBeginCaptureToGraph(cu.CUstream(st.origin.Handle()), g.h, dp, nil, uintptr(len(hs)), cu.CUstreamCaptureMode(st.mode))
	})
}

// notCapturing fails for a stream some other code captures through Raw.
func notCapturing(op string, s *driver.Stream) error {
	var status cu.CUstreamCaptureStatus
	if err := cu.StreamIsCapturing(cu.CUstream(s.Handle()), &status); err != nil {
		return err
	}
	if status != cu.CU_STREAM_CAPTURE_STATUS_NONE {
		return fmt.Errorf("graph: %s: %w", op, ErrCapturing)
	}
	return nil
}

// run runs f with the context bound, on the capture's thread if it has
// one.
func (st *captureState) run(f func() error) error {
	call := func() error { return st.ctx.Raw(func(uintptr) error { return f() }) }
	if st.thread == nil {
		return call()
	}
	return st.thread.do(call)
}

// event returns the capture's event for fork and join, made on first use;
// st.evMu is held and the context bound.
func (st *captureState) event() (cu.CUevent, error) {
	if st.ev == 0 {
		var ev cu.CUevent
		if err := cu.EventCreate(&ev, uint32(cu.CU_EVENT_DISABLE_TIMING)); err != nil {
			return 0, err
		}
		st.ev = ev
	}
	return st.ev, nil
}

// link makes later work on waiter wait for the work queued on from.
func (st *captureState) link(from, waiter *driver.Stream) error {
	st.evMu.Lock()
	defer st.evMu.Unlock()
	return st.ctx.Raw(func(uintptr) error {
		ev, err := st.event()
		if err != nil {
			return err
		}
		if err := cu.EventRecord(ev, cu.CUstream(from.Handle())); err != nil {
			return err
		}
		return cu.StreamWaitEvent(cu.CUstream(waiter.Handle()), ev, 0)
	})
}

func (st *captureState) fork(op string, other *driver.Stream) error {
	st.mu.Lock()
	ending := st.ending
	st.mu.Unlock()
	if ending {
		return fmt.Errorf("graph: %s: %w", op, ErrNotCapturing)
	}
	if other == nil {
		return fmt.Errorf("graph: %s: %w", op, driver.ErrNilStream)
	}
	if other == st.origin {
		return invalid(op, "a stream cannot fork from itself")
	}
	if other.IsLegacy() {
		return invalid(op, "CUDA does not capture the legacy default stream")
	}
	if !other.Context().Same(st.ctx) {
		return invalid(op, "the stream belongs to another context than the capture")
	}
	ref, err := other.Hold()
	if err != nil {
		return err
	}
	st.mu.Lock()
	if st.ending {
		st.mu.Unlock()
		_ = ref.Release()
		return fmt.Errorf("graph: %s: %w", op, ErrNotCapturing)
	}
	installed := false
	if other.InstalledCaptureSink() != driver.CaptureSink(st) {
		if err := other.SetCaptureSink(st); err != nil {
			st.mu.Unlock()
			_ = ref.Release()
			if other.InstalledCaptureSink() != nil {
				return fmt.Errorf("graph: %s: %w", op, ErrCapturing)
			}
			return err
		}
		installed = true
		st.streams = append(st.streams, heldStream{other, ref})
	}
	st.mu.Unlock()
	if !installed {
		_ = ref.Release() // already part of the capture: fork again
	}
	if err := st.link(st.origin, other); err != nil {
		if installed {
			st.drop(other)
		}
		return err
	}
	return nil
}

// drop takes s out of the capture's streams after a failed fork.
func (st *captureState) drop(s *driver.Stream) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, hs := range st.streams {
		if hs.s == s {
			s.ClearCaptureSink(st)
			_ = hs.ref.Release()
			st.streams = append(st.streams[:i], st.streams[i+1:]...)
			return
		}
	}
}

func (st *captureState) join(op string, other *driver.Stream) error {
	if other == nil {
		return fmt.Errorf("graph: %s: %w", op, driver.ErrNilStream)
	}
	if other == st.origin {
		return invalid(op, "a stream cannot join itself")
	}
	st.mu.Lock()
	member := false
	for _, hs := range st.streams {
		member = member || hs.s == other
	}
	ending := st.ending
	st.mu.Unlock()
	if ending {
		return fmt.Errorf("graph: %s: %w", op, ErrNotCapturing)
	}
	if !member {
		return invalid(op, "the stream is not part of the capture (Fork it first)")
	}
	return st.link(other, st.origin)
}

// Keep implements driver.CaptureSink: it records owners against the node
// the call just added to the capture.
func (st *captureState) Keep(s *driver.Stream, owners []lifetime.Owner) {
	status, node, known := st.query(s)
	if known && status == cu.CU_STREAM_CAPTURE_STATUS_NONE {
		// Not captured: the call raced with the capture's begin or end
		// and its work runs now. Release once it has run.
		_ = cu.StreamSynchronize(cu.CUstream(s.Handle()))
		releaseOwners(owners)
		return
	}
	st.mu.Lock()
	if st.done {
		st.mu.Unlock()
		releaseOwners(owners)
		return
	}
	for _, o := range owners {
		st.kept = append(st.kept, keptOwner{node, o})
		if _, ok := o.(lifetime.CallbackOwner); ok { // a captured host function
			st.psink.hosts.Store(true)
		}
	}
	st.mu.Unlock()
}

// query reads s's capture state and, when the stream depends on exactly
// one node (the one the last call added), that node.
func (st *captureState) query(s *driver.Stream) (cu.CUstreamCaptureStatus, cu.CUgraphNode, bool) {
	var node cu.CUgraphNode
	status, ok := st.info(s, func(deps []cu.CUgraphNode) {
		if len(deps) == 1 {
			node = deps[0]
		}
	})
	if status != cu.CU_STREAM_CAPTURE_STATUS_ACTIVE {
		node = 0
	}
	return status, node, ok
}

// tailOf copies the nodes s depends on now.
func (st *captureState) tailOf(s *driver.Stream) (tail []cu.CUgraphNode) {
	st.info(s, func(deps []cu.CUgraphNode) { tail = slices.Clone(deps) })
	return tail
}

// info reads s's capture state (cuStreamGetCaptureInfo) and passes the
// nodes s depends on, in CUDA's memory, to use; ok is false when the query
// failed.
func (st *captureState) info(s *driver.Stream, use func(deps []cu.CUgraphNode)) (status cu.CUstreamCaptureStatus, ok bool) {
	st.qmu.Lock()
	defer st.qmu.Unlock()
	q := &st.q
	*q = captureInfo{}
	h := cu.CUstream(s.Handle())
	err := cu.StreamGetCaptureInfo(h, &q.status, nil, nil, &q.deps, &q.edges, &q.n)
	if err != nil && errors.Is(err, driver.ErrNotSupported) {
		err = cu.StreamGetCaptureInfo_v11030(h, &q.status, nil, nil, &q.deps, &q.n)
	}
	if err != nil {
		return 0, false
	}
	if q.n > 0 && q.deps != nil {
		use(unsafe.Slice(q.deps, q.n))
	}
	return q.status, true
}

// lastOnly drops from hs the nodes that other nodes of hs depend on (the
// joins at the end add a forked stream's last node even when the capture's
// stream already waited for it); the context is bound.
func lastOnly(hs []cu.CUgraphNode) []cu.CUgraphNode {
	if len(hs) < 2 {
		return hs
	}
	out := make([]cu.CUgraphNode, 0, len(hs))
	for _, a := range hs {
		last := !slices.Contains(out, a)
		for _, b := range hs {
			if last && a != b {
				r, err := reaches(a, b)
				last = err != nil || !r
			}
		}
		if last {
			out = append(out, a)
		}
	}
	return out
}

// Joined implements driver.CaptureSink: s waited for captured work.
func (st *captureState) Joined(s *driver.Stream) {
	ref, err := s.Hold()
	st.mu.Lock()
	if st.done {
		st.mu.Unlock()
		s.ClearCaptureSink(st)
		if err == nil {
			_ = ref.Release()
		}
		return
	}
	st.streams = append(st.streams, heldStream{s, ref}) // a zero ref if s was closed meanwhile
	st.mu.Unlock()
}

// AfterCapture implements driver.CaptureSink.
func (st *captureState) AfterCapture(o lifetime.Owner) {
	st.mu.Lock()
	if st.done {
		st.mu.Unlock()
		lifetime.Defer(o)
		return
	}
	st.after = append(st.after, o)
	st.mu.Unlock()
}

// CallbackPanicked implements driver.CaptureSink (lifetime.PanicSink): a
// captured host function's panic goes where the graph's host nodes report.
func (st *captureState) CallbackPanicked(p any, stack []byte) {
	st.psink.CallbackPanicked(p, stack)
}

func releaseOwners(os []lifetime.Owner) {
	for _, o := range os {
		_ = o.Release()
	}
}

// end is finish for the cleanup of a leaked StreamCapture.
func (st *captureState) end(abort bool) (*Graph, error) {
	g, _, err := st.finish(abort)
	return g, err
}

// finish ends the capture, takes the sink off every stream, and then makes
// the graph (or adds to the target) or, on abort or failure, destroys what
// was captured and releases what it held.
func (st *captureState) finish(abort bool) (*Graph, []cu.CUgraphNode, error) {
	st.mu.Lock()
	if st.ending {
		st.mu.Unlock()
		return nil, nil, fmt.Errorf("graph: StreamCapture.End: %w", ErrNotCapturing)
	}
	st.ending = true
	others := make([]*driver.Stream, 0, len(st.streams))
	for _, hs := range st.streams[1:] {
		others = append(others, hs.s)
	}
	st.mu.Unlock()

	// Join every other stream back, so that CUDA finds them joined, then
	// end the capture.
	var h cu.CUgraph
	var tail []cu.CUgraphNode
	var joinErr error
	for _, o := range others {
		if err := st.link(o, st.origin); err != nil && joinErr == nil {
			joinErr = err
		}
	}
	endErr := st.run(func() error {
		if !abort {
			tail = st.tailOf(st.origin)
		}
		if err := cu.StreamEndCapture(cu.CUstream(st.origin.Handle()), &h); err != nil {
			return err
		}
		tail = lastOnly(tail)
		return nil
	})
	if endErr != nil && joinErr != nil {
		endErr = errors.Join(endErr, joinErr)
	}
	if status, err := IsCapturing(st.origin); err == nil && status != NotCapturing {
		endErr = errors.Join(endErr, fmt.Errorf("graph: the stream is still %v after cuStreamEndCapture", status))
	}

	st.mu.Lock()
	st.done = true
	kept, after, streams := st.kept, st.after, st.streams
	st.kept, st.after, st.streams = nil, nil, nil
	st.mu.Unlock()
	for _, hs := range streams {
		hs.s.ClearCaptureSink(st)
		_ = hs.ref.Release()
	}
	if st.thread != nil {
		st.thread.stop()
	}
	st.evMu.Lock()
	if ev := st.ev; ev != 0 {
		st.ev = 0
		_ = st.ctx.Raw(func(uintptr) error { return cu.EventDestroy(ev) })
	}
	st.evMu.Unlock()
	defer releaseOwners(after) // stream-ordered frees held back by the capture

	var g *Graph
	var err error
	if abort || endErr != nil {
		err = st.discard(h)
		if endErr != nil {
			err = errors.Join(endErr, err)
		}
	} else if st.target != nil {
		g, err = st.target, st.adopt(kept)
		kept = nil
	} else {
		g, err = st.wrap(h, kept)
		kept = nil
	}
	for _, k := range kept { // discarded: the captured work never ran
		_ = k.o.Release()
	}
	if st.target != nil {
		st.target.release()
	}
	_ = st.ctxRef.Release() // unless a new graph took it
	if err != nil {
		return nil, nil, err
	}
	return g, tail, nil
}

// discard destroys what the capture made: the new graph h, or the nodes
// added to the target.
func (st *captureState) discard(h cu.CUgraph) error {
	if st.target == nil {
		if h == 0 {
			return nil
		}
		return st.ctx.Raw(func(uintptr) error { return cu.GraphDestroy(h) })
	}
	g := st.target
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.bind(func() error {
		nodes, err := fetchNodes(func(p *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetNodes(g.h, p, n) })
		if err != nil {
			return err
		}
		var first error
		for _, n := range nodes {
			if !st.before[n] {
				if err := cu.GraphDestroyNode(n); err != nil && first == nil {
					first = err
				}
			}
		}
		return first
	})
}

// wrap makes the captured graph h a Graph that owns kept. On failure the
// graph is destroyed and kept released.
func (st *captureState) wrap(h cu.CUgraph, kept []keptOwner) (*Graph, error) {
	g := newGraph(st.ctx, st.ctxRef, st.psink)
	st.ctxRef = lifetime.Ref{} // the graph's now
	g.h = h
	g.obj.Init(g.destroy)
	if err := addKept(g, kept); err != nil {
		_ = g.Close()
		return nil, err
	}
	return g, nil
}

// adopt records kept in the target's owner table; on failure the captured
// nodes are removed again and kept released.
func (st *captureState) adopt(kept []keptOwner) error {
	g := st.target
	if err := addKept(g, kept); err != nil {
		return errors.Join(err, st.discard(0))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.dead) == 0 {
		return nil
	}
	// Handles of destroyed nodes may be reused by captured ones.
	return g.bind(func() error {
		nodes, err := fetchNodes(func(p *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetNodes(g.h, p, n) })
		for _, n := range nodes {
			delete(g.dead, n)
		}
		return err
	})
}

// addKept moves kept into g's owner table. Every owner is taken, also on
// failure: those not recorded are released.
func addKept(g *Graph, kept []keptOwner) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.bind(func() error {
		t, err := g.ownerTable()
		if err != nil {
			return err
		}
		for i, k := range kept {
			if err := t.Add(uintptr(k.node), k.o); err != nil {
				kept = kept[i:]
				return err
			}
		}
		kept = nil
		return nil
	})
	for _, k := range kept {
		_ = k.o.Release()
	}
	return err
}

// osThread runs functions on one OS thread, for the calls CUDA wants on the
// thread that began a global or thread-local capture.
type osThread struct{ work chan func() }

func newOSThread() *osThread {
	t := &osThread{work: make(chan func())}
	go t.loop()
	return t
}

func (t *osThread) loop() {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	for f := range t.work {
		f()
	}
}

// do runs f on the thread and returns its error; a panic in f becomes an
// error.
func (t *osThread) do(f func() error) (err error) {
	done := make(chan struct{})
	t.work <- func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("graph: capture thread: panic: %v", p)
			}
		}()
		err = f()
	}
	<-done
	return err
}

func (t *osThread) stop() { close(t.work) }
