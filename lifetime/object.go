package lifetime

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
)

// ErrOverRelease is returned by Release when more references are dropped
// than were taken: a bug in the caller, reported instead of destroying the
// object early.
var ErrOverRelease = errors.New("lifetime: reference released more often than taken")

// Owner is anything that holds part of an object's lifetime and gives it up
// with Release. Release is called exactly once per Owner value handed out.
//
// A failed release is counted (Stats.ReleaseErrors, Errors) where it
// happens: by Object's destroy function and by OwnerFunc. An Owner defined
// elsewhere is counted when its Release goes through one of them (a driver
// type whose Release releases its Object); the release queue and Table
// count only panics on top of that, so no failure is counted twice.
type Owner interface {
	Release() error
}

// Object is the lifetime of one CUDA object.
//
// The owner (the Go value a user holds) has one reference. Every call that
// hands the object to CUDA takes another with Acquire for the duration of
// the call, and every dependent (a buffer made on a context, a graph naming
// a buffer) takes one for as long as it depends on the object. Close marks
// the object closed, so Acquire fails from then on, and drops the owner's
// reference. The destroy function runs exactly once, when the last reference
// is dropped, on the goroutine that drops it (queued instead when that
// goroutine runs a host function, which the destroy could wait for).
//
// An Object is safe for concurrent use: any of its methods may run at once
// from several goroutines, Close included.
//
// The zero Object is not usable: call Init first. An Object must not be
// copied after Init.
type Object struct {
	// refs and closed, all that Acquire and Release read, come first and
	// lie within 16 bytes, so that a type embedding an Object can keep
	// them in the cache line its hot path reads; the whole is 48 bytes.
	refs      atomic.Int64 // owner + calls in flight + dependents; 0 once destroyed
	closed    atomic.Bool
	closeOnce sync.Once
	destroy   func() error
	closeErr  error
}

// Init gives the object its owner's reference and the function that
// destroys the CUDA object when the last reference goes.
func (o *Object) Init(destroy func() error) {
	o.destroy = destroy
	o.refs.Store(1)
	release.Counters.Objects.Add(1)
}

// Acquire takes a reference. It fails once the object is closed or
// destroyed; the count never rises again from zero.
func (o *Object) Acquire() bool {
	if o.closed.Load() {
		return false
	}
	return o.acquireLive()
}

// Retain takes a reference while the object is not yet destroyed, even
// after Close: for a holder that already keeps the object alive through
// another path and needs one more reference (a stream-ordered free on a
// closed stream that its buffer keeps alive). Release drops it.
func (o *Object) Retain() bool { return o.acquireLive() }

func (o *Object) acquireLive() bool {
	for {
		n := o.refs.Load()
		if n <= 0 {
			return false
		}
		if o.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release drops a reference; the last one runs the destroy function and
// returns its error, or, in a host function, queues it.
// Releasing more than was taken returns ErrOverRelease and destroys
// nothing.
func (o *Object) Release() error {
	// Small enough to be inlined: a release that is not the last is one
	// atomic add in the caller's code.
	n := o.refs.Add(-1)
	if n > 0 {
		return nil
	}
	return o.released(n)
}

// released is the rest of Release once the count fell to n <= 0.
func (o *Object) released(n int64) error {
	if n < 0 {
		o.refs.Add(1)
		return ErrOverRelease
	}
	release.Counters.Objects.Add(-1)
	if o.destroy == nil {
		return nil
	}
	if hostfn.InCallback() {
		// Not here: the destroy calls CUDA, and may wait for the device,
		// which waits for this callback (I8).
		release.Defer(OwnerFunc(o.destroy))
		return nil
	}
	err := o.destroy()
	if err != nil {
		release.NoteError(err)
	}
	return err
}

// Close marks the object closed and drops the owner's reference, once.
// It returns the destroy function's error when the object was destroyed at
// once; when calls or dependents still hold it, the last of them destroys
// it and Close returns nil (so does a Close in a callback, whose destroy is
// queued). Later calls return the first call's result (a
// Close concurrent with the first waits for it to finish).
func (o *Object) Close() error {
	o.closeOnce.Do(func() {
		o.closed.Store(true)
		o.closeErr = o.Release()
	})
	return o.closeErr
}

// Closed reports whether Close was called.
func (o *Object) Closed() bool { return o.closed.Load() }

// Destroyed reports whether the last reference is gone.
func (o *Object) Destroyed() bool { return o.refs.Load() <= 0 }

// Refs is the number of references held (for tests and diagnostics).
func (o *Object) Refs() int64 { return o.refs.Load() }

// Hold takes a reference for a dependent that outlives the call (a graph
// node, queued work) and hands it over as a Ref, which the dependent
// releases once; ok is false once the object is closed.
func (o *Object) Hold() (r Ref, ok bool) {
	if !o.Acquire() {
		return Ref{}, false
	}
	return Ref{o}, true
}

// RefOf wraps a reference the caller already holds on o (taken with
// Acquire or Retain) as a Ref, handing it over: the Ref's Release drops it.
func RefOf(o *Object) Ref { return Ref{o} }

// Ref is one reference on an Object, handed to a dependent. It is a single
// pointer, so storing it in an Owner interface allocates nothing. Release it
// exactly once; the zero Ref releases nothing. Its methods may run from any
// goroutine, but copies of one Ref are still one reference: release one of
// them, once.
type Ref struct{ o *Object }

// Release drops the reference (see Object.Release).
func (r Ref) Release() error {
	if r.o == nil {
		return nil
	}
	return r.o.Release()
}

// Clone takes one more reference on the object r refers to, for a second
// dependent (a clone of a graph holding the context the graph holds). It
// works after the object's Close, since r keeps it alive; ok is false for
// the zero Ref.
func (r Ref) Clone() (Ref, bool) {
	if r.o == nil || !r.o.Retain() {
		return Ref{}, false
	}
	return Ref{r.o}, true
}

// Valid reports whether r holds a reference (it is not the zero Ref).
func (r Ref) Valid() bool { return r.o != nil }

// Same reports whether r is a reference on o.
func (r Ref) Same(o *Object) bool { return r.o == o }

// OwnerFunc adapts a function to Owner.
type OwnerFunc func() error

// Release calls f; an error is counted like a failed destroy.
func (f OwnerFunc) Release() error {
	err := f()
	if err != nil {
		release.NoteError(err)
	}
	return err
}
