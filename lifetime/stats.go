package lifetime

import (
	"sync"
	"sync/atomic"
)

var stats struct {
	objects        atomic.Int64
	attached       atomic.Int64
	released       atomic.Int64
	queued         atomic.Int64
	releaseErrors  atomic.Int64
	callbackPanics atomic.Int64
	pinned         atomic.Int64
	tables         atomic.Int64
	kept           atomic.Int64
}

// Stats are the lifetime counters (I11). Tests and users read them to prove
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
	Kept           int64 // owners held for good (KeepForever): leaks that were safer than a release
	Callbacks      int   // callbacks registered now (the handle map's size)
	HostFnFast     int64 // HostFn calls served by the polling goroutine (no Go entry on the C thread)
	HostFnPortable int64 // HostFn calls that entered Go through purego
}

// ReadStats returns the counters. Each is read atomically, but not all at
// one instant: while other goroutines work, compare them only after Flush.
func ReadStats() Stats {
	// Released first: an owner is counted attached before it can be
	// released, so reading in this order never shows Live below 0.
	r := stats.released.Load()
	a := stats.attached.Load()
	return Stats{
		Objects:        stats.objects.Load(),
		Attached:       a,
		Released:       r,
		Live:           a - r,
		Queued:         stats.queued.Load(),
		ReleaseErrors:  stats.releaseErrors.Load(),
		CallbackPanics: stats.callbackPanics.Load(),
		Pinned:         stats.pinned.Load(),
		Tables:         stats.tables.Load(),
		Kept:           stats.kept.Load(),
		Callbacks:      callbacks.Len(),
		HostFnFast:     fast.served.Load(),
		HostFnPortable: fast.portable.Load(),
	}
}

const keptErrors = 16

var recent struct {
	sync.Mutex
	errs []error
}

func noteError(err error) {
	if _, ok := err.(*countedError); ok {
		return
	}
	stats.releaseErrors.Add(1)
	recent.Lock()
	if len(recent.errs) == keptErrors {
		copy(recent.errs, recent.errs[1:])
		recent.errs = recent.errs[:keptErrors-1]
	}
	recent.errs = append(recent.errs, err)
	recent.Unlock()
}

// Errors returns the most recent release errors (up to 16), oldest first,
// and forgets them. Releases that nobody waits for (a cleanup, the release
// queue, the last call to drop an object closed meanwhile) report here.
func Errors() []error {
	recent.Lock()
	defer recent.Unlock()
	e := recent.errs
	recent.errs = nil
	return e
}

// Counted marks err as counted already, by the Object or OwnerFunc whose
// release returned it, so that a destroy function or OwnerFunc passing it
// on (one object's destroy that releases another) does not count or report
// it a second time. The result reads like err, and errors.Is and errors.As
// see through it; Counted(nil) is nil.
func Counted(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*countedError); ok {
		return err
	}
	return &countedError{err}
}

type countedError struct{ err error }

func (e *countedError) Error() string { return e.err.Error() }
func (e *countedError) Unwrap() error { return e.err }
