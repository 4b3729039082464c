package graph

import (
	"errors"
	"fmt"
	"slices"
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

	// evMu orders fork and join (each records and waits in a pair) with
	// the end: the end holds it from before it joins the streams until
	// the event is destroyed, and sets evDone, after which no link runs.
	// So no fork or join touches a stream while cuStreamEndCapture runs,
	// or after the end released the streams it held.
	evMu   sync.Mutex
	ev     cu.CUevent
	evDone bool

	qmu sync.Mutex // cuStreamGetCaptureInfo's out-parameters
	q   captureInfo
}

type heldStream struct {
	s   *driver.Stream
	ref lifetime.Ref
	// forking: Fork installed the sink but has not linked the stream
	// into the capture yet; the end leaves it to Fork, which takes it out.
	forking bool
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
		// Stream-ordered frees and unloads that found the sink installed
		// and were held back for a capture that never began.
		releaseOwners(after)
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

// testLinkHook, when set by a test, runs in Fork and Join just before they
// link the streams: a test ends the capture there.
var testLinkHook func()

// link makes later work on waiter wait for the work queued on from, unless
// the end has begun (ErrNotCapturing). The caller holds both streams.
func (st *captureState) link(op string, from, waiter *driver.Stream) error {
	st.evMu.Lock()
	defer st.evMu.Unlock()
	if st.evDone {
		return fmt.Errorf("graph: %s: %w", op, ErrNotCapturing)
	}
	return st.linkLocked(from, waiter)
}

// linkLocked is link with st.evMu held.
func (st *captureState) linkLocked(from, waiter *driver.Stream) error {
	return st.ctx.Raw(func(uintptr) error {
		ev, err := st.event()
		if err != nil {
			return err
		}
		if err := cu.EventRecord(ev, cu.CUstream(seam.Stream(from))); err != nil {
			return err
		}
		return cu.StreamWaitEvent(cu.CUstream(seam.Stream(waiter)), ev, 0)
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
	if capture.Installed(other) != capture.Sink(st) {
		if err := capture.Install(other, st); err != nil {
			st.mu.Unlock()
			_ = ref.Release()
			if errors.Is(err, capture.ErrInstalled) {
				return fmt.Errorf("graph: %s: %w", op, ErrCapturing)
			}
			return err
		}
		installed = true
		st.streams = append(st.streams, heldStream{s: other, ref: ref, forking: true})
	}
	st.mu.Unlock()
	if !installed {
		// Already part of the capture: fork again. The reference is held
		// for the link all the same (a failed wait may take the stream out
		// meanwhile: Unjoin).
		defer ref.Release()
	}
	if testLinkHook != nil {
		testLinkHook()
	}
	// Under evMu the end cannot begin: the stream is linked and begun
	// before the end's Ending can see it, or not at all.
	st.evMu.Lock()
	err = fmt.Errorf("graph: %s: %w", op, ErrNotCapturing)
	if !st.evDone {
		err = st.linkLocked(st.origin, other)
	}
	if err == nil {
		capture.Began(other, st)
		st.mu.Lock()
		for i := range st.streams {
			if st.streams[i].s == other {
				st.streams[i].forking = false
			}
		}
		st.mu.Unlock()
	}
	st.evMu.Unlock()
	if err != nil && installed {
		st.drop(other)
	}
	return err
}

// drop takes s out of the capture's streams after a failed fork.
func (st *captureState) drop(s *driver.Stream) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, hs := range st.streams {
		if hs.s == s {
			capture.Remove(s, st)
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
	ref, err := other.Hold() // a failed wait may take it out meanwhile (Unjoin)
	if err != nil {
		return err
	}
	defer ref.Release()
	if testLinkHook != nil {
		testLinkHook()
	}
	return st.link(op, other, st.origin)
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
		var drop []release.Owner
		if c := st.target; c != nil && t != nil {
			c.fam.mu.Lock()
			owners, drop = redundant(c, owners)
			c.fam.mu.Unlock()
		}
		releaseOwners(drop)
		releaseOwners(keepIn(t, owners))
	}
}

// redundant splits off the references on user objects that c's top-level
// graph holds itself (a capture into a graph of what an executable of that
// graph named): kept in the graph's own table they would keep that table
// alive for good. The family lock is held.
func redundant(c *graphCore, owners []release.Owner) (keep, drop []release.Owner) {
	t := c.top()
	for _, o := range owners {
		if u, ok := o.(uoOwner); ok && slices.Contains(t.uos, cu.CUuserObject(u)) {
			drop = append(drop, o)
			continue
		}
		keep = append(keep, o)
	}
	return keep, drop
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

// Join implements capture.Sink: s is about to wait for an event recorded
// in the capture.
func (st *captureState) Join(s any, ref lifetime.Ref) bool {
	ds, _ := s.(*driver.Stream)
	if ds == nil {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ending || capture.Install(ds, st) != nil {
		return false
	}
	st.streams = append(st.streams, heldStream{s: ds, ref: ref})
	return true
}

// Unjoin implements capture.Sink: s, which Join took in, could not wait
// for the capture's event after all.
func (st *captureState) Unjoin(s any) {
	ds, _ := s.(*driver.Stream)
	st.mu.Lock()
	if st.ending {
		st.mu.Unlock()
		return // the end takes it out
	}
	var ref lifetime.Ref
	for i, hs := range st.streams {
		if i > 0 && hs.s == ds {
			ref = hs.ref
			st.streams = append(st.streams[:i], st.streams[i+1:]...)
			capture.Remove(ds, st)
			break
		}
	}
	st.mu.Unlock()
	_ = ref.Release()
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

func releaseOwners(os []release.Owner) {
	for _, o := range os {
		_ = o.Release()
	}
}
