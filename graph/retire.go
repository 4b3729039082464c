package graph

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// Retiring what an executable held
//
// What an update gives an executable (the owners of a per-node change, the
// user objects of a whole-graph Update) is kept by the Exec itself, in
// owner sets. When a later change replaces a set, or the executable is
// destroyed, the set is retired: released once every launch enqueued so
// far has finished. A retired batch waits for the work queued on each
// stream the executable was launched on since the last checkpoint (through
// package driver's wait, which never disturbs a capture of the stream) and
// for the batch retired before it, which waited for the streams let go
// earlier: batches are released in order.

// maxTracked is how many streams an Exec tracks before a checkpoint lets
// them go.
const maxTracked = 16

// ownerSet is owners an executable holds for one node (or for the graph an
// Update gave it), released once, when the executable lets it go (Release).
type ownerSet struct {
	n      atomic.Int64
	owners []release.Owner
}

func newOwnerSet(owners []release.Owner) *ownerSet {
	s := &ownerSet{owners: owners}
	s.n.Store(1)
	return s
}

// Release drops one holder; the last releases the owners.
func (s *ownerSet) Release() error {
	switch n := s.n.Add(-1); {
	case n > 0:
		return nil
	case n < 0:
		s.n.Add(1)
		return lifetime.ErrOverRelease
	}
	var errs []error
	for _, o := range s.owners {
		if err := o.Release(); err != nil {
			errs = append(errs, err)
		}
	}
	s.owners = nil
	return errors.Join(errs...)
}

// retireLink orders retired batches: a batch is released only after the
// batch before it.
type retireLink struct {
	mu      sync.Mutex
	done    bool
	waiting []release.Owner // shares of later batches
}

// Release marks the batch done (its last share was released) and lets the
// later batches waiting for it go.
func (l *retireLink) Release() error {
	l.mu.Lock()
	l.done = true
	w := l.waiting
	l.waiting = nil
	l.mu.Unlock()
	var first error
	for _, o := range w {
		if err := o.Release(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// after releases o once the batch is done.
func (l *retireLink) after(o release.Owner) {
	l.mu.Lock()
	if !l.done {
		l.waiting = append(l.waiting, o)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	release.Defer(o)
}

// retire releases owners once every launch of e enqueued so far has
// finished. e.mu is held.
func (e *execCore) retire(os []release.Owner) {
	if len(os) > 0 {
		e.checkpoint(os)
	}
}

// checkpoint retires a batch of owners (none, for a plain checkpoint)
// behind the work queued on every stream tracked so far and behind the
// batch before, then lets those streams go: a later batch waits for this
// one, so for these launches too. It keeps an executable launched on many
// streams from holding them all until it is closed. e.mu is held; nothing
// is released here.
func (e *execCore) checkpoint(os []release.Owner) {
	link := &retireLink{}
	n := len(e.streams)
	parts := capture.Share(append(os, link), n+1)
	for i, t := range e.streams {
		capture.AfterWork(t.s, parts[i])
		_ = t.ref.Release() // a stream's last reference: not ours to destroy here, the wait holds it
	}
	e.streams, e.last = e.streams[:0], nil
	if e.prev != nil {
		e.prev.after(parts[n])
	} else {
		release.Defer(parts[n])
	}
	e.prev = link
}
