package graph

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/internal/tables"
	"github.com/purecuda/cuda/lifetime"
)

// The end of a capture: the graph made, or the nodes captured into a graph
// recorded (or destroyed, on abort or failure), and what the capture held
// handed to the graph's owner table.

// tailOf copies the nodes s depends on now (cuStreamGetCaptureInfo).
func (st *captureState) tailOf(s *driver.Stream) []cu.CUgraphNode {
	st.qmu.Lock()
	defer st.qmu.Unlock()
	q := &st.q
	*q = captureInfo{}
	h := cu.CUstream(seam.Stream(s))
	err := cu.StreamGetCaptureInfo(h, &q.status, nil, nil, &q.deps, &q.edges, &q.n)
	if err != nil && errors.Is(err, driver.ErrNotSupported) {
		err = cu.StreamGetCaptureInfo_v11030(h, &q.status, nil, nil, &q.deps, &q.n)
	}
	if err != nil || q.n == 0 || q.deps == nil {
		return nil
	}
	return slices.Clone(unsafe.Slice(q.deps, q.n))
}

// testEndHook, when set by a test, runs in finish just after it set
// evDone.
var testEndHook func()

// finish ends the capture, takes the sink off every stream, and then makes
// the graph (or adds to the target) or, on abort or failure, destroys what
// was captured and releases what it held. target is the target's handle
// (nil for a new graph, or when a cleanup ends a leaked capture).
// errGroupHolds is finish's refusal inside an NCCL Group's function whose
// group holds a stream of the capture: the capture goes on (End and Abort
// keep the cleanup that aborts it if it is dropped).
var errGroupHolds = fmt.Errorf("%w", driver.ErrInvalidArgument)

func (st *captureState) finish(abort bool, target *Graph) (*Graph, []Node, error) {
	st.mu.Lock()
	if st.ending {
		st.mu.Unlock()
		return nil, nil, fmt.Errorf("graph: StreamCapture.End: %w", ErrNotCapturing)
	}
	if seam.GroupHolds != nil {
		for _, hs := range st.streams {
			if seam.GroupHolds(hs.s) {
				// Ending would wait for the group's operations captured
				// on the stream, which wait for this goroutine.
				st.mu.Unlock()
				return nil, nil, fmt.Errorf("graph: StreamCapture.End: the calling goroutine runs an NCCL Group's function, and the group holds a stream of the capture until it ends: end the capture after the Group: %w", errGroupHolds)
			}
		}
	}
	st.ending = true
	st.mu.Unlock()

	// No link runs from here (evDone: each link checks it under evMu,
	// which it holds until the stream is linked and begun). The streams
	// linked are the capture's; those not linked yet are left to the call
	// that brought them in, which takes them out again.
	st.evMu.Lock()
	st.evDone = true
	ctxs := st.ctxs // no link adds to them now
	st.ctxs = nil
	st.evMu.Unlock()
	st.multi = len(ctxs) > 0
	if testEndHook != nil {
		testEndHook()
	}
	st.mu.Lock()
	var streams []heldStream
	for _, hs := range st.streams {
		if hs.inCapture() {
			streams = append(streams, hs)
		}
	}
	st.mu.Unlock()

	// Keep the calls on the streams out (waiting for those in progress:
	// libcuda must not see a call racing the end), join every other
	// stream back, so that CUDA finds them joined, then end the capture.
	for _, hs := range streams {
		capture.Ending(hs.s, st)
	}
	var joinErr error
	for _, hs := range streams[1:] {
		if err := st.linkLocked(hs.s, st.origin); err != nil && joinErr == nil { // evDone: no other link
			joinErr = err
		}
	}
	var h cu.CUgraph
	var tail []cu.CUgraphNode
	endErr := st.run(func() error {
		if !abort {
			tail = st.tailOf(st.origin)
		}
		return cu.StreamEndCapture(cu.CUstream(seam.Stream(st.origin)), &h)
	})
	if abort && errors.Is(endErr, driver.ErrStreamCaptureInvalidated) {
		endErr = nil // an invalidated capture is over all the same: what it made is discarded
	}
	if endErr != nil && joinErr != nil {
		endErr = errors.Join(endErr, joinErr)
	}
	if status, err := IsCapturing(st.origin); err == nil && status != NotCapturing {
		endErr = errors.Join(endErr, fmt.Errorf("graph: the stream is still %v after cuStreamEndCapture", status))
	}
	if ev := st.ev; ev != 0 {
		st.ev = 0
		_ = st.ctx.Raw(func(uintptr) error { return cu.EventDestroy(ev) })
	}
	for _, ce := range st.evs { // their contexts are held by what the capture kept
		_ = ce.ctx.Raw(func(uintptr) error { return cu.EventDestroy(ce.ev) })
	}
	st.evs = nil
	for _, hs := range streams {
		capture.Remove(hs.s, st)
	}
	st.mu.Lock()
	st.done = true
	kept, after := st.kept, st.after
	st.kept, st.after = nil, nil
	for _, r := range ctxs {
		kept = append(kept, r)
	}
	var all, left []heldStream
	for _, hs := range st.streams {
		if hs.inCapture() {
			all = append(all, hs)
		} else {
			left = append(left, hs) // their Fork or Join takes them out
		}
	}
	st.streams = left
	st.mu.Unlock()
	for _, hs := range all {
		_ = hs.ref.Release()
	}
	if st.thread != nil {
		st.thread.stop()
	}
	// Frees and unloads held back by the capture run on the release
	// queue: some wait for the context's work, which End must not wait
	// for (a host function queued there may wait for End's caller).
	defer deferOwners(after)

	var g *Graph
	var nodes []Node
	var table *tables.Table
	var err error
	if st.target != nil {
		nodes, table, err = st.endInto(abort || endErr != nil, endErr, kept, tail, target)
		g = target
	} else if abort || endErr != nil {
		if h != 0 {
			_ = st.ctx.Raw(func(uintptr) error { return cu.GraphDestroy(h) })
		}
		releaseOwners(kept) // the captured work never runs
		err = endErr
		_ = st.ctxRef.Release()
	} else {
		g, nodes, table, err = st.wrap(h, kept, tail)
	}
	st.mu.Lock()
	st.final, st.table = true, table
	late := st.late
	st.late = nil
	st.mu.Unlock()
	releaseOwners(keepIn(table, late))
	if err != nil {
		return nil, nil, err
	}
	return g, nodes, nil
}

// endInto finishes a capture into st.target: on a failed end it destroys
// the captured nodes, and keeps what they name where CUDA refuses (graphs
// with memory nodes keep every node); on success it records kept in the
// target's owner table. It returns the tail's nodes and the table late
// owners go to (nil: release them), then lets the family's calls and
// destroys go on and releases the target.
func (st *captureState) endInto(failed bool, endErr error, kept []release.Owner, tail []cu.CUgraphNode, target *Graph) ([]Node, *tables.Table, error) {
	c := st.target
	f := c.fam
	f.mu.Lock() // no refusal: the family's capture is this one
	if st.multi {
		c.markMulti() // conservatively, even when the captured nodes are destroyed again
	}
	var nodes []Node
	var table *tables.Table
	err := c.bind(func() error {
		current, err := fetchNodes(func(p *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetNodes(c.h, p, n) })
		if err != nil {
			return err
		}
		if failed {
			var stay error
			for _, n := range current {
				if st.before[n] {
					continue
				}
				if err := cu.GraphDestroyNode(n); err != nil {
					if stay == nil {
						stay = fmt.Errorf("graph: nodes captured into the graph could not be removed and stay, holding what they name: %w", err)
					}
					continue
				}
				c.forget(n)
			}
			if stay == nil {
				return nil // the captured work never runs: kept is released below
			}
			table, err = c.ownerTable()
			if err != nil {
				return errors.Join(stay, err)
			}
			kept = keepIn(table, kept)
			return stay
		}
		table, err = c.ownerTable()
		if err != nil {
			return err
		}
		kept = keepIn(table, kept)
		if target != nil {
			for _, n := range lastOnly(validTail(tail, current)) {
				nodes = append(nodes, target.nodeOf(n))
			}
		}
		return nil
	})
	if err != nil && table == nil && !failed {
		// The captured nodes stay (the capture ended), but their owners
		// could not be recorded: keep them for good rather than release
		// what the graph names.
		for _, o := range kept {
			release.KeepForever(o, fmt.Errorf("graph: owners of captured nodes kept for good: %w", err))
		}
		kept = nil
	}
	f.capture = nil
	later := f.later
	f.later = nil
	f.mu.Unlock()
	// With the lock let go: a release may destroy an executable of the
	// family, which takes it.
	releaseOwners(kept)
	for _, d := range later {
		_ = d()
	}
	if failed {
		err = errors.Join(endErr, err)
	}
	_ = c.obj.Release() // the capture's hold (begin)
	if c.root != nil {
		_ = c.root.obj.Release()
	}
	return nodes, table, err
}

// validTail keeps the tail nodes that are nodes of the graph (the array
// cuStreamGetCaptureInfo returned may have been replaced meanwhile).
func validTail(tail, nodes []cu.CUgraphNode) []cu.CUgraphNode {
	out := tail[:0]
	for _, n := range tail {
		if slices.Contains(nodes, n) {
			out = append(out, n)
		}
	}
	return out
}

// wrap makes the captured graph h a Graph that owns kept, with a family of
// its own. On failure the graph is destroyed and kept released.
func (st *captureState) wrap(h cu.CUgraph, kept []release.Owner, tail []cu.CUgraphNode) (*Graph, []Node, *tables.Table, error) {
	c := newCore(st.ctx, st.ctxRef, st.psink, &family{})
	st.ctxRef = lifetime.Ref{} // the graph's now
	c.h = h
	c.multi = st.multi // set by the end: no link changes it now
	g := c.open()
	var nodes []Node
	var table *tables.Table
	c.fam.mu.Lock()
	err := c.bind(func() error {
		t, err := c.ownerTable()
		if err != nil {
			return err
		}
		table = t
		kept = keepIn(t, kept)
		current, err := fetchNodes(func(p *cu.CUgraphNode, n *uintptr) error { return cu.GraphGetNodes(c.h, p, n) })
		if err != nil {
			return err
		}
		for _, n := range lastOnly(validTail(tail, current)) {
			nodes = append(nodes, g.nodeOf(n))
		}
		return nil
	})
	c.fam.mu.Unlock()
	releaseOwners(kept)
	if err != nil {
		_ = g.Close()
		return nil, nil, table, err
	}
	return g, nodes, table, nil
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
