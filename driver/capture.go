package driver

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// Stream capture, as package driver sees it (package graph does the
// capturing, through internal/capture).
//
// While a stream is captured, package graph installs a sink on it. Every
// call here that queues work on a stream reads the stream's capture
// generation (Stream.capGen) before its CUDA call and, if the call
// succeeded, looks again afterwards: when a sink is installed or the
// generation moved, the work may have been captured, and keepCaptured hands
// a reference on everything it names to the capture, or captures, that may
// hold it. The generation moves when a sink is installed, when its capture
// has begun, when it is about to end and when the sink is removed, so the
// record of those moments (capState) tells which captures saw the call:
//
//   - one capture under way for the whole call (begun before the call read
//     the generation, not yet ending after): the work is in its graph, and
//     the sink takes the owners;
//   - anything else (a capture began or ended during the call, or several
//     did): each sink that was installed at some moment of the call takes
//     a share, and so does a wait for the work queued on the stream, so
//     the owners last until every graph that may run the work is gone and
//     until the work has run where it was not captured.
//
// Install stores the sink before moving the generation, and Remove moves
// the generation before clearing the sink, so a call that sees neither
// cannot have been captured. A launch pays two loads for this.

// A stream remembers the sinks installed on it for as long as a call in
// flight may still need them: the last histMin, and every one removed less
// than histKeep ago (at most histMax). A call that stayed between its CUDA
// call and its look afterwards for longer than that while captures came and
// went keeps what it names for good.
const (
	histMin  = 8
	histKeep = 10 * time.Second
	histMax  = 4096
)

// captureHook is one installation of a sink on a stream; its generations
// (0: not yet) are read and written under the stream's capState.mu.
type captureHook struct {
	sink                        capture.Sink
	install, begin, end, remove uint64
	removed                     time.Time
}

// capState is a stream's capture bookkeeping (nil for the legacy stream,
// which CUDA does not capture). mu also keeps captures from being
// installed while calls that must not be captured queue their work.
type capState struct {
	mu   sync.Mutex
	hist []*captureHook // the installations remembered, oldest first
	lost uint64         // the latest generation at which a forgotten installation was still there
}

// remember records h, pruning installations no call can need any more.
// c.mu is held.
func (c *capState) remember(h *captureHook) {
	drop := 0
	for _, old := range c.hist {
		n := len(c.hist) - drop
		if n < histMin || (n < histMax && (old.remove == 0 || time.Since(old.removed) < histKeep)) {
			break
		}
		c.lost = max(c.lost, old.remove)
		drop++
	}
	if drop > 0 {
		c.hist = append(c.hist[:0], c.hist[drop:]...)
	}
	c.hist = append(c.hist, h)
}

func init() {
	str := func(s any) *Stream { st, _ := s.(*Stream); return st }
	capture.Install = func(s any, sink capture.Sink) error { return str(s).install(sink) }
	capture.Began = func(s any, sink capture.Sink) { str(s).mark(sink, false) }
	capture.Ending = func(s any, sink capture.Sink) { str(s).mark(sink, true) }
	capture.Remove = func(s any, sink capture.Sink) bool { return str(s).remove(sink) }
	capture.Installed = func(s any) capture.Sink { return str(s).installed() }
	capture.Mark = func(s any) uint64 {
		if st := str(s); st != nil {
			return st.capGen.Load()
		}
		return 0
	}
	capture.AfterWork = func(s any, o lifetime.Owner) {
		if st := str(s); st != nil {
			st.afterWork(o)
		} else {
			_ = o.Release()
		}
	}
	capture.Kept = func(s any, gen uint64, owners func() []lifetime.Owner) bool {
		st := str(s)
		if st == nil || st.cap == nil || (st.capture.Load() == nil && st.capGen.Load() == gen) {
			return false
		}
		st.keepCaptured(gen, owners())
		return true
	}
}

// install installs sink on s (capture.Install).
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
	c := s.cap
	c.mu.Lock()
	if s.capture.Load() != nil {
		c.mu.Unlock()
		return fmt.Errorf("driver: %s: %w", op, capture.ErrInstalled)
	}
	h := &captureHook{sink: sink}
	s.capture.Store(h) // before the generation moves (see above)
	h.install = s.capGen.Add(1)
	c.remember(h)
	c.mu.Unlock()
	noteCapturing(s)
	return nil
}

// mark records that sink's capture has begun on s (ending false) or is
// about to end (ending true).
func (s *Stream) mark(sink capture.Sink, ending bool) {
	if s == nil || s.cap == nil {
		return
	}
	s.cap.mu.Lock()
	defer s.cap.mu.Unlock()
	h := s.capture.Load()
	if h == nil || h.sink != sink {
		return
	}
	if !ending && h.begin == 0 {
		h.begin = s.capGen.Add(1)
	}
	if ending && h.end == 0 {
		h.end = s.capGen.Add(1)
	}
}

// remove takes sink off s (capture.Remove).
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
	g := s.capGen.Add(1) // before the sink goes (see above)
	if h.end == 0 {
		h.end = g
	}
	h.remove, h.removed = g, time.Now()
	s.capture.Store(nil)
	s.cap.mu.Unlock()
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

// maybeCaptured reports, after a call that queued work on s succeeded,
// whether the work may have been captured; gen is s.capGen read before the
// call.
func (s *Stream) maybeCaptured(gen uint64) bool {
	return s.capture.Load() != nil || s.capGen.Load() != gen
}

// keepCaptured hands owners, named by work queued on s after gen was read,
// to the captures that may have captured it (see above). It takes owners.
func (s *Stream) keepCaptured(gen0 uint64, owners []lifetime.Owner) {
	if len(owners) == 0 {
		return
	}
	c := s.cap
	if c == nil {
		releaseAll(owners)
		return
	}
	gen1 := s.capGen.Load()
	var buf [4]captureHook
	hs := buf[:0]
	c.mu.Lock()
	lost := c.lost > gen0
	for _, h := range c.hist {
		if h.install > gen1 || (h.remove != 0 && h.remove <= gen0) {
			continue // installed after the call, or gone before it
		}
		hs = append(hs, *h)
	}
	c.mu.Unlock()
	n := len(hs)
	if !lost && n == 1 && hs[0].begin != 0 && hs[0].begin <= gen0 && (hs[0].end == 0 || hs[0].end > gen1) {
		hs[0].sink.Keep(owners) // captured for certain
		return
	}
	if !lost && n == 0 {
		releaseAll(owners) // no capture was there: the work ran, and its call held owners
		return
	}
	parts := capture.Share(owners, n+1)
	for i := range n {
		hs[i].sink.Keep(parts[i : i+1])
	}
	if lost {
		lifetime.KeepForever(parts[n], fmt.Errorf("driver: what a call on a stream named is kept for good: captures that may have seen it were forgotten (the call took over %v, or more than %d captures came and went meanwhile)", histKeep, histMax))
		return
	}
	s.afterWork(parts[n])
}

// keepObjs hands the captures one more reference on each of objs, which
// the caller holds.
func (s *Stream) keepObjs(gen uint64, objs ...*lifetime.Object) {
	owners := make([]lifetime.Owner, 0, len(objs))
	for _, o := range objs {
		if o.Hold() {
			owners = append(owners, lifetime.RefOf(o))
		}
	}
	s.keepCaptured(gen, owners)
}

// keepLaunch hands the captures a reference on a launched kernel's module
// or library and on each buffer among its arguments.
func (s *Stream) keepLaunch(gen uint64, f *Function, allocs []*allocation) {
	owners := make([]lifetime.Owner, 0, 1+len(allocs))
	if f.obj.Hold() {
		owners = append(owners, lifetime.RefOf(&f.obj))
	}
	for _, a := range allocs {
		if a.obj.Hold() {
			owners = append(owners, lifetime.RefOf(&a.obj))
		}
	}
	s.keepCaptured(gen, owners)
}

func releaseAll(owners []lifetime.Owner) {
	for _, o := range owners {
		_ = o.Release()
	}
}

// uncaptured runs f, which queues work on streams that must not be
// captured (a stream-ordered free, an allocation, a host function that
// ends a keep-alive), with no capture able to begin on them meanwhile. If
// one has a sink installed, it runs nothing and returns that sink.
func uncaptured(streams []*Stream, f func() error) (capture.Sink, error) {
	var cs []*capState
	for _, s := range streams {
		if s != nil && s.cap != nil && !slices.Contains(cs, s.cap) {
			cs = append(cs, s.cap)
		}
	}
	slices.SortFunc(cs, func(a, b *capState) int { // one order for every caller
		return cmp.Compare(uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b)))
	})
	for _, c := range cs {
		c.mu.Lock()
	}
	defer func() {
		for _, c := range cs {
			c.mu.Unlock()
		}
	}()
	for _, s := range streams {
		if h := s.capture.Load(); h != nil {
			return h.sink, nil
		}
	}
	return nil, f()
}

// enqueueCapturedHost queues f on s, which has a sink installed (h, read
// with gen under s.cap.mu): the host function may become a node of the
// graph, which runs it at every launch, so it stays registered until the
// captures release it.
func (s *Stream) enqueueCapturedHost(h *captureHook, gen uint64, f func()) error {
	tramp, err := lifetime.HostFn()
	if err != nil {
		return err
	}
	id := lifetime.Register(lifetime.Callback{Fn: f, Sink: h.sink})
	if err := bound(s.ctx, func() error { return cu.LaunchHostFunc(s.h, cu.CUhostFn(tramp), id) }); err != nil {
		lifetime.Unregister(id)
		return s.ctx.sawError(err)
	}
	s.keepCaptured(gen, []lifetime.Owner{lifetime.CallbackOwner(id)})
	return nil
}

// afterWork releases o once the work queued on s so far has run: for work
// that may or may not have been captured. It never synchronises s while it
// is being captured (which would invalidate the capture): a worker records
// an event on s, under s.cap.mu, once no capture is installed, and waits
// for it. The worker runs only while there is something to wait for.
func (s *Stream) afterWork(o lifetime.Owner) {
	obj := s.lifetimeObj()
	if !obj.Hold() { // cannot happen while the caller holds s
		lifetime.KeepForever(o, errors.New("driver: the stream of work that may have been captured was gone"))
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
	o   lifetime.Owner
}

var waits struct {
	mu      sync.Mutex
	items   []waitItem
	running bool
}

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
		var again []waitItem
		for _, it := range items {
			if !it.try() {
				again = append(again, it)
			}
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

// try waits for the work queued on the item's stream and releases its
// owner; it reports false, having done nothing, while the stream is being
// captured.
func (it waitItem) try() bool {
	ev, err := it.s.recordUncaptured()
	if err == errRawCapture || (err == nil && ev == 0) {
		return false
	}
	if err == nil {
		err = cu.EventSynchronize(ev)
		_ = bound(it.s.ctx, func() error { return cu.EventDestroy(ev) })
	}
	if err == nil || isSticky(err) { // a sticky error: nothing runs in the context any more
		_ = it.o.Release()
	} else {
		lifetime.KeepForever(it.o, fmt.Errorf("driver: work that may have been captured could not be waited for: %w", err))
	}
	_ = it.ref.Release()
	return true
}

// recordUncaptured records a new event on s unless s is being captured
// (then it returns a zero event, or errRawCapture for a capture purecuda
// did not begin); no capture can begin on s while it records.
func (s *Stream) recordUncaptured() (ev cu.CUevent, err error) {
	if s.cap != nil { // the legacy stream has none: CUDA does not capture it
		s.cap.mu.Lock()
		defer s.cap.mu.Unlock()
		if s.capture.Load() != nil {
			return 0, nil
		}
	}
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
// an unload holds it shared from its look for a capture (unlessCaptured) until
// its synchronisation is done, and a stream is recorded as captured with
// it held exclusively, before its capture begins. So no capture begins
// between an unload's look and its synchronisation.
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

// unlessCaptured runs f, which synchronises context c (an unload), with
// c's captureGate held shared, so that no capture in c begins meanwhile.
// While a stream of c is being captured it runs nothing, hands retry to the
// capture's AfterCapture instead (the synchronisation would fail and
// invalidate the capture) and reports false.
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
