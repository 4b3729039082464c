// Package capture is the seam between package driver and package graph for
// stream capture; it is not part of purecuda's public API.
//
// While package graph captures a stream into a CUDA graph, it installs a
// Sink on every stream of the capture. Each call of package driver that
// queues work on a stream is either certainly uncaptured (no capture can
// begin on the stream while it runs) or certainly captured (the capture
// cannot begin or end while it runs), and a captured call hands the sink a
// reference on everything its work names, so that the graph keeps it
// alive. Package driver sets the functions below in its init; package
// graph calls them.
package capture

import (
	"errors"
	"sync/atomic"

	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// Sink is what package graph installs on the streams of a capture.
type Sink interface {
	// Keep takes owners named by work captured on a stream of the
	// capture. The sink releases each exactly once, when nothing that may
	// run the work is left: with the graph made from the capture (or the
	// graph captured into), or at once when the capture is discarded.
	Keep(owners []release.Owner)
	// Join asks the sink to take in stream s (a *driver.Stream), which
	// is about to wait for an event recorded in the capture: unless the
	// capture is ending, the sink installs itself on s (Install), keeps
	// ref (a reference on s) to remove itself when the capture ends, and
	// reports true with a token for Joined; the end of the capture waits
	// until Joined. Otherwise it reports false and the caller keeps ref.
	// After true, the caller waits, moves s to Began if the wait worked,
	// and then calls Joined, whatever happened, doing nothing that may
	// block in between.
	Join(s any, ref lifetime.Ref) (token any, ok bool)
	// Joined ends what Join began: ok says whether the wait worked; if
	// not, s never joined, and the sink takes itself off s and releases
	// ref.
	Joined(token any, ok bool)
	// AfterCapture takes a release that must wait until the capture is
	// over (a stream-ordered free or an unload, which would otherwise be
	// captured or invalidate the capture); the sink releases it then.
	AfterCapture(o release.Owner)
	// CallbackPanicked receives the panics of host functions captured on
	// the stream, at every later launch of the graph.
	hostfn.PanicSink
}

// ErrInstalled is matched by Install's error when another sink is installed
// on the stream already: it is being captured.
var ErrInstalled = errors.New("capture: another capture sink is installed: the stream is being captured")

// Functions of package driver, set in its init. s is a *driver.Stream.
var (
	// Install installs sink on s. It fails for a nil, closed or legacy
	// stream, or one that has a sink installed already (ErrInstalled). It
	// returns once the calls on s that found no sink are done; until
	// Began, calls that find the sink wait.
	Install func(s any, sink Sink) error
	// Began records that the capture is under way on s, after
	// cuStreamBeginCapture returned or after the wait that made s join:
	// calls on s go into it from now on.
	Began func(s any, sink Sink)
	// Ending records that the capture is about to end on s, before
	// cuStreamEndCapture: it waits for the captured calls in progress,
	// and keeps new ones waiting until Remove.
	Ending func(s any, sink Sink)
	// Remove takes sink off s if it is installed there, after the
	// capture ended (or failed to begin), and reports whether it was. The
	// calls waiting go on uncaptured. It works on a closed stream.
	Remove func(s any, sink Sink) bool
	// Installed returns the sink installed on s, or nil.
	Installed func(s any) Sink
	// Enter begins a call that queues work on s outside package driver
	// (an executable's launch): it returns the sink of the capture the
	// work goes into, or nil when no capture can begin until Leave.
	Enter func(s any) Sink
	// Leave ends what Enter began, with the sink Enter returned.
	Leave func(s any, sink Sink)
	// AfterWork releases o once the work queued on s so far has run,
	// never synchronising s while it is being captured. s must be held by
	// the caller for the call. If the work cannot be waited for (an error
	// that does not end the context), o is kept for good
	// (lifetime.KeepForever).
	AfterWork func(s any, o release.Owner)
)

// Share returns n owners that together hold owners: each releases its
// share once, and the last share released releases every owner. It is for
// work that several holders may each be the last to need (the captures that
// may have seen one call, and the call's own wait for its stream).
func Share(owners []release.Owner, n int) []release.Owner {
	s := &shared{owners: owners}
	s.n.Store(int64(n))
	out := make([]release.Owner, n)
	for i := range out {
		out[i] = &share{s: s}
	}
	return out
}

type shared struct {
	n      atomic.Int64
	owners []release.Owner
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
