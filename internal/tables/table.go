package tables

import (
	"errors"
	"fmt"
	"sync"

	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
)

// Owner is an owner a table holds.
type Owner = release.Owner

// ErrReleased is returned when an owner is added to a table that has been
// released already.
var ErrReleased = errors.New("lifetime: the owner table has been released")

// Table holds the owners of a graph's nodes (I9): the buffers, modules,
// events, callbacks, pinned slices and child graphs each node names. Owners
// are recorded per node; Drop releases one node's owners, Release all of
// them. A table is attached to a CUDA graph as a user object whose
// destructor is DestructorID's callback: CUDA runs it on its own thread
// after the graph, its clones and its executables are gone and their work
// has finished, and the callback only hands the table to the release queue,
// since CUDA calls are forbidden there.
//
// Entries live in chunks of chunkLen (see Table.chunks), so that a table
// of a large graph grows without copying what it holds: adding an owner
// allocates only when a chunk fills, and never copies or clears a large
// slice (a single slice grew by a quarter at a time and cost a node add
// about four times its entries in copying and zeroing). A Table is safe
// for concurrent use.
type Table struct {
	mu sync.Mutex
	// chunks hold the entries in order: chunks before n/chunkLen are full,
	// the one at n/chunkLen holds the rest, those after it are empty and
	// kept for reuse. The first chunk grows as a slice does, so that a
	// small graph's table stays small; later ones are made at chunkLen.
	chunks   [][]entry
	n        int
	released bool
	destID   uintptr
}

// chunkLen is the number of entries a chunk holds: 6 KiB, one size class
// of the Go allocator.
const chunkLen = 256

type entry struct {
	node uintptr
	o    Owner
}

// NewTable returns an empty table.
func New() *Table {
	release.Counters.Tables.Add(1)
	return &Table{}
}

// Add records o as owned by node. On error (the table was released) the
// table did not take o: the caller still owns it and must release it.
func (t *Table) Add(node uintptr, o Owner) error { return t.AddAll(node, []Owner{o}) }

// AddAll records every owner of os as owned by node, under one lock: all of
// them, or (on error: a nil owner, or the table was released) none, and
// then the caller still owns them all.
func (t *Table) AddAll(node uintptr, os []Owner) error {
	for _, o := range os {
		if o == nil {
			return fmt.Errorf("lifetime: owner table: nil owner")
		}
	}
	t.mu.Lock()
	if t.released {
		t.mu.Unlock()
		return ErrReleased
	}
	for _, o := range os {
		t.push(entry{node, o})
	}
	release.Counters.Attached.Add(int64(len(os))) // under the lock, so Live never dips below 0
	t.mu.Unlock()
	return nil
}

// push appends e; t.mu is held.
func (t *Table) push(e entry) {
	c := t.n / chunkLen
	if c == len(t.chunks) {
		var ch []entry
		if c > 0 {
			ch = make([]entry, 0, chunkLen)
		}
		t.chunks = append(t.chunks, ch)
	}
	t.chunks[c] = append(t.chunks[c], e)
	t.n++
}

// at is the entry at position i (< t.n); t.mu is held.
func (t *Table) at(i int) *entry { return &t.chunks[i/chunkLen][i%chunkLen] }

// Drop releases the owners of node now and forgets them; it returns the
// first release error (as Release does). Dropping a node with no owners,
// or dropping from a released table, does nothing. It is for node destruction, where no clone or
// executable can still use what the node named: the caller decides that.
func (t *Table) Drop(node uintptr) error { return releaseAll(t.Take(node)) }

// Take removes node's owners from the table and returns them without
// releasing them, for a caller that must release them later: after it lets
// go of a lock that an owner's Release may need (a graph's, when a node is
// destroyed). The caller releases each exactly once, with ReleaseAll, so
// that the counters stay right. Taking from a released table returns nil.
// The others keep their order; the chunks keep their capacity.
func (t *Table) Take(node uintptr) []Owner {
	var mine []Owner
	t.mu.Lock()
	defer t.mu.Unlock()
	w := 0
	for r := 0; r < t.n; r++ {
		e := t.at(r)
		if e.node == node {
			mine = append(mine, e.o)
			continue
		}
		if w != r {
			*t.at(w) = *e
		}
		w++
	}
	for i := w; i < t.n; i++ {
		*t.at(i) = entry{}
	}
	t.n = w
	for c := range t.chunks {
		t.chunks[c] = t.chunks[c][:min(max(w-c*chunkLen, 0), chunkLen)]
	}
	return mine
}

// ReleaseAll releases each owner Take returned, once, counts it released
// (Stats), and returns the first error. A panic in one release is
// recovered and reported like a failed release; the rest still run.
func ReleaseAll(owners []Owner) error { return releaseAll(owners) }

// Owners is the number of owners recorded for node.
func (t *Table) Owners(node uintptr) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, ch := range t.chunks {
		for _, e := range ch {
			if e.node == node {
				n++
			}
		}
	}
	return n
}

// Len is the number of owners recorded.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// Release releases every owner, once; later Adds fail with ErrReleased,
// and later Releases do nothing and return nil. It returns the first
// release error (the owners count theirs; a panicking owner is recovered,
// counted and reported as an error, and the others are still released). It
// may call CUDA through the owners: never call it on a CUDA thread (see
// ReleaseLater).
func (t *Table) Release() error {
	t.mu.Lock()
	if t.released {
		t.mu.Unlock()
		return nil
	}
	t.released = true
	all := t.chunks
	t.chunks, t.n = nil, 0
	id := t.destID
	t.destID = 0
	t.mu.Unlock()
	if id != 0 {
		hostfn.Unregister(id)
	}
	release.Counters.Tables.Add(-1)
	var first error
	for _, ch := range all {
		for i := range ch {
			if err := release.ReleaseOne(ch[i].o); err != nil && first == nil {
				first = err
			}
			ch[i].o = nil
			release.Counters.Released.Add(1)
		}
	}
	return first
}

// ReleaseLater hands the table to the release queue; it never blocks and
// calls no CUDA, so a user-object destructor may call it.
func (t *Table) ReleaseLater() { release.Defer(t) }

// Released reports whether the table has been released.
func (t *Table) Released() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.released
}

// DestructorID registers, once, the callback that releases t later, and
// returns its id: the userData of the user object whose destructor is
// HostFn. If the user object cannot be made, CancelDestructor unregisters
// it again.
func (t *Table) DestructorID() (uintptr, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.released {
		return 0, ErrReleased
	}
	if t.destID == 0 {
		t.destID = hostfn.Register(hostfn.Callback{Fn: t.ReleaseLater, Once: true})
	}
	return t.destID, nil
}

// CancelDestructor unregisters the destructor callback, for when CUDA never
// took the user object.
func (t *Table) CancelDestructor() {
	t.mu.Lock()
	id := t.destID
	t.destID = 0
	t.mu.Unlock()
	if id != 0 {
		hostfn.Unregister(id)
	}
}

func releaseAll(os []Owner) error {
	var first error
	for _, o := range os {
		if err := release.ReleaseOne(o); err != nil && first == nil {
			first = err
		}
		release.Counters.Released.Add(1)
	}
	return first
}
