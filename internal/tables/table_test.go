package tables_test

import (
	"errors"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/tables"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// counted is an Owner that counts its releases.
type counted struct {
	n   atomic.Int32
	err error
}

func (c *counted) Release() error { c.n.Add(1); return c.err }

// Invariant I9: Add records owners per node; Owners and Len count them;
// Drop releases exactly that node's owners (once) and forgets them;
// Release releases the rest.
func TestTableAddDropOwnersLen_I9(t *testing.T) {
	before := lifetest.Settle()
	tab := tables.New()
	assert.Equal(t, before.Tables+1, lifetime.ReadStats().Tables)
	owners := map[uintptr][]*counted{}
	for node := uintptr(1); node <= 5; node++ {
		for range int(node) {
			c := &counted{}
			owners[node] = append(owners[node], c)
			require.NoError(t, tab.Add(node, c))
		}
	}
	assert.Equal(t, 15, tab.Len())
	for node := uintptr(1); node <= 5; node++ {
		assert.Equal(t, int(node), tab.Owners(node))
	}
	assert.Zero(t, tab.Owners(99))
	s := lifetime.ReadStats()
	assert.Equal(t, before.Attached+15, s.Attached)
	assert.Equal(t, before.Live+15, s.Live)

	require.NoError(t, tab.Drop(3))
	assert.Zero(t, tab.Owners(3))
	assert.Equal(t, 12, tab.Len())
	for node, cs := range owners {
		for _, c := range cs {
			want := int32(0)
			if node == 3 {
				want = 1
			}
			assert.Equal(t, want, c.n.Load(), "node %d", node)
		}
	}
	require.NoError(t, tab.Drop(3), "dropping again releases nothing")
	require.NoError(t, tab.Drop(42), "a node with no owners")
	assert.Equal(t, before.Live+12, lifetime.ReadStats().Live)

	require.NoError(t, tab.Release())
	assert.True(t, tab.Released())
	assert.Zero(t, tab.Len())
	for _, cs := range owners {
		for _, c := range cs {
			assert.EqualValues(t, 1, c.n.Load(), "every owner released exactly once")
		}
	}
	require.NoError(t, tab.Drop(1), "Drop on a released table does nothing")
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariant I9: an Add to a released table fails with ErrReleased and
// leaves the owner with the caller, unreleased; Release twice is harmless;
// a nil owner is refused.
func TestTableAddAfterRelease_I9(t *testing.T) {
	before := lifetest.Settle()
	tab := tables.New()
	require.Error(t, tab.Add(1, nil))
	require.NoError(t, tab.Release())
	require.NoError(t, tab.Release(), "Release twice is harmless")
	c := &counted{}
	require.ErrorIs(t, tab.Add(1, c), tables.ErrReleased)
	assert.Zero(t, c.n.Load(), "the caller still owns it")
	_, err := tab.DestructorID()
	assert.ErrorIs(t, err, tables.ErrReleased)
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariant I9: Release returns the first error, releases every owner even
// when some fail or panic, and counts the panic.
func TestTableReleaseErrors_I9(t *testing.T) {
	lifetest.DrainErrors()
	before := lifetest.Settle()
	boom := errors.New("first")
	tab := tables.New()
	a := &counted{}
	require.NoError(t, tab.Add(1, a))
	require.NoError(t, tab.Add(1, lifetime.OwnerFunc(func() error { return boom })))
	require.NoError(t, tab.Add(2, lifetime.OwnerFunc(func() error { panic("owner failed") })))
	require.NoError(t, tab.Add(2, lifetime.OwnerFunc(func() error { return errors.New("second") })))
	z := &counted{}
	require.NoError(t, tab.Add(3, z))
	require.NotPanics(t, func() { assert.ErrorIs(t, tab.Release(), boom) })
	assert.EqualValues(t, 1, a.n.Load())
	assert.EqualValues(t, 1, z.n.Load())
	assert.Equal(t, before.ReleaseErrors+3, lifetime.ReadStats().ReleaseErrors)
	assert.Len(t, lifetime.Errors(), 3)
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariant I9: DestructorID registers one callback (the same id every
// time); invoking it, as CUDA's user-object destructor does, only queues
// the table's release, which has happened once Flush returns; the
// callback is gone afterwards. A second invocation is harmless.
func TestTableDestructor_I9(t *testing.T) {
	before := lifetest.Settle()
	tab := tables.New()
	c := &counted{}
	require.NoError(t, tab.Add(7, c))
	id, err := tab.DestructorID()
	require.NoError(t, err)
	require.NotZero(t, id)
	id2, err := tab.DestructorID()
	require.NoError(t, err)
	assert.Equal(t, id, id2, "registered once")
	assert.Equal(t, before.Callbacks+1, lifetime.ReadStats().Callbacks)

	// Hold the release goroutine so we can see that Invoke only queues.
	gate := make(chan struct{})
	release.Defer(lifetime.OwnerFunc(func() error { <-gate; return nil }))
	hostfn.Invoke(id)
	assert.False(t, tab.Released(), "the destructor only queues the release")
	assert.Zero(t, c.n.Load())
	assert.False(t, hostfn.Pending(id))
	close(gate)
	lifetime.Flush()
	assert.True(t, tab.Released())
	assert.EqualValues(t, 1, c.n.Load())
	hostfn.Invoke(id)
	lifetime.Flush()
	assert.EqualValues(t, 1, c.n.Load())
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariant I9: CancelDestructor unregisters the callback when CUDA never
// took the user object; the table is then released by hand. Release also
// unregisters a destructor that never ran.
func TestTableCancelDestructor_I9(t *testing.T) {
	before := lifetest.Settle()
	tab := tables.New()
	id, err := tab.DestructorID()
	require.NoError(t, err)
	tab.CancelDestructor()
	assert.False(t, hostfn.Pending(id))
	tab.CancelDestructor() // twice: harmless
	hostfn.Invoke(id)
	lifetime.Flush()
	assert.False(t, tab.Released(), "a cancelled destructor does nothing")
	id2, err := tab.DestructorID()
	require.NoError(t, err)
	assert.NotEqual(t, id, id2, "a new registration")
	require.NoError(t, tab.Release())
	assert.False(t, hostfn.Pending(id2), "Release unregisters the destructor")
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariants I9, I11: many goroutines Add while another releases the
// table. Every owner is released exactly once: by the table if its Add
// succeeded, by the caller if it got ErrReleased. Attached, Released and
// Live agree afterwards.
func TestTableConcurrentAddRelease_I9_I11(t *testing.T) {
	before := lifetest.Settle()
	for range 100 {
		tab := tables.New()
		const adders, per = 8, 50
		all := make([][]*counted, adders)
		var wg sync.WaitGroup
		var added, refused atomic.Int64
		start := make(chan struct{})
		for a := range adders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range per {
					c := &counted{}
					all[a] = append(all[a], c)
					switch err := tab.Add(uintptr(i%4), c); {
					case err == nil:
						added.Add(1)
					case errors.Is(err, tables.ErrReleased):
						refused.Add(1)
						_ = c.Release()
					default:
						t.Error(err)
					}
					if i%10 == 0 {
						_ = tab.Drop(uintptr(i % 4))
						_ = tab.Owners(1)
						_ = tab.Len()
					}
				}
			}()
		}
		wg.Add(2)
		go func() { defer wg.Done(); <-start; _ = tab.Release() }()
		go func() { defer wg.Done(); <-start; _ = tab.Release() }()
		close(start)
		wg.Wait()
		require.EqualValues(t, adders*per, added.Load()+refused.Load())
		for _, cs := range all {
			for _, c := range cs {
				require.EqualValues(t, 1, c.n.Load())
			}
		}
		require.True(t, tab.Released())
	}
	after := lifetest.Settle()
	assert.Equal(t, after.Attached-before.Attached, after.Released-before.Released)
	assert.Equal(t, after.Attached-after.Released, after.Live)
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariant I11: Live never dips below its starting value while tables
// are filled and released concurrently (Attached is counted before an
// owner can be released).
func TestTableLiveNeverNegative_I11(t *testing.T) {
	before := lifetest.Settle()
	stop := make(chan struct{})
	var minLive atomic.Int64
	minLive.Store(before.Live)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if l := lifetime.ReadStats().Live; l < minLive.Load() {
				minLive.Store(l)
			}
		}
	}()
	nop := lifetime.OwnerFunc(func() error { return nil })
	for range 2000 {
		tab := tables.New()
		var inner sync.WaitGroup
		inner.Add(2)
		go func() { defer inner.Done(); _ = tab.Add(1, nop) }()
		go func() { defer inner.Done(); _ = tab.Release() }()
		inner.Wait()
	}
	close(stop)
	wg.Wait()
	assert.GreaterOrEqual(t, minLive.Load(), before.Live)
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariant I9: adding an owner to a table that has grown allocates
// nothing — the node-add budget (a Ref as the Owner included).
func TestTableAddAllocs_I9(t *testing.T) {
	lifetest.AllocsOK(t)
	tab := tables.New()
	defer tab.Release()
	var o lifetime.Object
	o.Init(nil)
	defer o.Close()
	nop := lifetime.OwnerFunc(func() error { return nil })
	for range 2048 {
		require.NoError(t, tab.Add(1, nop))
	}
	require.NoError(t, tab.Drop(1)) // keeps the capacity
	n := uintptr(0)
	allocs := testing.AllocsPerRun(1000, func() {
		r, _ := o.Hold()
		n++
		_ = tab.Add(n, r)
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 1001, tab.Len())
}

// Invariants I9, I11: Take removes a node's owners without releasing them
// (the caller releases them later, outside its locks); ReleaseAll releases
// each once, counts it, and returns the first error, also when one panics.
// Taking from a released table, or a node without owners, gives nothing.
func TestTableTakeThenReleaseAll_I9_I11(t *testing.T) {
	before := lifetest.Settle()
	tab := tables.New()
	a, b, other := &counted{}, &counted{err: errors.New("b failed")}, &counted{}
	require.NoError(t, tab.Add(1, a))
	require.NoError(t, tab.Add(1, b))
	require.NoError(t, tab.Add(2, other))
	assert.Empty(t, tab.Take(3))
	taken := tab.Take(1)
	assert.Len(t, taken, 2)
	assert.Zero(t, a.n.Load()+b.n.Load(), "Take releases nothing")
	assert.Zero(t, tab.Owners(1))
	assert.Equal(t, 1, tab.Owners(2))
	assert.Equal(t, before.Live+3, lifetime.ReadStats().Live, "taken owners still count as live")
	panicky := lifetime.OwnerFunc(func() error { panic("release failed") })
	require.NoError(t, tab.Add(4, panicky))
	taken = append(taken, tab.Take(4)...)
	err := tables.ReleaseAll(taken)
	assert.EqualError(t, err, "b failed")
	assert.EqualValues(t, 1, a.n.Load())
	assert.EqualValues(t, 1, b.n.Load())
	assert.Equal(t, before.Live+1, lifetime.ReadStats().Live, "only node 2's owner is left")
	require.NoError(t, tab.Release())
	assert.Nil(t, tab.Take(2), "a released table has nothing to take")
	assert.EqualValues(t, 1, other.n.Load())
	assert.Equal(t, before.Live, lifetime.ReadStats().Live)
	_ = lifetime.Errors() // the panic was reported there
}

// Invariant I9 across chunk boundaries: a table of several chunks keeps
// every owner once, in order, through Takes from its start, middle and end
// and adds after them, and Release releases each exactly once.
func TestTableChunksTakeAndRelease_I9(t *testing.T) {
	before := lifetest.Settle()
	tab := tables.New()
	const nodes, per = 700, 3 // 2100 owners: several chunks
	var all []*counted
	for node := uintptr(1); node <= nodes; node++ {
		for range per {
			c := &counted{}
			all = append(all, c)
			require.NoError(t, tab.Add(node, c))
		}
	}
	require.Equal(t, nodes*per, tab.Len())
	taken := map[uintptr]bool{1: true, 86: true, 350: true, 699: true, 700: true}
	for node := range taken {
		got := tab.Take(node)
		require.Len(t, got, per, "node %d", node)
		for i, o := range got { // a node's owners, in the order they came
			assert.Same(t, all[(int(node)-1)*per+i], o)
		}
		require.NoError(t, tables.ReleaseAll(got))
	}
	require.Equal(t, (nodes-len(taken))*per, tab.Len())
	for node := uintptr(1); node <= nodes; node++ {
		want := per
		if taken[node] {
			want = 0
		}
		require.Equal(t, want, tab.Owners(node), "node %d", node)
	}
	// Adds after the Takes fill the freed room and grow again.
	var more []*counted
	for i := range 600 {
		c := &counted{}
		more = append(more, c)
		require.NoError(t, tab.AddAll(uintptr(1000+i%2), []tables.Owner{c}))
	}
	require.Equal(t, (nodes-len(taken))*per+600, tab.Len())
	assert.Equal(t, 300, tab.Owners(1000))
	require.NoError(t, tab.Release())
	for i, c := range append(all, more...) {
		require.Equal(t, int32(1), c.n.Load(), "owner %d", i)
	}
	lifetest.RequireLiveCountsBack(t, before)
}

// Invariant I9: AddAll records all of its owners or, on error, none: a nil
// among them, or a released table, leaves every one with the caller.
func TestTableAddAllAllOrNone_I9(t *testing.T) {
	before := lifetest.Settle()
	tab := tables.New()
	a, b := &counted{}, &counted{}
	require.Error(t, tab.AddAll(1, []tables.Owner{a, nil, b}))
	assert.Zero(t, tab.Len())
	require.NoError(t, tab.AddAll(1, []tables.Owner{a, b}))
	assert.Equal(t, 2, tab.Owners(1))
	require.NoError(t, tab.AddAll(2, nil))
	require.NoError(t, tab.Release())
	c := &counted{}
	require.ErrorIs(t, tab.AddAll(3, []tables.Owner{c}), tables.ErrReleased)
	assert.Zero(t, c.n.Load())
	assert.Equal(t, int32(1), a.n.Load())
	assert.Equal(t, int32(1), b.n.Load())
	lifetest.RequireLiveCountsBack(t, before)
}
