package driver

import (
	"sync/atomic"

	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// A handle that owns a CUDA object (Context, Stream, Event, MemPool,
// Module, Library) and becomes unreachable without Close is destroyed by a
// cleanup. Nothing else can hold it then: whatever holds a reference (a
// call in flight, a child, a graph, queued work) points into the handle
// and so keeps it reachable. So the owner's reference is the only one
// left, and the cleanup does what Close and the last release would have
// done, on the release queue (I8: never on the runtime's cleanup
// goroutine, which must not block).
//
// The cleanup cannot reach the handle (a cleanup whose argument points to
// its handle never runs), so it gets what the destroy needs, copied: a
// dropped. The destroy function Stops the cleanup, so an object that was
// closed is never destroyed twice.

// dropped is what a cleanup destroys: the CUDA object's destroy, made of
// copies of the handle's fields, and the number of lifetime Objects the
// handle counts in lifetime's Stats (its own, and a module's kernels').
type dropped struct {
	destroy func() error
	objects *atomic.Int64 // more Objects than its own: a module's kernels (shared with the handle, pointing to neither)
}

// deferDrop is the cleanup of every handle: it queues d's destroy.
func deferDrop(d dropped) { release.Defer(d) }

// Release destroys the object of an unreachable handle and takes it out of
// lifetime's count of live objects; a failed destroy is counted.
func (d dropped) Release() error {
	n := int64(1)
	if d.objects != nil {
		n += d.objects.Load()
	}
	release.Counters.Objects.Add(-n)
	return lifetime.OwnerFunc(d.destroy).Release()
}
