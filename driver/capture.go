package driver

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Stream capture, as package driver sees it (package graph does the
// capturing, through internal/capture).
//
// While a stream is captured, package graph installs a sink on it. Every
// call here that queues work on a stream brackets its CUDA call with enter
// and leave, which make it exactly one of two kinds:
//
//   - uncaptured: no sink was installed when the call began; it is counted
//     in the stream's inflight count until it is done, and installing a
//     sink waits for that count to fall to zero. So no capture begins on
//     the stream while such a call runs: its work is never captured, and
//     libcuda never sees it racing the capture's begin;
//   - captured: a sink was installed; the call holds the capture's gate
//     shared, which the capture holds exclusively from its installation
//     until it has begun, and again from just before its end. So the call's
//     work is certainly captured, and the sink takes a reference on what it
//     names; libcuda never sees it racing the begin or the end (seen
//     crashing inside cuLaunchKernel on an H100 when a launch on a captured
//     stream raced cuStreamEndCapture).
//
// A launch pays two atomic adds for this.

// captureHook is one installation of a sink on a stream. gate is held
// exclusively while state is installed or ending (see above); state is
// read and written under the stream's capState.mu.
type captureHook struct {
	sink  capture.Sink
	gate  sync.RWMutex
	state int         // hookInstalled, hookBegun, hookEnding
	over  atomic.Bool // removed: the capture is over on this stream
}

const (
	hookInstalled = iota // the capture has not begun on the stream yet: gate held
	hookBegun            // calls are captured: gate free for them
	hookEnding           // the capture is ending: gate held
)

// capState is a stream's capture bookkeeping (nil for the legacy stream,
// which CUDA does not capture).
type capState struct {
	mu sync.Mutex // installs and removes, hook states
}

func init() {
	str := func(s any) *Stream { st, _ := s.(*Stream); return st }
	capture.Install = func(s any, sink capture.Sink) error { return str(s).install(sink) }
	capture.Began = func(s any, sink capture.Sink) { str(s).setState(sink, hookBegun) }
	capture.Ending = func(s any, sink capture.Sink) { str(s).setState(sink, hookEnding) }
	capture.Remove = func(s any, sink capture.Sink) bool { return str(s).remove(sink) }
	capture.Installed = func(s any) capture.Sink { return str(s).installed() }
	capture.Enter = func(s any) capture.Sink {
		if h := str(s).enter(); h != nil {
			return h.sink
		}
		return nil
	}
	capture.Leave = func(s any, sink capture.Sink) {
		st := str(s)
		if sink == nil {
			st.leave(nil)
			return
		}
		if h := st.capture.Load(); h != nil && h.sink == sink {
			st.leave(h)
		}
	}
	capture.AfterWork = func(s any, o release.Owner) {
		if st := str(s); st != nil {
			st.afterWork(o)
		} else {
			_ = o.Release()
		}
	}
}

// install installs sink on s (capture.Install), with its gate held until
// the capture has begun, once the uncaptured calls in progress are done.
func (s *Stream) install(sink capture.Sink) error {
	const op = "capture.Install"
	if sink == nil {
		return invalid(op, "nil sink")
	}
	if err := s.acquire(op); err != nil {
		return err
	}
	defer s.release()
	if s.cap == nil {
		return invalid(op, "the legacy default stream cannot be captured")
	}
	if seam.GroupHolds != nil && seam.GroupHolds(s) {
		return invalid(op, "the calling goroutine runs an NCCL Group's function, and the group holds the stream until it ends: begin the capture before the Group")
	}
	c := s.cap
	h := &captureHook{sink: sink}
	h.gate.Lock()
	c.mu.Lock()
	if s.capture.Load() != nil {
		c.mu.Unlock()
		h.gate.Unlock()
		return fmt.Errorf("driver: %s: %w", op, capture.ErrInstalled)
	}
	s.capture.Store(h)
	c.mu.Unlock()
	for spin := 0; s.inflight.Load() != 0; spin++ {
		if spin < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(10 * time.Microsecond)
		}
	}
	noteCapturing(s)
	return nil
}

// setState moves sink's hook on s to hookBegun (letting the captured calls
// in) or hookEnding (waiting for those in progress, and keeping new ones
// out until the sink is removed). States only move forward: a late Began
// after Ending is ignored (it would leave the gate held for good).
func (s *Stream) setState(sink capture.Sink, to int) {
	if s == nil || s.cap == nil {
		return
	}
	s.cap.mu.Lock()
	h := s.capture.Load()
	if h == nil || h.sink != sink || h.state >= to { // states only move forward
		s.cap.mu.Unlock()
		return
	}
	from := h.state
	h.state = to
	s.cap.mu.Unlock()
	switch {
	case from == hookInstalled && to == hookBegun:
		h.gate.Unlock()
	case from == hookBegun && to == hookEnding:
		h.gate.Lock()
	}
}

// remove takes sink off s (capture.Remove), letting the calls waiting for
// its gate go on uncaptured.
func (s *Stream) remove(sink capture.Sink) bool {
	if s == nil || s.cap == nil || sink == nil {
		return false
	}
	s.cap.mu.Lock()
	h := s.capture.Load()
	if h == nil || h.sink != sink {
		s.cap.mu.Unlock()
		return false
	}
	s.capture.Store(nil)
	h.over.Store(true)
	held := h.state != hookBegun
	s.cap.mu.Unlock()
	if held {
		h.gate.Unlock()
	}
	forgetCapturing(s)
	return true
}

func (s *Stream) installed() capture.Sink {
	if s == nil {
		return nil
	}
	if h := s.capture.Load(); h != nil {
		return h.sink
	}
	return nil
}

// enter begins a call that queues work on s. It returns the hook of the
// capture the work goes into, with its gate held shared; or nil, and then
// no capture can begin on s until leave. Every enter needs its leave.
// The legacy stream, which is never captured, is counted too: enter and
// leave read only the first cache line of s.
func (s *Stream) enter() *captureHook {
	if s == nil {
		return nil
	}
	s.inflight.Add(1)
	h := s.capture.Load()
	if h == nil {
		return nil
	}
	s.inflight.Add(-1)
	return s.enterCaptured(h)
}

// enterCaptured is enter's captured path: it waits for h's gate, and starts
// over if h was removed meanwhile.
func (s *Stream) enterCaptured(h *captureHook) *captureHook {
	for {
		h.gate.RLock()
		if s.capture.Load() == h {
			return h
		}
		h.gate.RUnlock()
		s.inflight.Add(1)
		if h = s.capture.Load(); h == nil {
			return nil
		}
		s.inflight.Add(-1)
	}
}

// leave ends what enter began.
func (s *Stream) leave(h *captureHook) {
	switch {
	case h != nil:
		h.gate.RUnlock()
	case s != nil:
		s.inflight.Add(-1)
	}
}

// keepObjs hands h's sink one more reference on each of objs, which the
// caller holds: the captured work names them.
func (h *captureHook) keepObjs(objs ...*lifetime.Object) {
	owners := make([]release.Owner, 0, len(objs))
	for _, o := range objs {
		if o.Retain() {
			owners = append(owners, lifetime.RefOf(o))
		}
	}
	h.sink.Keep(owners)
}

// keepLaunch hands h's sink a reference on a launched kernel's module or
// library and on each buffer among its arguments.
func (h *captureHook) keepLaunch(f *Function, allocs []*allocation) {
	owners := make([]release.Owner, 0, 1+len(allocs))
	if f.obj.Retain() {
		owners = append(owners, lifetime.RefOf(&f.obj))
	}
	for _, a := range allocs {
		if a.obj.Retain() {
			owners = append(owners, lifetime.RefOf(&a.obj))
		}
	}
	h.sink.Keep(owners)
}

// enterAll enters every stream of streams (each once); if one is being
// captured it leaves them all again and returns that capture's sink.
func enterAll(streams []*Stream) capture.Sink {
	var done []*Stream
	for _, s := range streams {
		if s == nil || slices.Contains(done, s) {
			continue
		}
		if h := s.enter(); h != nil {
			h.gate.RUnlock()
			for _, d := range done {
				d.leave(nil)
			}
			return h.sink
		}
		done = append(done, s)
	}
	return nil
}

// leaveAll leaves what enterAll entered.
func leaveAll(streams []*Stream) {
	var done []*Stream
	for _, s := range streams {
		if s == nil || slices.Contains(done, s) {
			continue
		}
		s.leave(nil)
		done = append(done, s)
	}
}

// enqueueCapturedHost queues f on s, which is being captured (h entered):
// the host function becomes a node of the graph, which runs it at every
// launch, so it stays registered until the capture's sink releases it.
func (s *Stream) enqueueCapturedHost(h *captureHook, f func()) error {
	tramp, err := hostfn.HostFn()
	if err != nil {
		return err
	}
	id := hostfn.Register(hostfn.Callback{Fn: f, Sink: h.sink})
	if err := bound(s.ctx, func() error { return cu.LaunchHostFunc(s.h, cu.CUhostFn(tramp), id) }); err != nil {
		hostfn.Unregister(id)
		return s.ctx.sawError(err)
	}
	h.sink.Keep([]release.Owner{hostfn.CallbackOwner(id)})
	return nil
}

// afterWork releases o once the work queued on s so far has run (an
// executable's retired owners wait so for the streams it ran on). It never
// synchronises s while it is being captured (which would invalidate the
// capture): a worker records an event on s once no capture is installed,
// with none able to begin meanwhile, and waits for it. The worker runs
// only while there is something to wait for.
func (s *Stream) afterWork(o release.Owner) {
	obj := s.lifetimeObj()
	if !obj.Retain() { // cannot happen while the caller holds s
		release.KeepForever(o, errors.New("driver: the stream of work that may have been captured was gone"))
		return
	}
	waits.mu.Lock()
	waits.items = append(waits.items, waitItem{s: s, ref: lifetime.RefOf(obj), o: o})
	start := !waits.running
	waits.running = true
	waits.mu.Unlock()
	if start {
		go waitWorker()
	}
}

type waitItem struct {
	s   *Stream
	ref lifetime.Ref
	o   release.Owner
}

var waits struct {
	mu      sync.Mutex
	items   []waitItem
	running bool
}

// waitRecords counts the events the worker recorded (for tests).
var waitRecords atomic.Int64

var errRawCapture = errors.New("driver: the stream is being captured by code outside purecuda")

func waitWorker() {
	pause := 50 * time.Microsecond
	for {
		waits.mu.Lock()
		items := waits.items
		waits.items = nil
		if len(items) == 0 {
			waits.running = false
			waits.mu.Unlock()
			return
		}
		waits.mu.Unlock()
		// One event per stream covers all its items: each was queued
		// after the work it waits for, and before the event is recorded.
		var again []waitItem
		for i := 0; i < len(items); {
			j := i + 1
			for k := j; k < len(items); k++ {
				if items[k].s == items[i].s {
					items[j], items[k] = items[k], items[j]
					j++
				}
			}
			if !tryAll(items[i:j]) {
				again = append(again, items[i:j]...)
			}
			i = j
		}
		if len(again) == 0 {
			pause = 50 * time.Microsecond
			continue
		}
		// A stream is being captured: look again later, less often the
		// longer it lasts (a capture begun outside purecuda may last).
		waits.mu.Lock()
		waits.items = append(again, waits.items...)
		waits.mu.Unlock()
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// tryAll waits for the work queued on the stream of its, items of one
// stream, and releases their owners; it reports false, having done nothing,
// while the stream is being captured.
func tryAll(its []waitItem) bool {
	it := its[0]
	var ev cu.CUevent
	var err error
	skip, ran := false, false
	// With this thread's capture mode relaxed: a capture in global mode on
	// another thread refuses an event's wait, and is invalidated by it.
	// Where the mode cannot be switched, nothing was waited for: the owner
	// is kept (below), never released under work that may use it.
	rerr := relaxedHere(func() error {
		ran = true
		ev, err = it.s.recordUncaptured()
		waitRecords.Add(1)
		if err == errRawCapture || (err == nil && ev == 0) {
			skip = true
			return nil
		}
		if err == nil {
			err = cu.EventSynchronize(ev)
			_ = bound(it.s.ctx, func() error { return cu.EventDestroy(ev) })
		}
		return nil
	})
	if !ran {
		err = rerr
	}
	if skip {
		return false
	}
	for _, it := range its {
		if err == nil || isSticky(err) { // a sticky error: nothing runs in the context any more
			_ = it.o.Release()
		} else {
			release.KeepForever(it.o, fmt.Errorf("driver: work that may have been captured could not be waited for: %w", err))
		}
		_ = it.ref.Release()
	}
	return true
}

// recordUncaptured records a new event on s unless s is being captured
// (then it returns a zero event, or errRawCapture for a capture purecuda
// did not begin); no capture can begin on s while it records.
func (s *Stream) recordUncaptured() (ev cu.CUevent, err error) {
	if h := s.enter(); h != nil {
		s.leave(h)
		return 0, nil
	}
	defer s.leave(nil)
	err = bound(s.ctx, func() error {
		var st cu.CUstreamCaptureStatus
		if err := cu.StreamIsCapturing(s.h, &st); err != nil {
			return err
		}
		if st != cu.CU_STREAM_CAPTURE_STATUS_NONE {
			return errRawCapture
		}
		if err := cu.EventCreate(&ev, uint32(cu.CU_EVENT_DISABLE_TIMING)); err != nil {
			return err
		}
		if err := cu.EventRecord(ev, s.h); err != nil {
			_ = cu.EventDestroy(ev)
			ev = 0
			return err
		}
		return nil
	})
	return ev, err
}

// captures records, per CUDA context, the streams that have a capture sink
// installed: synchronising the context while one of them is captured (a
// module's or library's unload does) would fail and invalidate the
// capture. Keyed by handle, since two Context values may share one.
var captures struct {
	mu    sync.Mutex
	byCtx map[cu.CUcontext][]*Stream
	gates map[cu.CUcontext]*sync.RWMutex
}

// captureGate is context h's gate between captures and synchronisations:
// a free or an unload holds it shared from its look for a capture
// (unlessCaptured) until its synchronisation and CUDA call are done, and
// its drain while it records on the legacy stream; a stream is recorded as
// captured with it held exclusively, before its capture begins. So no
// capture begins between such a look and what it allowed.
func captureGate(h cu.CUcontext) *sync.RWMutex {
	captures.mu.Lock()
	defer captures.mu.Unlock()
	g := captures.gates[h]
	if g == nil {
		if captures.gates == nil {
			captures.gates = make(map[cu.CUcontext]*sync.RWMutex)
		}
		g = new(sync.RWMutex)
		captures.gates[h] = g
	}
	return g
}

// noteCapturing records s, which has just had a sink installed; it waits
// for a synchronisation of s's context in progress (captureGate).
func noteCapturing(s *Stream) {
	g := captureGate(s.ctx.h)
	g.Lock()
	defer g.Unlock()
	captures.mu.Lock()
	defer captures.mu.Unlock()
	k := s.ctx.h
	if !slices.Contains(captures.byCtx[k], s) {
		if captures.byCtx == nil {
			captures.byCtx = make(map[cu.CUcontext][]*Stream)
		}
		captures.byCtx[k] = append(captures.byCtx[k], s)
	}
}

// forgetCapturing removes s, whose sink was removed, unless it has one
// again.
func forgetCapturing(s *Stream) {
	captures.mu.Lock()
	defer captures.mu.Unlock()
	k := s.ctx.h
	ss := slices.DeleteFunc(captures.byCtx[k], func(x *Stream) bool { return x == s && x.capture.Load() == nil })
	if len(ss) == 0 {
		delete(captures.byCtx, k)
	} else {
		captures.byCtx[k] = ss
	}
}

// unlessCaptured runs f, which synchronises context c (a free or an
// unload), with c's captureGate held shared, so that no capture in c
// begins meanwhile. While a stream of c is being captured it runs nothing,
// hands retry to the capture's AfterCapture instead (the synchronisation
// would fail and invalidate the capture) and reports false.
func unlessCaptured(c *Context, retry func() error, f func() error) (ran bool, err error) {
	g := captureGate(c.h)
	g.RLock()
	if h := capturing(c); h != nil {
		g.RUnlock()
		h.sink.AfterCapture(lifetime.OwnerFunc(retry))
		return false, nil
	}
	err = f()
	g.RUnlock()
	return true, err
}

// capturing returns the hook of a stream of context c that is being
// captured, or nil.
func capturing(c *Context) *captureHook {
	captures.mu.Lock()
	defer captures.mu.Unlock()
	for _, s := range captures.byCtx[c.h] {
		if h := s.capture.Load(); h != nil {
			return h
		}
	}
	return nil
}
