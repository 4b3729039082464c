package graph

import (
	"errors"
	"fmt"
	"sync"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/internal/tables"
	"github.com/purecuda/cuda/lifetime"
)

// captureState is a capture's bookkeeping, and the capture.Sink installed
// on its streams. It never points at a Graph handle (an event recorded in
// the capture keeps it, and a handle reachable from it could outlive its
// use).
//
// What the sink is given (Keep) is what captured work names: package
// driver hands it over only for calls whose work the capture certainly
// holds. Before the end it is kept here; after a successful end it goes to
// the owner table the captured nodes' owners went to (table), which every
// clone and executable made from the graph since holds; after a failed
// end, whose captured work can never run, it is released.
type captureState struct {
	origin *driver.Stream
	mode   CaptureMode
	ctx    *driver.Context
	ctxRef lifetime.Ref // for a new graph
	target *graphCore   // the graph captured into, held; nil for a new graph
	before map[cu.CUgraphNode]bool
	psink  *sink     // where captured host functions report panics
	thread *osThread // begins and ends the capture; nil: the caller's thread

	mu      sync.Mutex
	ending  bool            // End or Abort has begun
	done    bool            // the capture is over and the sink off its streams
	final   bool            // the end is complete: table says where late owners go
	streams []heldStream    // the sink is installed on these; origin first
	kept    []release.Owner // what captured work names
	late    []release.Owner // given after done, before final
	after   []release.Owner // releases waiting for the end (AfterCapture)
	table   *tables.Table   // after a successful end

	// evMu orders the links into the capture (Fork, Join, a stream wait
	// that joins: see capture_link.go) with its end, which sets evDone
	// under it before it ends the capture: no link runs after.
	evMu sync.Mutex
	ev   cu.CUevent // made by the first link, destroyed by the end
	evs  []ctxEvent // the same for links from streams of other contexts
	// ctxs: the contexts of the streams of other contexts linked in
	// (keepContext), taken by the end with evDone.
	ctxs   []lifetime.Ref
	evDone bool
	// multi: a stream of another context joined (set by the end): the
	// graph made has nodes in several contexts.
	multi bool

	qmu sync.Mutex // cuStreamGetCaptureInfo's out-parameters
	q   captureInfo
}

type heldStream struct {
	s   *driver.Stream
	ref lifetime.Ref
	pf  *pending // nil: in the capture from its beginning (the origin)
}

// pending is a stream brought into the capture by a Fork or a stream wait
// (Join): the sink is installed on it, and until the call that brought it
// links it (linked, written under evMu) the end leaves it to that call,
// which takes it out again if it cannot link it. done is closed once
// either happened; other links of the stream wait for it.
type pending struct {
	linked bool
	done   chan struct{}
}

func newPending() *pending { return &pending{done: make(chan struct{})} }

// settled reports whether pf's stream is linked or gone.
func (pf *pending) settled() bool {
	select {
	case <-pf.done:
		return true
	default:
		return false
	}
}

// inCapture reports whether hs is linked into the capture; read with evMu
// held, or after evDone was set.
func (hs heldStream) inCapture() bool { return hs.pf == nil || hs.pf.linked }

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
	sref, err := seam.Hold(s)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = sref.Release()
		}
	}()
	ctx := s.Context()
	st = &captureState{origin: s, mode: mode, ctx: ctx, psink: &sink{}}
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
		st.target = target.graphCore
		st.psink = target.top().sink
	} else {
		ref, err := seam.Hold(ctx)
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
	if err := capture.Install(s, st); err != nil {
		if errors.Is(err, capture.ErrInstalled) {
			return nil, fmt.Errorf("graph: %s: %w", op, ErrCapturing)
		}
		return nil, err
	}
	st.streams = []heldStream{{s: s, ref: sref}}
	if thread {
		st.thread = newOSThread()
	}
	if target != nil {
		err = st.beginInto(op, target, deps)
	} else {
		err = st.run(func() error {
			if err := notCapturing(op, s); err != nil {
				return err
			}
			return cu.StreamBeginCapture(cu.CUstream(seam.Stream(s)), cu.CUstreamCaptureMode(mode))
		})
	}
	if err != nil {
		capture.Remove(s, st)
		st.mu.Lock()
		st.ending, st.done, st.final = true, true, true // what comes from now on is released at once
		kept, late, after := st.kept, st.late, st.after
		st.kept, st.late, st.after, st.streams = nil, nil, nil, nil
		st.mu.Unlock()
		if st.thread != nil {
			st.thread.stop()
		}
		// Nothing was captured: what calls handed over meanwhile is a share
		// of what work that ran on the stream names, whose other share
		// waits for that work (package driver).
		releaseOwners(kept)
		releaseOwners(late)
		// Frees and unloads that found the sink installed and were held
		// back for a capture that never began (on the release queue, as
		// End hands them over).
		deferOwners(after)
		return nil, err
	}
	capture.Began(s, st)
	return st, nil
}

// beginInto begins capturing into target after deps, noting the nodes the
// target had, so that an abort can remove what the capture added. From
// then until the end, calls on the target's family fail with ErrCapturing.
func (st *captureState) beginInto(op string, g *Graph, deps []Node) error {
	if err := g.lock(op); err != nil {
		return err
	}
	defer g.fam.mu.Unlock()
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
	err := st.run(func() error {
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
		return cu.StreamBeginCaptureToGraph(cu.CUstream(seam.Stream(st.origin)), g.h, dp, nil, uintptr(len(hs)), cu.CUstreamCaptureMode(st.mode))
	})
	if err == nil {
		g.fam.capture = st
	}
	return err
}

// notCapturing fails for a stream some other code captures through Raw.
func notCapturing(op string, s *driver.Stream) error {
	var status cu.CUstreamCaptureStatus
	if err := cu.StreamIsCapturing(cu.CUstream(seam.Stream(s)), &status); err != nil {
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

// Keep implements capture.Sink.
func (st *captureState) Keep(owners []release.Owner) {
	for _, o := range owners {
		if _, ok := o.(hostfn.CallbackOwner); ok { // a captured host function
			st.psink.hosts.Store(true)
		}
	}
	st.mu.Lock()
	switch {
	case !st.done:
		st.kept = append(st.kept, owners...)
		st.mu.Unlock()
	case !st.final:
		st.late = append(st.late, owners...)
		st.mu.Unlock()
	default:
		t := st.table
		st.mu.Unlock()
		releaseOwners(keepIn(t, owners))
	}
}

// keepIn records owners in t, against no node (they are released with the
// table), and returns those it could not record, where t is nil or
// released: no graph may run the work they serve any more. The caller
// releases them with no lock held (a release may destroy an executable,
// which takes its family's lock).
func keepIn(t *tables.Table, owners []release.Owner) (refused []release.Owner) {
	for _, o := range owners {
		if t == nil || t.Add(0, o) != nil {
			refused = append(refused, o)
		}
	}
	return refused
}

// AfterCapture implements capture.Sink.
func (st *captureState) AfterCapture(o release.Owner) {
	st.mu.Lock()
	if st.done {
		st.mu.Unlock()
		release.Defer(o)
		return
	}
	st.after = append(st.after, o)
	st.mu.Unlock()
}

// CallbackPanicked implements capture.Sink (hostfn.PanicSink): a
// captured host function's panic goes where the graph's host nodes report.
func (st *captureState) CallbackPanicked(p any, stack []byte) {
	st.psink.CallbackPanicked(p, stack)
}

// deferOwners hands os to the release queue.
func deferOwners(os []release.Owner) {
	for _, o := range os {
		release.Defer(o)
	}
}

func releaseOwners(os []release.Owner) {
	for _, o := range os {
		_ = o.Release()
	}
}
