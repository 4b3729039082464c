package release

import "time"

// SetStuckAfter sets how long a drainer may be stuck in one release before
// another starts, and returns the previous value. A timer armed with the
// old value stops counting as the watch, so a long one set by a test does
// not keep the next tests from being watched.
func SetStuckAfter(d time.Duration) time.Duration {
	queue.mu.Lock()
	defer queue.mu.Unlock()
	old := stuckAfter
	stuckAfter = d
	queue.watching = false
	return old
}
