package lifetime

import (
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
)

// Stats are the lifetime counters. Tests and users read them to prove
// that nothing leaks: after everything is closed and Flush has returned,
// Objects, Live, Queued, Pinned, Tables and Callbacks are back to where they
// started.
type Stats struct {
	Objects        int64 // Objects initialised and not yet destroyed
	Attached       int64 // owners ever added to tables
	Released       int64 // owners ever released from tables
	Live           int64 // Attached − Released
	Queued         int64 // releases waiting in the release queue
	ReleaseErrors  int64 // destroys and releases that failed or panicked, and leaked pins
	CallbackPanics int64 // callbacks that panicked or called Goexit
	Pinned         int64 // Go objects pinned now
	Tables         int64 // owner tables not yet released
	Kept           int64 // owners held for good: leaks that were safer than a release
	Callbacks      int   // callbacks registered now
	HostFnFast     int64 // host function calls served by the polling goroutine (no Go entry on the C thread)
	HostFnPortable int64 // host function calls that entered Go through purego
}

// ReadStats returns the counters. Each is read atomically, but not all at
// one instant: while other goroutines work, compare them only after Flush.
func ReadStats() Stats {
	// Released first: an owner is counted attached before it can be
	// released, so reading in this order never shows Live below 0.
	r := release.Counters.Released.Load()
	a := release.Counters.Attached.Load()
	return Stats{
		Objects:        release.Counters.Objects.Load(),
		Attached:       a,
		Released:       r,
		Live:           a - r,
		Queued:         release.Counters.Queued.Load(),
		ReleaseErrors:  release.Counters.ReleaseErrors.Load(),
		CallbackPanics: release.Counters.CallbackPanics.Load(),
		Pinned:         release.Counters.Pinned.Load(),
		Tables:         release.Counters.Tables.Load(),
		Kept:           release.Counters.Kept.Load(),
		Callbacks:      hostfn.Registered(),
		HostFnFast:     hostfn.ServedFast(),
		HostFnPortable: hostfn.ServedPortable(),
	}
}

// Errors returns the most recent release errors (up to 16), oldest first,
// and forgets them. Releases that nobody waits for (a cleanup, the release
// queue, the last call to drop an object closed meanwhile) report here, and
// so do panics of host functions that no Synchronize can return any more:
// those of a stream whose context was closed before they were returned.
func Errors() []error { return release.Errors() }

// Counted marks err as counted already, by the Object or OwnerFunc whose
// release returned it, so that a destroy function or OwnerFunc passing it
// on (one object's destroy that releases another) does not count or report
// it a second time. The result reads like err, and errors.Is and errors.As
// see through it; Counted(nil) is nil.
func Counted(err error) error { return release.Counted(err) }

// Flush waits until every release queued before it has run (releases
// queued meanwhile do not delay it): tests and leak checks call it before
// reading Stats. It must not be called from a queued release, which would
// wait for itself, nor from a host function, whose queued destroys may wait
// for the device that waits for the host function.
func Flush() { release.Flush() }
