package driver

import (
	"sync"
	"sync/atomic"
)

// loaded counts the users of something that is unloaded once its owner has
// closed it and no call that uses it is still in progress (modules and
// libraries, whose kernels may be launching while Close is called).
type loaded struct {
	what      string       // "module", "library": for error messages
	refs      atomic.Int64 // 1 for the owner + 1 per call in progress
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	unload    func() error
	unloadErr error
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

// release drops a reference; the last one unloads.
func (l *loaded) release() {
	if l.refs.Add(-1) == 0 {
		l.unloadErr = l.unload()
	}
}

// close drops the owner's reference once; it returns the unload's error
// when the unload happened at once.
func (l *loaded) close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		l.release()
		l.closeErr = l.unloadErr
	})
	return l.closeErr
}
