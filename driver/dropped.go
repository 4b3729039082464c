package driver

import (
	"runtime"
	"sync"
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

// initDropped gives a handle p its lifetime obj, destroyed by d.destroy
// when the last reference goes, and its cleanup *cl, which does the same
// if p becomes unreachable without Close. The destroy stops the cleanup.
// d must not point to p.
func initDropped[T any](p *T, obj *lifetime.Object, cl *runtime.Cleanup, d dropped) {
	obj.Init(func() error {
		cl.Stop()
		return d.destroy()
	})
	*cl = runtime.AddCleanup(p, deferDrop, d)
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

// rooted keeps reachable, until their destroy begins, the holders that
// have no cleanup because a slice of their memory may outlive them: a
// HostBuffer, and a managed Buffer's allocation once its host slice was
// taken. Each holds a reference on its Context. Without a path from a root
// they could become unreachable while holding it, and the Context's
// cleanup would then destroy the context, and the memory, under the slice.
var rooted struct {
	mu  sync.Mutex
	set map[any]struct{}
}

// keepRooted roots x (a pointer) until letGo(x).
func keepRooted(x any) {
	rooted.mu.Lock()
	if rooted.set == nil {
		rooted.set = make(map[any]struct{})
	}
	rooted.set[x] = struct{}{}
	rooted.mu.Unlock()
}

// letGo ends what keepRooted(x) began; it does nothing for an x not rooted.
func letGo(x any) {
	rooted.mu.Lock()
	delete(rooted.set, x)
	rooted.mu.Unlock()
}
