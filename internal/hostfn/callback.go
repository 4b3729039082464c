package hostfn

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ebitengine/purego"

	"github.com/purecuda/cuda/internal/release"
)

// PanicSink receives what a callback could not finish with: a recovered
// panic, or a runtime.Goexit (reported as a panic value of type *Goexited).
// A *driver.Stream is one: it returns the panic from its next Synchronize.
type PanicSink interface {
	CallbackPanicked(v any, stack []byte)
}

// Goexited is the value a PanicSink receives when a callback called
// runtime.Goexit (t.FailNow does) instead of returning.
type Goexited = release.Goexited

// Registered is the number of callbacks registered now.
func Registered() int { return callbacks.Len() }

// ServedFast and ServedPortable count the HostFn calls served by the
// polling server without entering Go on the C thread, and those that
// entered Go through purego.
func ServedFast() int64     { return fast.served.Load() }
func ServedPortable() int64 { return fast.portable.Load() }

// Callback is a Go function registered for C to call through HostFn.
type Callback struct {
	// Fn is the function to run. It runs on a goroutine of ours (the
	// host-function server, or a worker) while the CUDA thread that called
	// waits; it must not call CUDA.
	Fn func()
	// Once removes the entry before its first run (stream host functions,
	// user-object destructors). Otherwise it stays until Unregister (graph
	// host nodes, which run at every launch).
	Once bool
	// Sink, if set, receives a panic or Goexit of Fn (or of OnCancel).
	// Without it they are only counted (Stats.CallbackPanics). It is called
	// on a goroutine of its own while a CUDA thread may wait for it: it
	// must return promptly and must not call CUDA. A panic in it is
	// recovered and dropped; a runtime.Goexit in it ends only its goroutine.
	Sink PanicSink
	// OnCancel, if set, is run by Cancel instead of Fn: it releases what
	// the callback holds when CUDA will never call it (a host function
	// queued on a context that hit a sticky error). Like Fn it must not
	// call CUDA; panics and Goexit in it are contained the same way.
	OnCancel func()
	// Held, if set, is released once a Once callback's Fn has run (a panic
	// or Goexit in it included) or Cancel has run OnCancel, inside the
	// callback's scope (InCallback holds there, so a last release queues
	// its destroy). It holds what must outlive the queued call, without
	// the allocation a wrapping closure would cost (a stream's host
	// function holds its stream).
	Held release.Owner
}

var callbacks Map[Callback]

// Register stores cb and returns the id to pass to C as userData (I5).
func Register(cb Callback) uintptr { return callbacks.Put(cb) }

// Unregister removes a callback without running it; it reports whether it
// was there (a Once callback that already ran is not). A non-Once callback
// that an Invoke already looked up may still be running, or about to run,
// when Unregister returns: Unregister waits for nothing.
func Unregister(id uintptr) bool { return callbacks.Delete(id) }

// Pending reports whether callback id is registered: for a Once callback,
// that it has neither run (nor started to) nor been cancelled or
// unregistered.
func Pending(id uintptr) bool {
	if id == 0 {
		return false
	}
	_, ok := callbacks.Get(id)
	return ok
}

// Cancel removes callback id without running its Fn, for when CUDA will
// never call it, and runs its OnCancel (contained like Fn, on a goroutine
// of ours, while Cancel waits). It reports whether the callback was still
// registered; a callback that already ran, or started to, is not cancelled,
// so exactly one of Fn and OnCancel runs for a Once callback.
func Cancel(id uintptr) bool {
	if id == 0 {
		return false
	}
	cb, ok := callbacks.Take(id)
	if !ok {
		return false
	}
	if cb.OnCancel != nil || cb.Held != nil {
		fn := cb.OnCancel
		if fn == nil {
			fn = nothing
		}
		run(fn, cb.Held, cb.Sink)
	}
	return true
}

func nothing() {}

// heldOf is what running cb releases: its Held, for a Once callback.
func heldOf(cb *Callback) release.Owner {
	if cb.Once {
		return cb.Held
	}
	return nil
}

// releaseHeld releases o, if any; its error is the Object's to count.
func releaseHeld(o release.Owner) {
	if o != nil {
		_ = o.Release()
	}
}

func takeOnce(cb *Callback) bool { return cb.Once }

// CallbackOwner is the Owner of a registered callback that runs more than
// once (a graph's host node): its Release unregisters the callback. A
// graph's owner table holds one for each host node, and a graph layer can
// tell from it that a graph runs host functions (see Expect).
type CallbackOwner uintptr

// Release unregisters the callback. It never fails.
func (c CallbackOwner) Release() error {
	Unregister(uintptr(c))
	return nil
}

// Invoke runs callback id as the trampoline does: an unknown id runs
// nothing; a panic or Goexit in the callback is contained (I6). A Once
// callback is removed before it runs, so it runs once even when invoked
// concurrently. Invoke returns when the callback has finished. It is
// exported for tests and fake drivers that dispatch without CUDA.
func Invoke(id uintptr) {
	if id == 0 {
		return
	}
	cb, ok := callbacks.load(id, takeOnce)
	if !ok || cb.Fn == nil {
		return
	}
	run(cb.Fn, heldOf(&cb), cb.Sink)
}

// run runs fn on a worker goroutine and waits for it, releases held there
// (see Callback.Held), then reports a panic or Goexit of fn to sink.
func run(fn func(), held release.Owner, sink PanicSink) {
	w := getWorker()
	w.fn, w.held = fn, held
	w.start <- struct{}{}
	<-w.done
	p, stack, exited := w.p, w.stack, w.exited
	w.fn, w.held, w.p, w.stack = nil, nil, nil, nil
	if !exited {
		putWorker(w)
	}
	if p == nil && !exited {
		return
	}
	if exited {
		p = &Goexited{}
	}
	release.Counters.CallbackPanics.Add(1)
	if sink != nil {
		report(sink, p, stack)
	}
}

// report hands a contained panic to sink, on a goroutine of its own, and
// waits for it: a panic in the sink is dropped, and a runtime.Goexit in it
// (a test's t.Fatal) ends only that goroutine, since nothing may escape
// into C and the thread that reports may be CUDA's or the host-function
// server. Panics are rare: the goroutine costs nothing in the steady state.
func report(sink PanicSink, p any, stack []byte) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer callbackGoroutine()()
		defer inCallback()()
		defer func() { _ = recover() }()
		sink.CallbackPanicked(p, stack)
	}()
	<-done
}

// A worker runs callbacks on a goroutine the Go runtime created, so that a
// runtime.Goexit in one ends that goroutine instead of aborting the process
// (Goexit on a thread CUDA created is fatal). A worker whose callback
// called Goexit reports it and is not reused.
type worker struct {
	start  chan struct{}
	done   chan struct{}
	fn     func()
	held   release.Owner // released after fn, in its scope
	p      any
	stack  []byte
	exited bool
	fresh  bool // returned to the pool since the last sweep (under idle's lock)
}

// The idle workers: at most maxIdle wait for the next callback. A sweep
// every workerIdle, scheduled while any wait, ends those that no callback
// took since the sweep before, so that a burst of concurrent callbacks
// leaves no goroutines behind: an idle worker ends after one to two
// periods. The callback's path has no timer of its own: a worker parks on
// one channel.
var idle struct {
	sync.Mutex
	ws       []*worker
	sweeping bool        // a sweep is scheduled
	timer    *time.Timer // runs sweep; made by the first putWorker
}

const maxIdle = 64

// workerIdle is the sweep period (a variable for tests).
var workerIdle = time.Second

// liveWorkers counts the worker goroutines, spawnedWorkers those ever
// started (for tests).
var (
	liveWorkers    atomic.Int32
	spawnedWorkers atomic.Int64
)

func getWorker() *worker {
	idle.Lock()
	if n := len(idle.ws); n > 0 {
		w := idle.ws[n-1]
		idle.ws[n-1] = nil
		idle.ws = idle.ws[:n-1]
		idle.Unlock()
		return w
	}
	idle.Unlock()
	w := &worker{start: make(chan struct{}), done: make(chan struct{})}
	liveWorkers.Add(1)
	spawnedWorkers.Add(1)
	go w.loop()
	return w
}

func putWorker(w *worker) {
	idle.Lock()
	if len(idle.ws) < maxIdle {
		w.fresh = true
		idle.ws = append(idle.ws, w)
		if !idle.sweeping {
			idle.sweeping = true
			if idle.timer == nil {
				idle.timer = time.AfterFunc(workerIdle, sweep)
			} else {
				idle.timer.Reset(workerIdle)
			}
		}
		idle.Unlock()
		return
	}
	idle.Unlock()
	close(w.start) // enough idle workers: let this one end
}

// sweep ends the idle workers that waited since the last sweep, and
// schedules the next while any wait.
func sweep() {
	var ending []*worker
	idle.Lock()
	kept := idle.ws[:0]
	for _, w := range idle.ws {
		if w.fresh {
			w.fresh = false
			kept = append(kept, w)
		} else {
			ending = append(ending, w)
		}
	}
	clear(idle.ws[len(kept):])
	idle.ws = kept
	idle.sweeping = len(kept) > 0
	if idle.sweeping {
		idle.timer.Reset(workerIdle)
	}
	idle.Unlock()
	for _, w := range ending {
		close(w.start) // out of the pool: no callback can take it now
	}
}

func (w *worker) loop() {
	defer liveWorkers.Add(-1)
	defer callbackGoroutine()()
	finished := false
	defer func() {
		if !finished { // the callback called runtime.Goexit
			w.exited = true
			w.stack = debug.Stack() // still shows where Goexit was called
			w.done <- struct{}{}
		}
	}()
	for range w.start {
		w.run()
		w.done <- struct{}{}
	}
	finished = true
}

func (w *worker) run() {
	defer inCallback()()
	defer releaseHeld(w.held)
	defer func() {
		if p := recover(); p != nil {
			w.p, w.stack = p, debug.Stack()
		}
	}()
	w.fn()
}

var hostFn = sync.OnceValues(func() (fn uintptr, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("lifetime: cannot create the host-function callback: %v", p)
		}
	}()
	cold := purego.NewCallback(coldInvoke)
	if !fastSupported {
		return cold, nil
	}
	fastCold = cold // read by the fast trampoline, which is not yet handed out
	return fastTrampoline(), nil
})

// HostFn returns the C function pointer of the one trampoline for CUhostFn
// (void (*)(void *userData)), made once per process (I7). Stream host
// functions and user-object destructors both use it, with the id of a
// registered Callback as userData.
//
// On linux/amd64 the trampoline is written in assembly and hands the
// callback to the host-function server, a goroutine of ours that polls for
// a short window after Expect, without entering Go (see Expect and
// SetPollWindow). It enters Go through purego and hands the callback to a
// worker goroutine instead when the server sleeps, when it does not take
// the callback within a few tens of microseconds (it is running a long
// one), when eight callbacks are posted already, and on other platforms.
// Either way the callback runs on a goroutine the Go runtime created, while
// the calling thread waits.
func HostFn() (uintptr, error) { return hostFn() }
