package lifetime_test

import (
	"errors"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/tables"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// FuzzObjectModel checks Object against a model of its count, one
// operation per byte (I1, I2, I3): Acquire, Hold, Release of a reference
// held (or an over-release when none is), Close, Ref and its Release.
func FuzzObjectModel(f *testing.F) {
	f.Add([]byte{0, 0, 3, 2, 2, 2})
	f.Add([]byte{3, 1, 2, 0, 2})
	f.Add([]byte{4, 3, 3, 1, 4, 2, 2, 2})
	f.Add([]byte{2, 2, 0, 1, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var destroyed int
		var o lifetime.Object
		o.Init(func() error { destroyed++; return nil })
		refs, closed, held := 1, false, 0 // held: references the fuzzer took
		var closeErr error
		var pendingRefs []lifetime.Ref
		for _, op := range ops {
			switch op % 5 {
			case 0:
				want := !closed && refs > 0
				require.Equal(t, want, o.Acquire(), "Acquire (I1, I3)")
				if want {
					refs++
					held++
				}
			case 1:
				want := refs > 0
				require.Equal(t, want, o.Retain(), "Retain (I1)")
				if want {
					refs++
					held++
				}
			case 2: // a reference of ours, else the owner's, else over-release
				err := o.Release()
				if refs == 0 {
					require.ErrorIs(t, err, lifetime.ErrOverRelease, "I2")
					break
				}
				require.NoError(t, err)
				refs--
				if held > 0 {
					held--
				}
			case 3:
				err := o.Close()
				if !closed {
					closed = true
					if refs == 0 {
						closeErr = lifetime.ErrOverRelease
					} else {
						refs--
					}
				}
				if closeErr != nil {
					require.ErrorIs(t, err, closeErr, "Close keeps its first result (I3)")
				} else {
					require.NoError(t, err)
				}
			case 4:
				r, ok := o.Hold()
				want := !closed && refs > 0
				require.Equal(t, want, ok, "Ref (I1, I3)")
				if ok {
					refs++
					pendingRefs = append(pendingRefs, r)
				} else if len(pendingRefs) > 0 {
					r := pendingRefs[len(pendingRefs)-1]
					pendingRefs = pendingRefs[:len(pendingRefs)-1]
					if refs == 0 { // an earlier Release took this one's place
						require.ErrorIs(t, r.Release(), lifetime.ErrOverRelease, "I2")
					} else {
						require.NoError(t, r.Release())
						refs--
					}
				}
			}
			require.EqualValues(t, refs, o.Refs())
			require.Equal(t, closed, o.Closed())
			require.Equal(t, refs == 0, o.Destroyed())
			if refs == 0 {
				require.Equal(t, 1, destroyed, "destroyed exactly once at zero (I2)")
			} else {
				require.Zero(t, destroyed, "nothing destroyed early (I3)")
			}
		}
		for _, r := range pendingRefs {
			if refs > 0 {
				require.NoError(t, r.Release())
				refs--
			}
		}
		_ = o.Close()
		for o.Refs() > 0 {
			require.NoError(t, o.Release())
		}
		require.True(t, o.Destroyed())
		require.Equal(t, 1, destroyed)
	})
}

// FuzzMapModel checks Map against a Go map, one operation per byte pair
// (I5): Put, Get, Take and Delete of live ids, and of stale ids, which
// must always miss.
func FuzzMapModel(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 0, 3, 1, 0, 0})
	f.Add([]byte{0, 0, 3, 0, 0, 0, 2, 0, 4, 0, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var m hostfn.Map[int]
		model := map[uintptr]int{}
		var live, stale []uintptr
		next := 0
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%5, int(ops[i+1])
			switch {
			case op == 0 || len(live) == 0:
				id := m.Put(next)
				require.NotZero(t, id)
				_, dup := model[id]
				require.False(t, dup)
				model[id] = next
				live = append(live, id)
				next++
			case op == 1:
				id := live[arg%len(live)]
				v, ok := m.Get(id)
				require.True(t, ok)
				require.Equal(t, model[id], v)
			case op == 2 || op == 3:
				k := arg % len(live)
				id := live[k]
				if op == 2 {
					v, ok := m.Take(id)
					require.True(t, ok)
					require.Equal(t, model[id], v)
				} else {
					require.True(t, m.Delete(id))
				}
				delete(model, id)
				live = append(live[:k], live[k+1:]...)
				stale = append(stale, id)
			case op == 4 && len(stale) > 0:
				id := stale[arg%len(stale)]
				_, ok := m.Get(id)
				require.False(t, ok, "a stale id misses")
				require.False(t, m.Delete(id))
			}
			require.Equal(t, len(model), m.Len())
		}
	})
}

// Invariants I1, I2, I3, I6, I8, I9, I11 together: goroutines pick random
// operations on shared objects — calls in flight, dependents, Close, table
// adds and drops, table and callback releases through Invoke and Defer —
// with a fixed seed per goroutine. Every object is destroyed exactly once,
// never while a reference the test took is live and never before Close;
// every table owner is released exactly once; counters return to start.
func TestRandomizedMix_I1_I2_I3_I9_I11(t *testing.T) {
	lifetest.DrainErrors()
	before := lifetest.Settle()
	rounds := 40
	if testing.Short() {
		rounds = 5
	}
	boom := errors.New("destroy failed")
	for round := range rounds {
		const nObj, nTab, workers, steps = 16, 4, 8, 400
		probes := make([]*probe, nObj)
		closedAt := make([]atomic.Bool, nObj)
		badDestroy := atomic.Int32{}
		for i := range probes {
			var err error
			if i%5 == 0 {
				err = boom
			}
			p := &probe{err: err}
			p.obj.Init(func() error {
				if p.holding.Load() != 0 || !closedAt[i].Load() {
					badDestroy.Add(1)
				}
				p.destroyed.Add(1)
				return p.err
			})
			probes[i] = p
		}
		tabs := make([]*tables.Table, nTab)
		for i := range tabs {
			tabs[i] = tables.New()
		}
		var tabOwners sync.Map // *counted -> table index
		var refused atomic.Int32
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for range steps {
					i := rng.IntN(nObj)
					p := probes[i]
					switch rng.IntN(10) {
					case 0, 1, 2: // a call in flight
						p.use()
					case 3: // a dependent through a table
						if r, ok := p.obj.Hold(); ok {
							tab := tabs[rng.IntN(nTab)]
							if tab.Add(uintptr(rng.IntN(4)), r) != nil {
								refused.Add(1)
								_ = r.Release()
							}
						}
					case 4: // a dependent released later, on the queue
						if p.obj.Retain() {
							release.Defer(&p.obj)
						}
					case 5:
						closedAt[i].Store(true)
						_ = p.obj.Close()
					case 6:
						c := &counted{}
						tabOwners.Store(c, nil)
						if tabs[rng.IntN(nTab)].Add(uintptr(rng.IntN(4)), c) != nil {
							_ = c.Release()
						}
					case 7:
						_ = tabs[rng.IntN(nTab)].Drop(uintptr(rng.IntN(4)))
					case 8: // a host function that releases a dependent
						if r, ok := p.obj.Hold(); ok {
							hostfn.Invoke(hostfn.Register(hostfn.Callback{
								Fn: func() { release.Defer(r) }, Once: true,
							}))
						}
					case 9: // rarely, a table's destructor runs
						if rng.IntN(20) == 0 {
							tab := tabs[rng.IntN(nTab)]
							if id, err := tab.DestructorID(); err == nil {
								hostfn.Invoke(id)
							}
						}
					}
				}
			}()
		}
		wg.Wait()
		for i, p := range probes {
			closedAt[i].Store(true)
			_ = p.obj.Close()
		}
		for _, tab := range tabs {
			_ = tab.Release()
		}
		lifetime.Flush()
		for i, p := range probes {
			require.EqualValues(t, 1, p.destroyed.Load(), "round %d object %d", round, i)
			require.Zero(t, p.early.Load())
		}
		require.Zero(t, badDestroy.Load(), "a destroy ran early")
		tabOwners.Range(func(k, _ any) bool {
			require.EqualValues(t, 1, k.(*counted).n.Load())
			return true
		})
	}
	lifetest.RequireLiveCountsBack(t, before)
	for _, err := range lifetime.Errors() {
		require.ErrorIs(t, err, boom)
	}
}

// counted is an Owner that counts its releases.
type counted struct {
	n   atomic.Int32
	err error
}

func (c *counted) Release() error { c.n.Add(1); return c.err }
