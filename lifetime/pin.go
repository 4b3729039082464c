package lifetime

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Pinned is Go memory pinned with runtime.Pinner for as long as CUDA may
// use it after the call that passed it returns (I10): an asynchronous
// copy's slice, a registered host slice, a memcpy node's operand. It is an
// Owner: Release unpins, once. A Pinned must be released before it becomes
// unreachable (the runtime reports a leaked pin), so whoever holds it —
// a host function, an owner table — releases it on every path.
type Pinned struct {
	p    runtime.Pinner
	done atomic.Bool
}

// Pin pins the Go object p points into. A nil or non-Go pointer pins
// nothing, but the Pinned still releases cleanly.
func Pin(p unsafe.Pointer) *Pinned {
	x := &Pinned{}
	if p != nil {
		x.p.Pin(p)
	}
	stats.pinned.Add(1)
	return x
}

// PinSlice pins the backing array of s (nothing for an empty slice).
func PinSlice[T any](s []T) *Pinned {
	if cap(s) == 0 {
		return Pin(nil)
	}
	return Pin(unsafe.Pointer(unsafe.SliceData(s)))
}

// Release unpins; later calls do nothing.
func (x *Pinned) Release() error {
	if x.done.Swap(true) {
		return nil
	}
	x.p.Unpin()
	stats.pinned.Add(-1)
	return nil
}
