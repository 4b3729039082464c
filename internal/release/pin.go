package release

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// errLeakedPin is what Errors reports for a Pinned dropped without Release.
var errLeakedPin = errors.New("lifetime: a Pinned became unreachable without Release; its memory stays pinned for good")

// Pinned is Go memory pinned with runtime.Pinner for as long as CUDA may
// use it after the call that passed it returns (I10): an asynchronous
// copy's slice, a registered host slice, a memcpy node's operand. It is an
// Owner: Release unpins, once. Whoever holds a Pinned — a host function, an
// owner table — releases it on every path.
//
// A Pinned dropped without Release is a bug, but it does not end the
// process (as a leaked runtime.Pinner does, from its finalizer): since CUDA
// may still be using the memory, it stays pinned and alive for good, stays
// counted in Stats.Pinned, and the leak is reported through Errors and
// Stats.ReleaseErrors.
type Pinned struct {
	st *pinState
}

// pinState is kept apart from Pinned so that a cleanup on the Pinned can
// still reach the runtime.Pinner.
type pinState struct {
	p    runtime.Pinner
	done atomic.Bool
}

// leakedPins keeps pins whose Pinned was dropped without Release reachable,
// so that their memory is neither freed under CUDA nor reported by the
// runtime's leak check.
var leakedPins struct {
	sync.Mutex
	list []*pinState
}

// Pin pins the Go object p points into. A nil or non-Go pointer pins
// nothing, but the Pinned still releases cleanly.
func Pin(p unsafe.Pointer) *Pinned {
	st := &pinState{}
	if p != nil {
		st.p.Pin(p)
	}
	Counters.Pinned.Add(1)
	x := &Pinned{st: st}
	runtime.AddCleanup(x, keepLeakedPin, st)
	return x
}

func keepLeakedPin(st *pinState) {
	if st.done.Load() {
		return
	}
	leakedPins.Lock()
	leakedPins.list = append(leakedPins.list, st)
	leakedPins.Unlock()
	NoteError(errLeakedPin)
}

// PinSlice pins the backing array of s (nothing for a slice of capacity 0).
func PinSlice[T any](s []T) *Pinned {
	if cap(s) == 0 {
		return Pin(nil)
	}
	return Pin(unsafe.Pointer(unsafe.SliceData(s)))
}

// Release unpins; later calls do nothing. A nil *Pinned releases nothing.
func (x *Pinned) Release() error {
	if x == nil || x.st == nil || x.st.done.Swap(true) {
		return nil
	}
	x.st.p.Unpin()
	Counters.Pinned.Add(-1)
	return nil
}
