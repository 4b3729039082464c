package driver

import (
	"sync"

	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
)

// Buffer.Close never waits for the device. cuMemFree does: it returns once
// the device has finished the work queued in the context (a kernel still
// reading the memory, and any other), which took 100 ms of a caller's time
// behind a 100 ms kernel. So Close hands its reference on memory that
// cuMemFree frees to the release queue, which drops it on a goroutine of
// ours; if it is the last, the free runs there, and the memory stays valid
// for the work queued before it.
//
// closeFrees follows those hand-offs, so that an allocation that runs out
// of memory can wait for the frees that earlier Closes queued and try once
// more (without it, a loop that allocates and closes could run out of
// memory that is only waiting to be freed).
var closeFrees struct {
	mu   sync.Mutex
	cond *sync.Cond
	next uint64              // the sequence number of the next hand-off
	low  uint64              // every hand-off numbered below low has been released
	done map[uint64]struct{} // hand-offs released out of order, numbered above low
}

func init() {
	closeFrees.cond = sync.NewCond(&closeFrees.mu)
	closeFrees.done = map[uint64]struct{}{}
}

// queuedClose is one Buffer.Close's reference on an allocation, handed to
// the release queue.
type queuedClose struct {
	a   *allocation
	seq uint64
}

// Release drops the reference (the free, if it is the last); a failure is
// counted and kept for lifetime.Errors by the allocation's Object.
func (q queuedClose) Release() error {
	err := q.a.obj.Release()
	closeFrees.mu.Lock()
	if q.seq != closeFrees.low {
		closeFrees.done[q.seq] = struct{}{}
	} else {
		closeFrees.low++
		for {
			if _, ok := closeFrees.done[closeFrees.low]; !ok {
				break
			}
			delete(closeFrees.done, closeFrees.low)
			closeFrees.low++
		}
		closeFrees.cond.Broadcast()
	}
	closeFrees.mu.Unlock()
	return err
}

// dropOwn drops the reference of the Buffer that made a, for its Close.
// Memory allocated in stream order is released at once: its free is
// queued on its stream (cuMemFreeAsync) and does not wait. Other memory is
// released on the release queue (see closeFrees).
//
// Memory imported from another process's pool is released at once too
// (outside host functions): its free waits for the context's work, and
// the importer must know it is done before the exporter frees the memory
// (ImportBuffer).
func (a *allocation) dropOwn() error {
	if a.stream != nil || (a.pool != nil && !hostfn.InCallback()) {
		return a.obj.Release()
	}
	closeFrees.mu.Lock()
	q := queuedClose{a: a, seq: closeFrees.next}
	closeFrees.next++
	closeFrees.mu.Unlock()
	release.Defer(q)
	return nil
}

// waitCloseFrees waits until the hand-offs queued by Close before it have
// been released, and reports whether there were any (whether an allocation
// that ran out of memory should try again). In a callback it waits for
// nothing: a free there could wait for the device that waits for the
// callback.
func waitCloseFrees() bool {
	if hostfn.InCallback() {
		return false
	}
	closeFrees.mu.Lock()
	defer closeFrees.mu.Unlock()
	if closeFrees.low == closeFrees.next {
		return false
	}
	for target := closeFrees.next; closeFrees.low < target; {
		closeFrees.cond.Wait()
	}
	return true
}
