package driver

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
)

// Registering Go memory with CUDA (cuMemHostRegister) so that copies read
// and write it in stream order, as they do pinned memory: a graph's memcpy
// node on a Go slice, a stream copy of a Go slice captured into a graph,
// and RegisterHost.
//
// CUDA registers whole pages, refuses a range that overlaps one already
// registered (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED), and Go puts many
// objects on one page. So registrations are made here, once per page:
// hostRegs lists the registered page ranges, and a slice's hold counts on
// every range that covers its pages, registering only the pages no range
// covers yet.
//
// A range stays registered while a hold counts on it, and its pages must
// stay the pages the registration locked: Go may give a free page back to
// the operating system and later map a new one at the same address, which
// a stale registration would never see. So each hold keeps its Go object
// pinned (runtime.Pinner) until every range it counted on is unregistered,
// not only until the hold is released: while a range is registered, each
// of its pages holds a live object, and a page with a live object is never
// given back.
//
// A hold is released where its work ended, which may be a host function on
// a CUDA thread: the release only counts down, and the last one queues the
// unregistration on the release queue, where the CUDA call may be made. A
// hold taken meanwhile on the same pages takes the range back instead.

// hostRange is one registered range of whole pages, [start, end).
type hostRange struct {
	start, end uintptr
	obj        unsafe.Pointer // the creator's object; base lies inside it
	base       uintptr        // the address registered (CUDA unregisters by it)
	refs       int            // holds counting on it now
	creator    *hostHold      // whose object stays pinned until the unregistration
	ctx        *Context       // the context it was registered in, held until then
	gone       bool           // unregistered
}

var hostRegs struct {
	// cudaMu orders the registrations and unregistrations (CUDA calls,
	// which may take long); mu guards the list and the counts, and is
	// never held across a CUDA call: a hold's Release, which may run on a
	// CUDA thread, takes only mu. cudaMu is taken before mu.
	cudaMu sync.Mutex
	mu     sync.Mutex
	ranges []*hostRange // sorted by start, not overlapping
	n      atomic.Int64 // len(ranges), for readers that skip the locks when it is 0
	busy   atomic.Int64 // registrations or unregistrations under way (cudaMu held)
}

var pageSize = uintptr(os.Getpagesize())

// hostHold is one slice's claim on the registration of its pages: a
// release.Owner, released once when the work that uses the slice is done.
// Only the object of a hold that registered pages (the range's creator)
// must keep them mapped: every page of a range holds part of its creator's
// object. Other holds let their pin go with their Release.
type hostHold struct {
	ranges []*hostRange
	left   int // ranges it created not yet unregistered; its pin goes with the last
	pin    *release.Pinned
	done   bool
}

// registerHost registers the pages of [p, p+bytes), Go memory, for use by
// work in ctx, and pins the Go object p points into. The caller holds ctx
// (a stream, a graph, RegisterHost), so this works after ctx's Close as
// the caller's other calls do. The hold must be released once no work may
// use the memory any more. It fails, with nothing registered, when CUDA
// refuses the memory, also memory page-locked outside purecuda (a
// HostBuffer's slice: use graph.Host or CopyFromPinnedAsync for that).
func registerHost(op string, ctx *Context, p unsafe.Pointer, bytes uintptr) (*hostHold, error) {
	if ctx == nil || ctx.staging == nil || !ctx.obj.Retain() {
		return nil, notOpen(op, "context")
	}
	defer ctx.release()
	start := uintptr(p) &^ (pageSize - 1)
	end := (uintptr(p) + bytes + pageSize - 1) &^ (pageSize - 1)
	h := &hostHold{pin: release.Pin(p)}
	hostRegs.cudaMu.Lock()
	defer hostRegs.cudaMu.Unlock()
	hostRegs.busy.Add(1)
	defer hostRegs.busy.Add(-1)
	hostRegs.mu.Lock()
	gaps := uncovered(start, end)
	hostRegs.mu.Unlock()
	var made []*hostRange
	if len(gaps) > 0 {
		err := bound(ctx, func() error {
			var err error
			made, err = registerGaps(p, gaps)
			return err
		})
		if err != nil {
			_ = h.pin.Release()
			if errors.Is(err, ErrHostMemoryAlreadyRegistered) {
				return nil, fmt.Errorf("driver: %s: the memory is page-locked already by other means than purecuda's (a HostBuffer's slice, or memory registered with CUDA directly): copy it as a HostBuffer (graph.Host, CopyFromPinnedAsync): %w", op, err)
			}
			return nil, err
		}
	}
	for _, r := range made {
		ctx.obj.Retain() // the range's own reference, until it is unregistered
		r.ctx = ctx
		r.creator = h
	}
	hostRegs.mu.Lock()
	defer hostRegs.mu.Unlock()
	insertRanges(made)
	h.left = len(made)
	for _, r := range overlapping(start, end) {
		r.refs++
		h.ranges = append(h.ranges, r)
	}
	return h, nil
}

// overlapping is the ranges that overlap [start, end), in order: ranges do
// not overlap one another, so those ending after start begin there.
func overlapping(start, end uintptr) []*hostRange {
	rs := hostRegs.ranges
	i := sort.Search(len(rs), func(i int) bool { return rs[i].end > start })
	j := i
	for j < len(rs) && rs[j].start < end {
		j++
	}
	return rs[i:j]
}

// uncovered returns the parts of [start, end) that no range covers.
func uncovered(start, end uintptr) [][2]uintptr {
	var gaps [][2]uintptr
	at := start
	for _, r := range overlapping(start, end) {
		if r.start > at {
			gaps = append(gaps, [2]uintptr{at, r.start})
		}
		at = max(at, r.end)
	}
	if at < end {
		gaps = append(gaps, [2]uintptr{at, end})
	}
	return gaps
}

// registerGaps registers the page ranges gaps of the Go object p points
// into, with a context current, and returns the new ranges; on failure it
// unregisters what it registered. Each range is registered from an address
// inside the object (p itself for the first page, a page start after it
// for the others): CUDA registers whole pages, and an address before p
// could point into a free object, which the garbage collector must never
// see.
func registerGaps(p unsafe.Pointer, gaps [][2]uintptr) ([]*hostRange, error) {
	var made []*hostRange
	for _, g := range gaps {
		base := rangeBase(uintptr(p), g)
		r := &hostRange{start: g[0], end: g[1], obj: p, base: base}
		if err := relaxed(func() error {
			return cu.MemHostRegister(r.basePtr(), g[1]-base, uint32(cu.CU_MEMHOSTREGISTER_PORTABLE))
		}); err != nil {
			for _, r := range made {
				_ = relaxed(func() error { return cu.MemHostUnregister(r.basePtr()) })
			}
			return nil, err
		}
		made = append(made, r)
	}
	return made, nil
}

// rangeBase is where the registration of gap g of the object at p starts:
// p on the object's first page, the gap's first page start after it.
func rangeBase(p uintptr, g [2]uintptr) uintptr { return max(g[0], p) }

// basePtr is the registered address, a pointer into the creator's object.
func (r *hostRange) basePtr() unsafe.Pointer { return unsafe.Add(r.obj, r.base-uintptr(r.obj)) }

// relaxed runs f, a CUDA call that is no stream work but that CUDA counts
// as unsafe during a capture (it may synchronise: registering, page-locked
// allocations and their frees), with this thread's capture mode relaxed
// (cuThreadExchangeStreamCaptureMode): a capture in global mode on another
// thread would otherwise refuse f and be invalidated by it. The caller has
// the OS thread locked.
func relaxed(f func() error) error {
	mode := cu.CU_STREAM_CAPTURE_MODE_RELAXED
	if err := cu.ThreadExchangeStreamCaptureMode(&mode); err != nil {
		return err
	}
	err := f()
	if rerr := cu.ThreadExchangeStreamCaptureMode(&mode); err == nil {
		err = rerr
	}
	return err
}

// relaxedHere is relaxed on the calling goroutine's thread, locked for
// the call.
func relaxedHere(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return relaxed(f)
}

// insertRanges adds new ranges to hostRegs, keeping it sorted.
func insertRanges(made []*hostRange) {
	if len(made) == 0 {
		return
	}
	for _, r := range made {
		i := sort.Search(len(hostRegs.ranges), func(i int) bool { return hostRegs.ranges[i].start > r.start })
		hostRegs.ranges = slices.Insert(hostRegs.ranges, i, r)
	}
	hostRegs.n.Store(int64(len(hostRegs.ranges)))
}

// Release ends the hold (release.Owner): it makes no CUDA call, so it may
// run on a CUDA thread. A range no hold counts on any more is unregistered
// on the release queue. Later calls do nothing.
func (h *hostHold) Release() error {
	hostRegs.mu.Lock()
	defer hostRegs.mu.Unlock()
	if h.done {
		return nil
	}
	h.done = true
	if h.left == 0 { // it registered nothing: its object need not outlive it
		_ = h.pin.Release()
	}
	dropRanges(h.ranges)
	return nil
}

// dropRanges counts down the holds on rs; a range no hold counts on any
// more is unregistered on the release queue. The caller has hostRegs.mu.
func dropRanges(rs []*hostRange) {
	for _, r := range rs {
		r.refs--
		if r.refs == 0 {
			release.Defer(unregisterJob{r})
		}
	}
}

// keepRegistered holds, for a copy that CUDA makes straight from or into
// Go memory at [p, p+bytes) (a synchronous copy), the registered ranges
// that cover part of it, and returns them for keptDone, which the caller
// calls once the copy is done. CUDA copies registered pages by DMA,
// without staging: a range unregistered meanwhile (the graph that
// registered it released) would take the pages away under the copy, a
// fault on the device. A registration or unregistration under way is
// waited for (cudaMu): an unregistration takes its range off the list
// before CUDA's call returns, and a registration lists its ranges after.
// Nothing is registered here, and nothing is held (nil) when no range
// covers the memory.
func keepRegistered(p unsafe.Pointer, bytes uintptr) []*hostRange {
	// n before busy: an unregistration counts itself busy before it takes
	// its range off the list, so a reader that sees the list empty sees it
	// busy, or done.
	if bytes == 0 || (hostRegs.n.Load() == 0 && hostRegs.busy.Load() == 0) {
		return nil
	}
	start := uintptr(p) &^ (pageSize - 1)
	end := (uintptr(p) + bytes + pageSize - 1) &^ (pageSize - 1)
	hostRegs.cudaMu.Lock()
	defer hostRegs.cudaMu.Unlock()
	hostRegs.mu.Lock()
	defer hostRegs.mu.Unlock()
	rs := overlapping(start, end)
	if len(rs) == 0 {
		return nil
	}
	rs = slices.Clone(rs)
	for _, r := range rs {
		r.refs++
	}
	return rs
}

// keptDone ends what keepRegistered began.
func keptDone(rs []*hostRange) {
	if len(rs) == 0 {
		return
	}
	hostRegs.mu.Lock()
	dropRanges(rs)
	hostRegs.mu.Unlock()
}

// unregisterJob unregisters a range no hold counts on, unless one took it
// back meanwhile.
type unregisterJob struct{ r *hostRange }

func (j unregisterJob) Release() error {
	hostRegs.cudaMu.Lock()
	defer hostRegs.cudaMu.Unlock()
	hostRegs.busy.Add(1) // before the range leaves the list: see keepRegistered
	defer hostRegs.busy.Add(-1)
	r := j.r
	hostRegs.mu.Lock()
	if r.refs > 0 || r.gone {
		hostRegs.mu.Unlock()
		return nil
	}
	// No hold can take it back from here on: registerHost waits for cudaMu.
	r.gone = true
	rs := hostRegs.ranges
	if i := sort.Search(len(rs), func(i int) bool { return rs[i].start >= r.start }); i < len(rs) && rs[i] == r {
		hostRegs.ranges = slices.Delete(hostRegs.ranges, i, i+1) // clears the tail: no stale range keeps its context reachable
		hostRegs.n.Store(int64(len(hostRegs.ranges)))
	}
	hostRegs.mu.Unlock()
	err := bound(r.ctx, func() error { return relaxed(func() error { return cu.MemHostUnregister(r.basePtr()) }) })
	hostRegs.mu.Lock()
	if err != nil {
		// CUDA keeps the registration: so does the registry, with its
		// creator pinned, and a later hold takes it back (and a later
		// release tries again).
		r.gone = false
		insertRanges([]*hostRange{r})
		hostRegs.mu.Unlock()
		return err
	}
	h := r.creator
	r.creator = nil
	var unpin *release.Pinned
	if h != nil {
		if h.left--; h.left == 0 && h.done {
			unpin = h.pin
		}
	}
	hostRegs.mu.Unlock()
	_ = unpin.Release()
	r.ctx.release()
	r.ctx = nil
	return nil
}
