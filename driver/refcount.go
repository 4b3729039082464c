package driver

import (
	"sync"
	"sync/atomic"
)

// loaded counts the users of something that is unloaded once its owner has
// closed it and no call that uses it is still in progress: modules and
// libraries, whose kernels may be launching while Close is called, and Args.
// The count never rises again from zero (acquire only increments a positive
// count), so the unload runs exactly once.
type loaded struct {
	refs      atomic.Int64 // 1 for the owner + 1 per call in progress
	closed    atomic.Bool
	what      string // "module", "library", "args": for error messages
	closeOnce sync.Once
	closeErr  error
	unload    func() error
}

func (l *loaded) init(what string, unload func() error) {
	l.what, l.unload = what, unload
	l.refs.Store(1)
}

// acquire takes a reference for a call; it fails once the owner closed.
func (l *loaded) acquire(op string) error {
	for {
		n := l.refs.Load()
		if n <= 0 || l.closed.Load() {
			return closedErr(op, l.what)
		}
		if l.refs.CompareAndSwap(n, n+1) {
			return nil
		}
	}
}

// release drops a reference; the last one unloads. An unload deferred to
// the last call has no caller to report to: its failure is counted with
// those of forgotten buffers.
func (l *loaded) release() {
	if err := l.drop(); err != nil {
		orphanErrs.Add(1)
	}
}

// drop drops a reference; the last one unloads and returns its error.
func (l *loaded) drop() error {
	if l.refs.Add(-1) != 0 {
		return nil
	}
	return l.unload()
}

// close drops the owner's reference once; it returns the unload's error
// when the unload happened at once.
func (l *loaded) close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		l.closeErr = l.drop()
	})
	return l.closeErr
}
