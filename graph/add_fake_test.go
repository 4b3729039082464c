//go:build linux

package graph

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/lifetest"
)

// A body graph's CUDA graph is kept alive by the node that owns it, which
// the body's calls do not hold: a call on the body that has acquired it and
// waits for the lock while Node.Destroy destroys the owner node must see
// ErrClosed once it has the lock, not add a node to a destroyed graph
// (fakecuda: a bad handle use; the real libcuda: use after free). The body
// is simulated here with a child-graph node's embedded graph, which the
// node owns exactly as a conditional node owns its bodies (fakecuda has no
// conditional nodes).
func TestFakeBodyCallRacingOwnerNodeDestroySeesClosed(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	root, err := New(env.ctx)
	require.NoError(t, err)
	defer root.Close()
	c, err := New(env.ctx)
	require.NoError(t, err)
	_, err = c.Empty()
	require.NoError(t, err)
	n, err := root.Child(c)
	require.NoError(t, err)
	var h cu.CUgraph
	require.NoError(t, n.use("test", func() error { return cu.GraphChildGraphNodeGetGraph(n.h, &h) }))
	root.fam.mu.Lock()
	body, err := root.newBody(h, n.h)
	root.fam.mu.Unlock()
	require.NoError(t, err)

	// A call on the body has acquired it and waits for the tree's mutex
	// while the owner node is destroyed: one mutex serves the whole tree,
	// and the call re-checks the body once it has the lock.
	require.True(t, body.fam == root.fam, "a body shares its root's family lock")
	require.NoError(t, body.acquire("test"))
	require.NoError(t, n.Destroy()) // the owner node goes, and its graph with it
	err = body.lock("test")
	body.release()
	assert.ErrorIs(t, err, driver.ErrClosed, "the in-flight body call must see that its graph is gone")
	_, err = body.Empty()
	assert.ErrorIs(t, err, driver.ErrClosed)
	faketest.NoBadUses(t)
}

// Builder.Child snapshots the child's owner table (and marks it shared)
// and then has the driver copy the child. A node added to the child in
// between must be known to g's bookkeeping too: destroying it in the child
// must not release its buffer while g's copy still uses it. (The
// interleaving is fixed by holding g's lock here; in a program another call
// on g holds it.)
func TestFakeChildSnapshotRaceKeepsOwners(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	g, err := New(env.ctx)
	require.NoError(t, err)
	defer g.Close()
	c, err := New(env.ctx)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Empty()
	require.NoError(t, err)

	g.fam.mu.Lock()
	childErr := make(chan error, 1)
	go func() { _, err := g.Child(c); childErr <- err }()
	time.Sleep(100 * time.Millisecond) // Child has snapshotted c and waits for g.mu
	buf, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	k, err := c.KernelWith(env.fill, one, buf, int32(1), int32(16))
	require.NoError(t, err)
	require.NoError(t, buf.Close()) // c's node holds it
	g.fam.mu.Unlock()
	require.NoError(t, <-childErr)  // g's copy of c includes k
	require.NoError(t, k.Destroy()) // c's table was never shared with g: buf is freed

	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	require.NoError(t, e.Launch(env.s))
	_ = env.s.Synchronize()
	faketest.NoBadUses(t)
}

// add's rollback (unadd) in a graph with memory alloc or free nodes, where
// CUDA refuses to remove nodes: the node stays in the graph, so it keeps
// its owners (the launch below uses no freed memory) and the error says so,
// rather than leaving the half-built state the rollback exists to prevent.
// (The record failure is injected with testRecordHook.)
func TestFakeRollbackInGraphWithMemoryNodesKeepsOwners(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	g, err := New(env.ctx)
	require.NoError(t, err)
	defer g.Close()
	a, ptr, err := g.MemAlloc(64, MemAllocOptions{})
	require.NoError(t, err)
	_, err = g.After(a).MemFree(ptr)
	require.NoError(t, err)
	before, err := g.Nodes()
	require.NoError(t, err)

	buf, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	testRecordHook = func() error { return errors.New("injected: owners not recorded") }
	_, err = g.KernelWith(env.fill, one, buf, int32(1), int32(16))
	testRecordHook = nil
	require.Error(t, err)
	addErr := err
	t.Logf("the failed add returned: %v", err)
	require.NoError(t, buf.Close()) // the add said it failed: the caller's buffer is freed
	after, err := g.Nodes()
	require.NoError(t, err)
	// CUDA refuses to destroy nodes of graphs with memory nodes, so the node
	// stays: then it must keep what it names (checked by the launch below:
	// no use of freed memory), and the error must say so.
	if len(after) > len(before) {
		assert.ErrorContains(t, addErr, "could not be removed again and keeps what it names")
	}
	if len(after) > len(before) {
		e, err := g.Instantiate()
		require.NoError(t, err)
		defer e.Close()
		require.NoError(t, e.Launch(env.s))
		_ = env.s.Synchronize()
	}
	faketest.NoBadUses(t)
}

// Builder.KernelArgs checks the buffers' contexts as Stream.LaunchArgs and
// Graph.Kernel do, also for a library kernel (which has no context of its
// own), so that no node of a graph in context B names memory of context A.
func TestFakeKernelArgsChecksBufferContexts(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	defer lib.Close()
	fill, err := lib.Function("fill")
	require.NoError(t, err)
	other, err := env.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer other.Close()
	mine, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	defer mine.Close()
	args, err := fill.NewArgs(mine, int32(1), int32(16))
	require.NoError(t, err)
	defer args.Close()

	g, err := New(other)
	require.NoError(t, err)
	defer g.Close()
	_, err = g.KernelWith(fill, one, mine, int32(1), int32(16))
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "control: Graph.Kernel refuses a buffer of another context")
	_, err = g.KernelArgs(args, one.Grid, one.Block)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "Graph.KernelArgs must refuse it too")
	if err == nil { // what follows: the node runs in B on A's memory
		e, err := g.Instantiate()
		require.NoError(t, err)
		defer e.Close()
		s, err := other.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, e.Launch(s))
		_ = s.Synchronize()
	}
	faketest.NoBadUses(t)
}

// The allocation budget of a node add: a kernel-node add with two buffer
// arguments allocates nothing, inside Batch or not (once the graph's node
// table has grown: it grows by doubling).
func TestFakeKernelAddAllocatesNothing(t *testing.T) {
	lifetest.AllocsOK(t) // the race detector changes allocation counts
	if !faketest.InChild(t) {
		return
	}
	env := fakeSetup(t)
	a, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	defer a.Close()
	b, err := driver.Alloc[int32](env.ctx, 16)
	require.NoError(t, err)
	defer b.Close()
	copyi, err := env.mod.Function("copyi")
	require.NoError(t, err)
	g, err := New(env.ctx)
	require.NoError(t, err)
	defer g.Close()
	for range 64 { // the node table grows first
		_, err := g.KernelWith(copyi, one, a, b, int32(16))
		require.NoError(t, err)
	}
	allocs := testing.AllocsPerRun(2000, func() {
		if _, err := g.KernelWith(copyi, one, a, b, int32(16)); err != nil {
			panic(err)
		}
	})
	t.Logf("kernel-node add with two buffers: %.2f allocations", allocs)
	assert.LessOrEqual(t, allocs, 0.05, "a node add allocates (amortised table growth aside)")
	require.NoError(t, g.Batch(func() error {
		allocs = testing.AllocsPerRun(2000, func() {
			if _, err := g.KernelWith(copyi, one, a, b, int32(16)); err != nil {
				panic(err)
			}
		})
		return nil
	}))
	t.Logf("inside Batch: %.2f allocations", allocs)
	assert.LessOrEqual(t, allocs, 0.05, "a node add in Batch allocates")

	// Nodes of another context than the graph's (Builder.On, a module
	// kernel of another context, copies between contexts) and memcpy and
	// memset nodes allocate nothing either.
	other, err := env.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer other.Close()
	mod, err := other.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	defer mod.Close()
	copyo, err := mod.Function("copyi")
	require.NoError(t, err)
	c, err := driver.Alloc[int32](other, 16)
	require.NoError(t, err)
	defer c.Close()
	d, err := driver.Alloc[int32](other, 16)
	require.NoError(t, err)
	defer d.Close()
	for name, add := range map[string]func() error{
		"a kernel of another context": func() error {
			_, err := g.KernelWith(copyo, one, c, d, int32(16))
			return err
		},
		"a kernel On another context": func() error {
			_, err := g.On(other).KernelWith(copyo, one, c, d, int32(16))
			return err
		},
		"a memcpy": func() error {
			_, err := g.Memcpy(Device(a), Device(b))
			return err
		},
		"a memcpy between contexts": func() error {
			_, err := g.Memcpy(Device(a), Device(c))
			return err
		},
		"a memcpy On another context": func() error {
			_, err := g.On(other).Memcpy(Device(d), Device(a))
			return err
		},
		"a memset On another context": func() error {
			_, err := g.On(other).Memset(Device(c), 1, 4)
			return err
		},
	} {
		for range 64 {
			require.NoError(t, add(), name)
		}
		allocs := testing.AllocsPerRun(2000, func() {
			if err := add(); err != nil {
				panic(err)
			}
		})
		t.Logf("%s: %.2f allocations", name, allocs)
		assert.LessOrEqual(t, allocs, 0.05, "%s allocates", name)
	}
}
