// Package capture is the seam between package driver and package graph for
// stream capture; it is not part of purecuda's public API.
//
// While package graph captures a stream into a CUDA graph, it installs a
// Sink on every stream of the capture. Each call of package driver that
// queues work on a stream reads the stream's capture generation before its
// CUDA call; if a sink was installed at any moment of the call, it hands
// the sink (or, when it cannot tell which capture saw the work, every sink
// that was installed meanwhile) a reference on everything the work names,
// so that a graph that may run the work keeps it alive. Package driver
// sets the functions below in its init; package graph calls them.
package capture

import (
	"errors"
	"sync/atomic"

	"github.com/purecuda/cuda/lifetime"
)

// Sink is what package graph installs on the streams of a capture.
type Sink interface {
	// Keep takes owners named by work queued on a stream of the capture,
	// which CUDA may have captured. The sink releases each exactly once,
	// when nothing that may run the work is left: with the graph made
	// from the capture (or the graph captured into), or at once when the
	// capture is discarded. Work that may have run on the stream instead
	// is waited for by package driver, which holds a share of the owners
	// itself in that case.
	Keep(owners []lifetime.Owner)
	// Join asks the sink to take in stream s (a *driver.Stream), which
	// is about to wait for an event recorded in the capture: unless the
	// capture is ending, the sink installs itself on s (Install), keeps
	// ref (a reference on s) to remove itself when the capture ends, and
	// reports true. Otherwise it reports false and the caller keeps ref.
	Join(s any, ref lifetime.Ref) bool
	// Unjoin undoes a Join whose wait failed: s never joined.
	Unjoin(s any)
	// AfterCapture takes a release that must wait until the capture is
	// over (a stream-ordered free or an unload, which would otherwise be
	// captured or invalidate the capture); the sink releases it then.
	AfterCapture(o lifetime.Owner)
	// CallbackPanicked receives the panics of host functions captured on
	// the stream, at every later launch of the graph.
	lifetime.PanicSink
}

// ErrInstalled is matched by Install's error when another sink is installed
// on the stream already: it is being captured.
var ErrInstalled = errors.New("capture: another capture sink is installed: the stream is being captured")

// Functions of package driver, set in its init. s is a *driver.Stream.
var (
	// Install installs sink on s. It fails for a nil, closed or legacy
	// stream, or one that has a sink installed already.
	Install func(s any, sink Sink) error
	// Began records that the capture is under way on s: after
	// cuStreamBeginCapture returned, or after the wait that made s join.
	Began func(s any, sink Sink)
	// Ending records that the capture is about to end on s, before
	// cuStreamEndCapture.
	Ending func(s any, sink Sink)
	// Remove takes sink off s if it is installed there, after the
	// capture ended, and reports whether it was. It works on a closed
	// stream.
	Remove func(s any, sink Sink) bool
	// Installed returns the sink installed on s, or nil.
	Installed func(s any) Sink
	// Mark returns s's capture generation, read before a call that queues
	// work on s.
	Mark func(s any) uint64
	// Kept is called after such a call succeeded, with the generation Mark
	// returned: if a sink was installed on s at any moment since, it
	// calls owners and hands what it returns to the capture (or
	// captures) that may have captured the work, and reports true;
	// otherwise it calls nothing and reports false.
	Kept func(s any, gen uint64, owners func() []lifetime.Owner) bool
	// AfterWork releases o once the work queued on s so far has run,
	// never synchronising s while it is being captured. s must be held by
	// the caller for the call. If the work cannot be waited for (an error
	// that does not end the context), o is kept for good
	// (lifetime.KeepForever).
	AfterWork func(s any, o lifetime.Owner)
)

// Share returns n owners that together hold owners: each releases its
// share once, and the last share released releases every owner. It is for
// work that several holders may each be the last to need (the captures that
// may have seen one call, and the call's own wait for its stream).
func Share(owners []lifetime.Owner, n int) []lifetime.Owner {
	s := &shared{owners: owners}
	s.n.Store(int64(n))
	out := make([]lifetime.Owner, n)
	for i := range out {
		out[i] = &share{s: s}
	}
	return out
}

type shared struct {
	n      atomic.Int64
	owners []lifetime.Owner
}

type share struct {
	s    *shared
	done atomic.Bool
}

// Release releases the share, once; the last share releases the owners and
// returns the first of their errors.
func (sh *share) Release() error {
	if sh.done.Swap(true) {
		return lifetime.ErrOverRelease
	}
	if sh.s.n.Add(-1) != 0 {
		return nil
	}
	var first error
	for _, o := range sh.s.owners {
		if err := o.Release(); err != nil && first == nil {
			first = err
		}
	}
	sh.s.owners = nil
	return first
}
