package release

import (
	"sync"
	"sync/atomic"
)

// Owner is anything that gives up its hold with Release (lifetime.Owner's
// twin, for purecuda's own packages: any value of one is a value of the
// other).
type Owner interface {
	Release() error
}

// Counters are the lifetime counters that lifetime.ReadStats reports.
var Counters struct {
	Objects        atomic.Int64
	Attached       atomic.Int64
	Released       atomic.Int64
	Queued         atomic.Int64
	ReleaseErrors  atomic.Int64
	CallbackPanics atomic.Int64
	Pinned         atomic.Int64
	Tables         atomic.Int64
	Kept           atomic.Int64
}

// Goexited is the value a panic sink receives when a callback or a queued
// release called runtime.Goexit (t.FailNow does) instead of returning.
type Goexited struct{}

func (*Goexited) Error() string {
	return "lifetime: callback called runtime.Goexit (t.FailNow or t.SkipNow in a host function?)"
}

const keptErrors = 16

var recent struct {
	sync.Mutex
	errs []error
}

// NoteError counts a failed release and keeps it for Errors, unless it
// was counted already (Counted).
func NoteError(err error) {
	if _, ok := err.(*countedError); ok {
		return
	}
	Counters.ReleaseErrors.Add(1)
	NoteLost(err)
}

// NoteLost keeps err, an error that no caller can be given any more (a
// host function's panic after its stream and context were closed), for
// Errors, without counting it as a failed release.
func NoteLost(err error) {
	recent.Lock()
	if len(recent.errs) == keptErrors {
		copy(recent.errs, recent.errs[1:])
		recent.errs = recent.errs[:keptErrors-1]
	}
	recent.errs = append(recent.errs, err)
	recent.Unlock()
}

// Errors returns the most recent release errors (up to 16), oldest first,
// and forgets them.
func Errors() []error {
	recent.Lock()
	defer recent.Unlock()
	e := recent.errs
	recent.errs = nil
	return e
}

// Counted marks err as counted already (see lifetime.Counted).
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
