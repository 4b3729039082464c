package hostfn

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// A callback runs while a CUDA thread waits for it. A destroy run on the
// callback's goroutine — a host function that closes the last reference of
// a buffer or a module, say — would call CUDA there, and a free or unload
// that waits for the device would wait for the callback that waits for it.
// So Object's last release hands destroys found on such a goroutine to the
// release queue (I8).

var (
	callbacksRunning atomic.Int32 // user code running now for a callback, anywhere
	callbackGs       sync.Map     // goroutineKey of the goroutines that run callbacks
)

// InCallback reports whether the calling goroutine runs a callback for
// lifetime now: a host function, a graph host node, or the PanicSink that
// a callback's panic is reported to. CUDA must not be called there. Only
// that goroutine counts: one the callback starts or hands work to does
// not. It costs one atomic load while no callback runs anywhere, and a map
// lookup while one does (on linux/amd64 and linux/arm64; elsewhere a read
// of the goroutine's stack trace, microseconds).
func InCallback() bool {
	if callbacksRunning.Load() == 0 {
		return false
	}
	_, ok := callbackGs.Load(goroutineKey())
	return ok
}

// callbackGoroutine records the calling goroutine as one that runs
// callbacks, until the function it returns is called.
func callbackGoroutine() (done func()) {
	k := goroutineKey()
	callbackGs.Store(k, struct{}{})
	return func() { callbackGs.Delete(k) }
}

// inCallback brackets user code run for a callback: call it before and the
// function it returns after (deferred, so that a panic or Goexit counts
// too).
func inCallback() (done func()) {
	callbacksRunning.Add(1)
	return func() { callbacksRunning.Add(-1) }
}

// goroutineID reads the calling goroutine's id from the first line of its
// stack trace ("goroutine 18 [running]:").
func goroutineID() uint64 {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return 0
	}
	var id uint64
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
