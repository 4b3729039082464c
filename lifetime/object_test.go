package lifetime_test

import (
	"errors"
	"github.com/purecuda/cuda/internal/lifetest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// probe is an Object whose destroy function records how often it ran and
// checks that nobody held a reference of ours when it did.
type probe struct {
	obj       lifetime.Object
	destroyed atomic.Int32
	holding   atomic.Int32 // references taken by the test and not yet dropped
	early     atomic.Int32 // destroys seen while holding > 0
	err       error
}

func newProbe(err error) *probe {
	p := &probe{err: err}
	p.obj.Init(func() error {
		if p.holding.Load() != 0 {
			p.early.Add(1)
		}
		p.destroyed.Add(1)
		return p.err
	})
	return p
}

// use is a call in flight: Acquire, "call CUDA", Release.
func (p *probe) use() bool {
	if !p.obj.Acquire() {
		return false
	}
	p.holding.Add(1)
	if p.destroyed.Load() != 0 { // a reference on a destroyed object: I1 broken
		p.early.Add(1)
	}
	runtime.Gosched()
	p.holding.Add(-1)
	_ = p.obj.Release()
	return true
}

// Invariant I1: once the count reached zero, neither Acquire nor Retain can
// take a reference again, however many goroutines race Acquire/Release/Retain
// against Close.
func TestObjectNeverRisesFromZero_I1(t *testing.T) {
	lifetest.DrainErrors()
	before := lifetest.Settle()
	iters := 2000
	if testing.Short() {
		iters = 200
	}
	const workers = 8
	for range iters {
		p := newProbe(nil)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for k := 0; k < 4; k++ {
					if w%2 == 0 {
						p.use()
						continue
					}
					if p.obj.Retain() { // a dependent that also tolerates Close
						p.holding.Add(1)
						p.holding.Add(-1)
						_ = p.obj.Release()
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_ = p.obj.Close()
		}()
		close(start)
		wg.Wait()

		require.EqualValues(t, 1, p.destroyed.Load(), "destroy runs exactly once")
		require.Zero(t, p.early.Load(), "no reference was live when destroy ran")
		require.True(t, p.obj.Destroyed())
		require.Zero(t, p.obj.Refs())
		require.False(t, p.obj.Acquire(), "Acquire after destroy")
		require.False(t, p.obj.Retain(), "Retain after destroy")
		_, ok := p.obj.Hold()
		require.False(t, ok)
	}
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariant I2: destroy runs exactly once, on whichever release is last —
// here a dependent that took its reference with Retain after Close.
func TestObjectDestroyOnLastRelease_I2(t *testing.T) {
	p := newProbe(nil)
	r1, ok := p.obj.Hold()
	require.True(t, ok)
	require.True(t, r1.Valid())
	require.True(t, r1.Same(&p.obj))
	require.EqualValues(t, 2, p.obj.Refs())

	require.NoError(t, p.obj.Close())
	assert.True(t, p.obj.Closed())
	assert.False(t, p.obj.Destroyed(), "a dependent still holds it")
	assert.Zero(t, p.destroyed.Load())

	require.True(t, p.obj.Retain(), "Retain after Close but before destroy succeeds")
	require.NoError(t, r1.Release())
	assert.Zero(t, p.destroyed.Load())
	require.NoError(t, p.obj.Release()) // the Retain's reference: the last
	assert.EqualValues(t, 1, p.destroyed.Load())
	assert.False(t, p.obj.Retain(), "Retain after destroy fails")
}

// Invariant I2: releasing more than was taken is ErrOverRelease, destroys
// nothing more, and leaves the count at zero (never negative).
func TestObjectOverRelease_I2(t *testing.T) {
	lifetest.DrainErrors()
	before := lifetime.ReadStats()
	p := newProbe(nil)
	require.NoError(t, p.obj.Release()) // the owner's reference: destroys
	require.EqualValues(t, 1, p.destroyed.Load())

	var wg sync.WaitGroup
	var over atomic.Int32
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errors.Is(p.obj.Release(), lifetime.ErrOverRelease) {
				over.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 16, over.Load())
	assert.EqualValues(t, 1, p.destroyed.Load(), "over-release destroys nothing")
	assert.Zero(t, p.obj.Refs())
	assert.False(t, p.obj.Retain())
	assert.ErrorIs(t, p.obj.Close(), lifetime.ErrOverRelease, "Close of an object already released")
	after := lifetime.ReadStats()
	assert.Equal(t, before.Objects, after.Objects)
	assert.Equal(t, before.ReleaseErrors, after.ReleaseErrors, "an over-release is the caller's error, not a failed destroy")

	// An over-release on a Ref that outlived its object is the same.
	q := newProbe(nil)
	r, ok := q.obj.Hold()
	require.True(t, ok)
	require.NoError(t, q.obj.Close())
	require.NoError(t, r.Release())
	assert.ErrorIs(t, r.Release(), lifetime.ErrOverRelease)
	assert.EqualValues(t, 1, q.destroyed.Load())
}

// Invariant I3: Close waits for nothing and frees nothing early: with a
// call in flight it returns at once, the object stays alive for the call,
// and the call's Release destroys it. Acquire after Close fails.
func TestObjectCloseWaitsForNothing_I3(t *testing.T) {
	p := newProbe(nil)
	require.True(t, p.obj.Acquire()) // a call in flight
	require.NoError(t, p.obj.Close())
	assert.False(t, p.obj.Acquire(), "Acquire after Close fails")
	_, ok := p.obj.Hold()
	assert.False(t, ok, "Ref after Close fails")
	assert.Zero(t, p.destroyed.Load(), "the call in flight keeps it")
	assert.False(t, p.obj.Destroyed())
	require.NoError(t, p.obj.Close(), "Close is idempotent")
	require.NoError(t, p.obj.Release())
	assert.EqualValues(t, 1, p.destroyed.Load())
	require.NoError(t, p.obj.Close())
	assert.EqualValues(t, 1, p.destroyed.Load())
}

// Invariants I2, I3, I11: a destroy error goes to whoever dropped the last
// reference, is counted in Stats.ReleaseErrors and kept for Errors; Close
// returns its first result to every later caller, concurrent ones
// included.
func TestObjectDestroyError_I2_I3_I11(t *testing.T) {
	boom := errors.New("cuMemFree failed")

	// Close is the last release: it returns the error, and keeps returning it.
	lifetest.DrainErrors()
	before := lifetime.ReadStats()
	p := newProbe(boom)
	var wg sync.WaitGroup
	results := make([]error, 16)
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = p.obj.Close() }()
	}
	wg.Wait()
	for _, err := range results {
		assert.ErrorIs(t, err, boom)
	}
	assert.EqualValues(t, 1, p.destroyed.Load())
	assert.Equal(t, before.ReleaseErrors+1, lifetime.ReadStats().ReleaseErrors)
	errs := lifetime.Errors()
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], boom)
	assert.Empty(t, lifetime.Errors(), "Errors forgets what it returned")

	// A call in flight is the last release: it gets the error, Close nil.
	q := newProbe(boom)
	require.True(t, q.obj.Acquire())
	require.NoError(t, q.obj.Close())
	assert.ErrorIs(t, q.obj.Release(), boom)
	assert.NoError(t, q.obj.Close(), "Close keeps its first result")
	assert.Equal(t, before.ReleaseErrors+2, lifetime.ReadStats().ReleaseErrors)
	errs = lifetime.Errors()
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], boom)
}

// Invariant I11: Errors keeps the 16 most recent errors, oldest first.
func TestErrorsKeepsMostRecent_I11(t *testing.T) {
	lifetest.DrainErrors()
	for i := range 20 {
		_ = lifetime.OwnerFunc(func() error { return errors.New(string(rune('a' + i))) }).Release()
	}
	errs := lifetime.Errors()
	require.Len(t, errs, 16)
	assert.EqualError(t, errs[0], "e")
	assert.EqualError(t, errs[15], "t")
}

// Invariant I1: the zero Object (not initialised) and the zero Ref refuse
// or ignore everything without panicking; an Object with a nil destroy
// function is destroyed silently.
func TestObjectZeroValues_I1(t *testing.T) {
	var o lifetime.Object
	assert.False(t, o.Acquire())
	assert.False(t, o.Retain())
	assert.True(t, o.Destroyed())
	assert.ErrorIs(t, o.Release(), lifetime.ErrOverRelease)
	assert.Zero(t, o.Refs())

	var r lifetime.Ref
	assert.False(t, r.Valid())
	assert.NoError(t, r.Release())
	assert.False(t, r.Same(&o))

	before := lifetime.ReadStats().Objects
	var n lifetime.Object
	n.Init(nil)
	assert.Equal(t, before+1, lifetime.ReadStats().Objects)
	assert.NoError(t, n.Close())
	assert.True(t, n.Destroyed())
	assert.Equal(t, before, lifetime.ReadStats().Objects)
}

// Invariant I2: a Ref stored in an Owner interface costs no allocation (it
// is one pointer), and Acquire/Release cost none either.
func TestRefAsOwnerAllocs_I2(t *testing.T) {
	lifetest.AllocsOK(t)
	p := newProbe(nil)
	defer p.obj.Close()
	var sink lifetime.Owner
	allocs := testing.AllocsPerRun(1000, func() {
		r, _ := p.obj.Hold()
		sink = r
		_ = sink.Release()
		if p.obj.Acquire() {
			_ = p.obj.Release()
		}
	})
	assert.Zero(t, allocs)
}

// Invariants I1, I2: RefOf hands over a reference already taken, and
// Clone takes one more for a second dependent, even after Close (the Ref
// keeps the object alive) but never from zero; each is released once.
func TestRefOfAndClone_I1_I2(t *testing.T) {
	p := newProbe(nil)
	require.True(t, p.obj.Acquire())
	r := lifetime.RefOf(&p.obj)
	require.True(t, r.Same(&p.obj))
	require.EqualValues(t, 2, p.obj.Refs())
	require.NoError(t, p.obj.Close())

	c, ok := r.Clone()
	require.True(t, ok, "Clone works after Close while r is live")
	require.True(t, c.Same(&p.obj))
	require.EqualValues(t, 2, p.obj.Refs())
	require.NoError(t, r.Release())
	assert.Zero(t, p.destroyed.Load())
	require.NoError(t, c.Release())
	assert.EqualValues(t, 1, p.destroyed.Load())

	_, ok = c.Clone()
	assert.False(t, ok, "no Clone from zero")
	_, ok = lifetime.Ref{}.Clone()
	assert.False(t, ok, "the zero Ref clones nothing")
	assert.EqualValues(t, 1, p.destroyed.Load())

	// Clones racing the last release: never a reference from zero.
	for range 500 {
		q := newProbe(nil)
		base, ok := q.obj.Hold()
		require.True(t, ok)
		require.NoError(t, q.obj.Close())
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if c, ok := base.Clone(); ok {
					q.holding.Add(1)
					q.holding.Add(-1)
					_ = c.Release()
				}
			}()
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = base.Release() }()
		wg.Wait()
		require.EqualValues(t, 1, q.destroyed.Load())
		require.Zero(t, q.early.Load())
	}
}
