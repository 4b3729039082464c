package lifetime

import (
	"fmt"
	"slices"
	"sync"
)

// The release queue (I8): owners whose release must not run where it is
// noticed — on the runtime's cleanup goroutine, which must not block, or on a
// thread CUDA owns, where calling CUDA is forbidden — are handed to Defer and
// released in order on a goroutine of ours. Defer never blocks: the queue
// grows instead.
var queue struct {
	mu       sync.Mutex
	items    []Owner
	spare    []Owner
	running  bool   // a release goroutine is draining items
	added    uint64 // owners ever queued
	finished uint64 // owners ever released from the queue
	progress *sync.Cond
}

func init() { queue.progress = sync.NewCond(&queue.mu) }

// Defer queues o to be released on the release goroutine. It never blocks
// (beyond a short lock) and may be called from any goroutine, a cleanup or
// a callback. Owners queued by one goroutine are released in the order it
// queued them. A release that fails is counted (Stats.ReleaseErrors) and
// kept for Errors by the Owner itself (Object, Ref, OwnerFunc and Table do
// so); a release that panics or calls runtime.Goexit is contained, counted
// and kept the same way, and the queue goes on.
func Defer(o Owner) {
	if o == nil {
		return
	}
	stats.queued.Add(1)
	queue.mu.Lock()
	queue.items = append(queue.items, o)
	queue.added++
	start := !queue.running
	queue.running = true
	queue.mu.Unlock()
	if start {
		go drainQueue()
	}
}

func drainQueue() {
	var batch []Owner
	i := 0
	normal := false
	defer func() {
		if normal {
			return
		}
		// batch[i]'s release called runtime.Goexit, which ends this
		// goroutine: count it and hand the rest of the batch, ahead of
		// anything queued since, to a new release goroutine.
		stats.queued.Add(-1)
		noteError(fmt.Errorf("lifetime: queued release of %T: %w", batch[i], &Goexited{}))
		rest := slices.Clone(batch[i+1:])
		clear(batch)
		queue.mu.Lock()
		queue.items = append(rest, queue.items...)
		queue.finished += uint64(i + 1)
		queue.progress.Broadcast()
		queue.mu.Unlock()
		go drainQueue()
	}()
	queue.mu.Lock()
	for len(queue.items) > 0 {
		batch = queue.items
		queue.items, queue.spare = queue.spare[:0], nil
		queue.mu.Unlock()
		for i = 0; i < len(batch); i++ {
			_ = releaseOne(batch[i])
			batch[i] = nil
			stats.queued.Add(-1)
		}
		queue.mu.Lock()
		queue.finished += uint64(len(batch))
		queue.spare, batch = batch[:0], nil
		queue.progress.Broadcast()
	}
	queue.running = false
	normal = true
	queue.mu.Unlock()
}

// releaseOne releases o; a panic in o.Release is recovered and returned as
// an error (and counted), so that one bad owner cannot stop the release
// goroutine or the releases after it.
func releaseOne(o Owner) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("lifetime: release of %T panicked: %v", o, p)
			noteError(err)
		}
	}()
	return o.Release()
}

// Flush waits until every release queued before it has run (releases
// queued meanwhile do not delay it). Tests and leak checks use it; nothing
// in purecuda waits on the queue. It must not be called from a queued
// release, which would wait for itself, nor from a callback, whose queued
// destroys may wait for the device that waits for the callback.
func Flush() {
	queue.mu.Lock()
	target := queue.added
	for queue.finished < target {
		queue.progress.Wait()
	}
	queue.mu.Unlock()
}

// OwnerFunc adapts a function to Owner.
type OwnerFunc func() error

// Release calls f; an error is counted like a failed destroy.
func (f OwnerFunc) Release() error {
	err := f()
	if err != nil {
		noteError(err)
	}
	return err
}
