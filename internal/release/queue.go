package release

import (
	"fmt"
	"sync"
	"time"
)

// The release queue (I8): owners whose release must not run where it is
// noticed — on the runtime's cleanup goroutine, which must not block, or on a
// thread CUDA owns, where calling CUDA is forbidden — are handed to Defer and
// released in order on goroutines of ours. Defer never blocks: the queue
// grows instead. One drainer releases them one after another; when it has
// been inside one release for longer than stuckAfter (a cuMemFree waits
// for the device's queued work), another drainer takes the next ones, up
// to maxDrainers, so a slow release delays no other. Releases start in
// the order they were queued; each object's references keep a dependent's
// release from destroying what another still uses.
var queue struct {
	mu       sync.Mutex
	items    []Owner
	head     int       // items[:head] are taken
	drainers int       // goroutines draining items
	busy     int       // drainers inside a release
	moved    time.Time // when a release last finished, or a drainer started
	watching bool      // a timer will look again for stuck drainers
	added    uint64    // owners ever queued
	finished uint64    // owners ever released from the queue
	progress *sync.Cond
}

const maxDrainers = 8

// stuckAfter is how long a drainer may be inside one release before another
// takes the next items. A variable, guarded by queue.mu, only so that tests
// can make one drainer keep every item.
var stuckAfter = 5 * time.Millisecond

func init() { queue.progress = sync.NewCond(&queue.mu) }

// Defer queues o to be released on a release goroutine. It never blocks
// (beyond a short lock) and may be called from any goroutine, a cleanup or
// a callback. Owners queued by one goroutine start their release in the
// order it queued them. A release that fails is counted
// (Stats.ReleaseErrors) and kept for Errors by the Owner itself (Object,
// Ref, OwnerFunc and Table do so); a release that panics or calls
// runtime.Goexit is contained, counted and kept the same way, and the
// queue goes on.
func Defer(o Owner) {
	if o == nil {
		return
	}
	Counters.Queued.Add(1)
	queue.mu.Lock()
	queue.items = append(queue.items, o)
	queue.added++
	start := needDrainer()
	if !start {
		watchStuck()
	}
	queue.mu.Unlock()
	if start {
		go drainQueue()
	}
}

// watchStuck arms a timer that looks again, after stuckAfter, whether
// items wait while every drainer is inside a release. queue.mu is held.
func watchStuck() {
	if queue.watching || queue.head == len(queue.items) || queue.drainers == 0 ||
		queue.busy < queue.drainers || queue.drainers >= maxDrainers {
		return
	}
	queue.watching = true
	time.AfterFunc(stuckAfter, func() {
		queue.mu.Lock()
		queue.watching = false
		start := needDrainer()
		if !start {
			watchStuck()
		}
		queue.mu.Unlock()
		if start {
			go drainQueue()
		}
	})
}

// needDrainer reports whether a drainer should start for the items
// waiting — none runs, or every one is stuck in a release — and counts it
// started. queue.mu is held.
func needDrainer() bool {
	if queue.head == len(queue.items) {
		return false
	}
	if queue.drainers > 0 && (queue.drainers >= maxDrainers || queue.busy < queue.drainers || time.Since(queue.moved) < stuckAfter) {
		return false
	}
	queue.drainers++
	queue.moved = time.Now()
	return true
}

// take pops the next item, or reports false (and counts the drainer gone)
// when none is left. queue.mu is held.
func take() (Owner, bool) {
	if queue.head == len(queue.items) {
		queue.drainers--
		clear(queue.items)
		queue.items, queue.head = queue.items[:0], 0
		return nil, false
	}
	o := queue.items[queue.head]
	queue.items[queue.head] = nil
	queue.head++
	queue.busy++
	return o, true
}

func drainQueue() {
	var o Owner
	done := true
	defer func() {
		if done {
			return
		}
		// o's release called runtime.Goexit, which ends this goroutine:
		// count it, and let another drainer go on.
		Counters.Queued.Add(-1)
		NoteError(fmt.Errorf("lifetime: queued release of %T: %w", o, &Goexited{}))
		queue.mu.Lock()
		queue.busy--
		queue.drainers--
		queue.finished++
		queue.moved = time.Now()
		queue.progress.Broadcast()
		start := needDrainer()
		queue.mu.Unlock()
		if start {
			go drainQueue()
		}
	}()
	queue.mu.Lock()
	for {
		var ok bool
		if o, ok = take(); !ok {
			queue.mu.Unlock()
			return
		}
		queue.mu.Unlock()
		done = false
		_ = ReleaseOne(o)
		done = true
		Counters.Queued.Add(-1)
		queue.mu.Lock()
		queue.busy--
		queue.finished++
		queue.moved = time.Now()
		queue.progress.Broadcast()
	}
}

// releaseOne releases o; a panic in o.Release is recovered and returned as
// an error (and counted), so that one bad owner cannot stop the release
// goroutine or the releases after it.
// ReleaseOne releases o; a panic in o.Release is recovered and returned as
// an error (and counted).
func ReleaseOne(o Owner) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("lifetime: release of %T panicked: %v", o, p)
			NoteError(err)
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
		if needDrainer() { // every drainer is stuck in a release
			go drainQueue()
		}
		waitProgress()
	}
	queue.mu.Unlock()
}

// waitProgress waits for a release to finish, or for stuckAfter, so that a
// waiter notices drainers stuck in slow releases. queue.mu is held.
func waitProgress() {
	t := time.AfterFunc(stuckAfter, func() {
		queue.mu.Lock()
		queue.progress.Broadcast()
		queue.mu.Unlock()
	})
	queue.progress.Wait()
	t.Stop()
}
