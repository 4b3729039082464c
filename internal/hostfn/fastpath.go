package hostfn

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purecuda/cuda/internal/release"
)

// The fast path of HostFn (linux/amd64).
//
// Entering Go from a thread CUDA created costs a few microseconds, and a
// callback may not run there anyway (runtime.Goexit on such a thread aborts
// the process), so the portable trampoline enters Go only to hand the
// callback to a worker goroutine and wait for it: two thread wake-ups on top
// of CUDA's own. Where the fast path exists, HostFn is instead an assembly
// function that never enters Go while a goroutine of ours (the server) is
// polling: it posts its userData into one of a few slots, spins until the
// server has run the callback, and returns. The server polls only for a
// short window after Expect (called where a host function is queued) or
// after it last ran a callback. While it sleeps the trampoline takes the
// portable path; while it runs another callback the trampoline waits a
// little for it to take the slot, and then takes the portable path.
//
// A slot moves FREE → CLAIMED (trampoline, CAS) → POSTED (trampoline) →
// TAKEN (server, CAS) → DONE (server) → FREE (trampoline). A posted slot
// the server did not take in time goes back POSTED → FREE by the
// trampoline's CAS, and the trampoline runs the callback itself through the
// portable path: the CAS decides which of the two runs it. A trampoline
// that waited long for a taken slot sleeps on it (futex): TAKEN → WAITING,
// and the server wakes it when it stores DONE over WAITING.
//
// The server says whether it is awake in fastServer. Before it sleeps it
// stores serverAsleep and then looks at the slots once more; a trampoline
// stores POSTED and then looks at fastServer. Both are sequentially
// consistent, so at least one of them sees the other: the server takes the
// slot, or the trampoline sees it asleep and takes the slot back at once.

const (
	slotFree    = 0
	slotClaimed = 1
	slotPosted  = 2
	slotTaken   = 3
	slotWaiting = 4
	slotDone    = 5

	serverAsleep  = 0
	serverPolling = 1
	serverBusy    = 2

	// numFastSlots is how many callbacks can be posted at once; more take
	// the portable path. The assembly knows this number and the slot size.
	numFastSlots = 8
)

// fastSlot is one posted callback, a cache line apart from the next.
type fastSlot struct {
	state uint32
	_     uint32
	data  uintptr
	_     [48]byte
}

// Read by the assembly trampoline; none holds a Go pointer.
var (
	fastServer uint32
	fastSlots  [numFastSlots]fastSlot
	//lint:ignore U1000 read by the assembly trampoline (fastpath_linux_amd64.s)
	fastCold uintptr // the portable trampoline, for the slow path
)

// DefaultPollWindow is how long the host-function server polls after a host
// function was queued or run: long enough for a kernel or two before the
// host function, short enough to cost little CPU.
const DefaultPollWindow = 100 * time.Microsecond

// MaxPollWindow is the longest window SetPollWindow sets; longer ones are
// cut to it.
const MaxPollWindow = time.Second

var fast struct {
	window   atomic.Int64 // poll window in ns; 0 turns the fast path off
	until    atomic.Int64 // nanoseconds since epoch until which to poll
	wake     chan struct{}
	start    sync.Once
	served   atomic.Int64 // callbacks the server ran
	portable atomic.Int64 // callbacks that took the portable trampoline
	epoch    time.Time
}

func init() {
	fast.window.Store(int64(DefaultPollWindow))
	fast.wake = make(chan struct{}, 1)
	fast.epoch = time.Now()
}

// now is a monotonic clock in nanoseconds.
func now() int64 { return int64(time.Since(fast.epoch)) }

// SetPollWindow sets how long the host-function server polls after a host
// function was queued (Expect) or run, and returns the previous window (a
// negative one counts as 0, one over MaxPollWindow as MaxPollWindow). The
// server keeps a CPU busy while it polls; in exchange a host function
// costs about what it costs in C instead of a few more thread wake-ups.
// A window of 0 turns polling off: host functions queued after the call
// take the portable path (but for one that an Expect racing with the call
// may let the server take within microseconds). Where there is no fast
// path (platforms other than linux/amd64) the window is kept but has no
// effect; with GOMAXPROCS at 1 the server is not woken.
func SetPollWindow(d time.Duration) time.Duration {
	d = min(max(d, 0), MaxPollWindow)
	old := time.Duration(fast.window.Swap(int64(d)))
	// A shorter window applies to the polling in progress too.
	moveUntil(now()+int64(d), func(u, t int64) bool { return u <= t })
	if d == 0 && fastSupported {
		// Trampolines see the server asleep from now on and take the
		// portable path; the server finds out at its next look and sleeps.
		for {
			st := atomic.LoadUint32(&fastServer)
			if st == serverAsleep || atomic.CompareAndSwapUint32(&fastServer, st, serverAsleep) {
				break
			}
		}
	}
	return old
}

// moveUntil sets the poll deadline to t unless keep(current, t) says the
// current one stands (SetPollWindow only moves it earlier, Expect only
// later).
func moveUntil(t int64, keep func(u, t int64) bool) {
	for {
		u := fast.until.Load()
		if keep(u, t) || fast.until.CompareAndSwap(u, t) {
			return
		}
	}
}

// Expect tells the host-function server that a callback of HostFn is about
// to be queued (a stream host function, a graph with host nodes about to be
// launched), so that it polls for the poll window from now. It costs a
// clock read and an atomic store, and wakes the server if it sleeps.
func Expect() {
	if !fastSupported {
		return
	}
	w := fast.window.Load()
	if w == 0 {
		return
	}
	moveUntil(now()+w, func(u, t int64) bool { return u >= t })
	if atomic.LoadUint32(&fastServer) != serverAsleep {
		return
	}
	// Waking the server: not when polling was just turned off, and not with
	// one P, which the goroutine waiting in C for the host function (in
	// cuStreamSynchronize) holds: the server could not run in time.
	if fast.window.Load() == 0 || runtime.GOMAXPROCS(0) == 1 {
		return
	}
	if atomic.CompareAndSwapUint32(&fastServer, serverAsleep, serverPolling) {
		// Awake from now on: a trampoline that posts before the server
		// runs waits a little for it, instead of entering Go.
		fast.start.Do(func() { go serve() })
		select {
		case fast.wake <- struct{}{}:
		default:
		}
	}
}

// serve is the host-function server: it polls the slots while there is
// reason to, and sleeps on fast.wake otherwise. If a callback it runs calls
// runtime.Goexit, this goroutine ends (that is what contains it) and a new
// server takes over.
func serve() {
	defer callbackGoroutine()()
	sv := server{cur: -1}
	defer func() {
		cur, cb := sv.cur, sv.cb
		if cur < 0 {
			return
		}
		// The callback called runtime.Goexit: report it (report contains
		// the sink), let the trampoline go, and hand over to a new server.
		release.Counters.CallbackPanics.Add(1)
		if cb.Sink != nil {
			report(cb.Sink, &Goexited{}, debug.Stack())
		}
		finishSlot(cur)
		go serve()
	}()
	atomic.StoreUint32(&fastServer, serverPolling)
	for {
		// Drop a wake-up token of an Expect that found us awake already.
		select {
		case <-fast.wake:
		default:
		}
		last := now()
		for spins := 1; ; spins++ {
			if i := takeSlot(); i >= 0 {
				// Not over serverAsleep, which SetPollWindow(0) may have
				// stored: the taken callback runs, then the server sleeps.
				atomic.CompareAndSwapUint32(&fastServer, serverPolling, serverBusy)
				sv.run(i)
				if !atomic.CompareAndSwapUint32(&fastServer, serverBusy, serverPolling) {
					break
				}
				last = now()
				continue
			}
			if spins%64 == 0 {
				t := now()
				if t-last > fast.window.Load() && t > fast.until.Load() || atomic.LoadUint32(&fastServer) != serverPolling {
					break
				}
				runtime.Gosched()
			}
		}
		atomic.StoreUint32(&fastServer, serverAsleep)
		if now() <= fast.until.Load() && atomic.CompareAndSwapUint32(&fastServer, serverAsleep, serverPolling) {
			// An Expect came after the check above and may not have seen
			// serverAsleep (it stores until, then reads fastServer).
			continue
		}
		// A trampoline that posted before it could see serverAsleep is
		// served here; one that posts later sees it and takes its slot back.
		for i := takeSlot(); i >= 0; i = takeSlot() {
			sv.run(i)
		}
		<-fast.wake
		atomic.StoreUint32(&fastServer, serverPolling) // Expect did too, mostly
	}
}

// server is what serve's Goexit handler needs to know: the slot whose
// callback runs now (-1 when none) and that callback.
type server struct {
	cur int
	cb  Callback
}

// run runs the callback posted in slot i, which the server took.
func (sv *server) run(i int) {
	sv.cur = i
	runSlot(i, &sv.cb)
	sv.cb, sv.cur = Callback{}, -1
}

// takeSlot claims a posted slot for the server and returns its index, or
// -1 when none is posted.
func takeSlot() int {
	for i := range fastSlots {
		s := &fastSlots[i].state
		if atomic.LoadUint32(s) == slotPosted && atomic.CompareAndSwapUint32(s, slotPosted, slotTaken) {
			return i
		}
	}
	return -1
}

// runSlot runs the callback posted in slot i (the server took it) and marks
// the slot done. cb is where the callback is kept while it runs, for the
// server's Goexit handler.
func runSlot(i int, cb *Callback) {
	fast.served.Add(1)
	raceSync()
	id := fastSlots[i].data
	if c, ok := callbacks.load(id, takeOnce); ok && c.Fn != nil {
		*cb = c
		if p, stack := runHere(c.Fn, heldOf(&c)); p != nil {
			release.Counters.CallbackPanics.Add(1)
			if c.Sink != nil {
				report(c.Sink, p, stack)
			}
		}
	}
	finishSlot(i)
}

// runHere runs fn on the calling goroutine, releases held there (see
// Callback.Held), and returns a recovered panic.
func runHere(fn func(), held release.Owner) (p any, stack []byte) {
	defer inCallback()()
	defer releaseHeld(held)
	defer func() {
		if r := recover(); r != nil {
			p, stack = r, debug.Stack()
		}
	}()
	fn()
	return nil, nil
}

// finishSlot stores DONE in slot i and wakes its trampoline if it sleeps.
func finishSlot(i int) {
	raceSync()
	if atomic.SwapUint32(&fastSlots[i].state, slotDone) == slotWaiting {
		futexWake(&fastSlots[i].state)
	}
}

// coldInvoke is the portable trampoline's Go side.
func coldInvoke(userData uintptr) uintptr {
	fast.portable.Add(1)
	Invoke(userData)
	return 0
}
