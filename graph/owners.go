package graph

import (
	"errors"
	"fmt"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/tables"
)

// Owner tables and node adds: what a node names is recorded against it in
// the top-level graph's current owner table, a CUDA user object of the
// graph, in the same step that adds the node.

// ownerTable returns the table for a new node's owners, making and
// attaching a new one when the graph has none it has not shared. The
// family lock is held and the context bound.
func (c *graphCore) ownerTable() (*tables.Table, error) {
	t := c.top()
	if t.table != nil {
		return t.table, nil
	}
	tab := tables.New()
	uo, err := attach(t.h, tab, c.scr)
	if err != nil {
		return nil, err
	}
	t.uos = append(t.uos, uo)
	t.table = tab
	return tab, nil
}

// attach makes t a CUDA user object owned by graph h: its destructor
// (lifetime's trampoline, with t's destructor callback as userData) runs
// after h, its clones and executables are gone and their work finished,
// and only queues t's release. On failure t is released.
func attach(h cu.CUgraph, t *tables.Table, scr *scratch) (cu.CUuserObject, error) {
	fn, err := hostfn.HostFn()
	if err != nil {
		_ = t.Release()
		return 0, err
	}
	id, err := t.DestructorID()
	if err != nil {
		_ = t.Release()
		return 0, err
	}
	if err := cu.UserObjectCreate(&scr.uo, id, cu.CUhostFn(fn), 1, uint32(cu.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)); err != nil {
		t.CancelDestructor()
		_ = t.Release()
		return 0, err
	}
	uo := scr.uo
	if err := cu.GraphRetainUserObject(h, uo, 1, uint32(cu.CU_GRAPH_USER_OBJECT_MOVE)); err != nil {
		// Ours is the only reference: dropping it runs the destructor,
		// which releases t.
		_ = cu.UserObjectRelease(uo, 1)
		return 0, err
	}
	return uo, nil
}

// shared marks the current owner table as shared with a clone, an
// executable or a parent graph: nodes added from now on go to a new table,
// and destroying an older node no longer releases its owners early.
func (c *graphCore) shared() { c.top().table = nil }

// takeOwners removes node h's owners from the current table, if it holds
// them (nothing shared it since the node was added), for the caller to
// release with lifetime.ReleaseAll once it has let go of the family lock:
// an owner's Release (a Raw operand's, written by the user) may call back
// into the graph. The family lock is held.
func (c *graphCore) takeOwners(h cu.CUgraphNode) []release.Owner {
	t := c.top()
	if t.table == nil {
		return nil
	}
	return t.table.Take(uintptr(h))
}

// testRecordHook, when set by a test, runs after the driver added a node
// and before its owners are recorded: an error simulates a failure to
// record them.
var testRecordHook func() error

// add adds one node: it converts deps, calls addFn bound with them, and
// records owners against the new node. It owns owners from the start: on
// any failure each is released, and a node the driver added is removed
// again, so nothing is left half-built.
func (g *Graph) add(op string, deps []Node, owners []release.Owner, addFn func(deps *cu.CUgraphNode, n uintptr) error) (Node, error) {
	return g.addWith(op, deps, owners, nil, addFn)
}

// addWith is add with another graph held and its family locked too (in a
// fixed order, so two adds that lock each other's families cannot
// deadlock): Child reads the child graph while the driver copies it.
func (g *Graph) addWith(op string, deps []Node, owners []release.Owner, other *Graph, addFn func(deps *cu.CUgraphNode, n uintptr) error) (Node, error) {
	n, unattached, taken, err := g.addHeld(op, deps, owners, other, addFn)
	// What the add did not keep is released with every lock let go: an
	// owner's Release (a Raw operand's) may call back into the graph.
	// Owners that never entered a table are not counted as released
	// from one (lifetime.Stats.Live).
	for _, o := range unattached {
		if o == nil {
			continue
		}
		if rerr := o.Release(); rerr != nil && err != nil {
			err = errors.Join(err, rerr)
		}
	}
	if rerr := tables.ReleaseAll(taken); rerr != nil && err != nil {
		err = errors.Join(err, rerr)
	}
	return n, err
}

// addHeld is addWith's body, under the locks; it returns the owners that
// are still the caller's to release (none on success): those that never
// entered a table and those taken back from it.
func (g *Graph) addHeld(op string, deps []Node, owners []release.Owner, other *Graph, addFn func(deps *cu.CUgraphNode, n uintptr) error) (_ Node, unattached, taken []release.Owner, _ error) {
	fail := func(err error) (Node, []release.Owner, []release.Owner, error) {
		return Node{}, owners, taken, err
	}
	if err := g.acquire(op); err != nil {
		return fail(err)
	}
	defer g.release()
	if err := lockFamilies(op, g, other); err != nil {
		return fail(err)
	}
	defer unlockFamilies(g, other)
	d := g.scr.deps[:0]
	for _, n := range deps {
		if err := g.node(op, n); err != nil {
			return fail(err)
		}
		d = append(d, n.h)
	}
	g.scr.deps = d
	var dp *cu.CUgraphNode
	if len(d) > 0 {
		dp = &d[0]
	}
	var h cu.CUgraphNode
	err := g.bind(func() error {
		t, err := g.ownerTable()
		if err != nil {
			return err
		}
		if err := addFn(dp, uintptr(len(d))); err != nil {
			return err
		}
		h = g.scr.node
		if testRecordHook != nil {
			if err := testRecordHook(); err != nil {
				return g.unadd(h, &owners, &taken, err)
			}
		}
		if err := t.AddAll(uintptr(h), owners); err != nil { // all or none: they are still ours
			return g.unadd(h, &owners, &taken, err)
		}
		owners = nil
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return g.register(h), nil, nil, nil
}

// unadd removes node h after its owners could not be recorded, taking back
// those that were (into *taken); it returns err. The context is bound and
// the family lock held.
//
// The node goes first: if CUDA refuses (it does in graphs with memory
// nodes), the owners recorded so far stay with it, the rest (*unattached)
// are kept for good — never a node naming released memory — and the error
// says the node is still there.
func (g *Graph) unadd(h cu.CUgraphNode, unattached, taken *[]release.Owner, err error) error {
	if derr := cu.GraphDestroyNode(h); derr != nil {
		for _, o := range *unattached {
			release.KeepForever(o, fmt.Errorf("graph: owners of a node that could not be removed again kept for good: %w", derr))
		}
		*unattached = nil
		g.register(h) // it is a node of the graph now
		return errors.Join(err, fmt.Errorf("graph: the node could not be removed again and keeps what it names: %w", derr))
	}
	g.dropBodies(h)
	*taken = g.takeOwners(h)
	return err
}
