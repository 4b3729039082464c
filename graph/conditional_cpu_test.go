package graph

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// fakeDriver makes the version gate see driver version v for the test.
func fakeDriver(t *testing.T, v int) {
	t.Helper()
	old := driverVersion
	driverVersion = func() (int, error) { return v, nil }
	t.Cleanup(func() { driverVersion = old })
}

func TestCheckVersion(t *testing.T) {
	for _, c := range []struct {
		need, have int
		ok         bool
	}{
		{12030, 12030, true}, {12030, 13000, true}, {12030, 12020, false},
		{12080, 12080, true}, {12080, 12060, false}, {12080, 12090, true}, {12080, 11080, false},
	} {
		err := checkVersion("Op", "a thing", c.need, c.have)
		if c.ok {
			assert.NoError(t, err, "%+v", c)
			continue
		}
		assert.ErrorIs(t, err, driver.ErrNotSupported, "%+v", c)
		assert.ErrorContains(t, err, "needs a CUDA ")
	}
	err := checkVersion("Graph.IfElse", "an if/else node", 12080, 12040)
	assert.EqualError(t, err, "graph: Graph.IfElse: an if/else node needs a CUDA 12.8 driver, this one is 12.4: "+driver.ErrNotSupported.Error())
}

// On a driver too old for a kind of node (simulated by the gate), the add is
// an error matching driver.ErrNotSupported that names the version, and
// CUDA is never called: the graph here has no CUDA graph at all.
func TestConditionalUnsupportedDriver(t *testing.T) {
	zero := new(Graph) // passes every check before the gate; closed after it
	c := Condition{g: zero, h: 1}

	fakeDriver(t, 12020) // too old for all of it
	_, err := zero.NewCondition(0, 0)
	assert.ErrorIs(t, err, driver.ErrNotSupported)
	assert.ErrorContains(t, err, "needs a CUDA 12.3 driver, this one is 12.2")
	_, _, err = zero.If(c)
	assert.ErrorIs(t, err, driver.ErrNotSupported)
	assert.ErrorContains(t, err, "an if node needs a CUDA 12.3 driver")
	_, _, err = zero.While(c)
	assert.ErrorIs(t, err, driver.ErrNotSupported)
	assert.ErrorContains(t, err, "a while node needs a CUDA 12.3 driver")

	fakeDriver(t, 12060) // if and while, but not if/else or switch
	_, _, _, err = zero.IfElse(c)
	assert.ErrorIs(t, err, driver.ErrNotSupported)
	assert.ErrorContains(t, err, "an if/else node needs a CUDA 12.8 driver, this one is 12.6")
	_, _, err = zero.Switch(c, 3)
	assert.ErrorIs(t, err, driver.ErrNotSupported)
	assert.ErrorContains(t, err, "a switch node needs a CUDA 12.8 driver, this one is 12.6")
	_, _, err = zero.If(c)
	assert.ErrorIs(t, err, driver.ErrClosed, "past the gate: the zero graph is refused")
	assert.NotErrorIs(t, err, driver.ErrNotSupported)
	_, err = zero.NewCondition(0, AssignDefault)
	assert.ErrorIs(t, err, driver.ErrClosed, "past the gate")

	fakeDriver(t, 13000)
	for name, f := range map[string]func() error{
		"if":      func() error { _, _, err := zero.If(c); return err },
		"if/else": func() error { _, _, _, err := zero.IfElse(c); return err },
		"while":   func() error { _, _, err := zero.While(c); return err },
		"switch":  func() error { _, _, err := zero.Switch(c, 1); return err },
		"builder": func() error { _, _, err := zero.After().While(c); return err },
	} {
		err := f()
		assert.ErrorIs(t, err, driver.ErrClosed, name)
		assert.NotErrorIs(t, err, driver.ErrNotSupported, name)
	}
}

// A driver that cannot be loaded is reported by the gate as it is.
func TestConditionalGateWithoutDriver(t *testing.T) {
	old := driverVersion
	driverVersion = func() (int, error) { return 0, driver.ErrNoDevice }
	t.Cleanup(func() { driverVersion = old })
	zero := new(Graph)
	_, _, err := zero.While(Condition{g: zero})
	assert.ErrorIs(t, err, driver.ErrNoDevice)
}

// Bad conditions and branch counts are refused before the driver is asked
// anything.
func TestConditionalBadInputs(t *testing.T) {
	old := driverVersion
	driverVersion = func() (int, error) { t.Fatal("the driver was asked"); return 0, nil }
	t.Cleanup(func() { driverVersion = old })
	g, other := new(Graph), new(Graph)
	mine, theirs := Condition{g: g, h: 1}, Condition{g: other, h: 1}

	for _, n := range []int{0, -1, -1 << 40, MaxSwitchBranches + 1} {
		_, bodies, err := g.Switch(mine, n)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, "%d branches", n)
		assert.ErrorContains(t, err, "branches")
		assert.Nil(t, bodies)
	}
	for name, c := range map[string]Condition{"zero": {}, "another graph's": theirs, "zero with a handle": {h: 5}} {
		_, b, err := g.If(c)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		assert.Nil(t, b)
		_, b1, b2, err := g.IfElse(c)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		assert.Nil(t, b1)
		assert.Nil(t, b2)
		_, _, err = g.While(c)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		_, _, err = g.Switch(c, 2)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
	}
	_, _, err := g.If(Condition{})
	assert.ErrorContains(t, err, "zero Condition")
	_, _, err = g.While(theirs)
	assert.ErrorContains(t, err, "belongs to another graph")

	var nilGraph *Graph
	_, _, err = nilGraph.If(mine)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, _, err = nilGraph.Switch(mine, 2)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = nilGraph.NewCondition(0, 0)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = g.NewCondition(0, 2)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "unknown flag")
	assert.ErrorContains(t, err, "unknown flags 0x2")
}

// A kernel takes a condition as c.Handle(), a uint64 that every launch
// marshals as 8 bytes; the Condition itself holds its graph, so the
// argument marshaller's plain-data rule refuses it (with an error, never a
// crash: see TestConditionAsKernelArgument on the GPU).
func TestConditionHandleArgument(t *testing.T) {
	c := Condition{g: new(Graph), h: 0x1234_5678_9abc}
	var h any = c.Handle()
	v, ok := h.(uint64)
	require.True(t, ok, "Handle is a plain uint64, which the driver's argument switch takes as is")
	assert.Equal(t, uint64(0x1234_5678_9abc), v)
	assert.Equal(t, uintptr(8), reflect.TypeOf(h).Size(), "cudaGraphConditionalHandle is 8 bytes")
	assert.False(t, seam.PlainData(reflect.TypeFor[Condition]()), "a Condition is not a by-value argument")
	assert.True(t, seam.PlainData(reflect.TypeOf(h)))
	assert.False(t, c.IsZero())
	assert.True(t, Condition{}.IsZero())
	assert.Zero(t, Condition{}.Handle())
	assert.Nil(t, Condition{}.Graph())
	assert.Equal(t, ConditionFlags(cu.CU_GRAPH_COND_ASSIGN_DEFAULT), AssignDefault)
}

// fakeRoot is a top-level Graph with no CUDA graph behind it, for the
// bookkeeping of body graphs, which calls no CUDA on its success path.
func fakeRoot(t *testing.T, realDestroy ...bool) (*Graph, *lifetime.Object) {
	t.Helper()
	ctxObj := new(lifetime.Object)
	ctxObj.Init(func() error { return nil })
	ref, ok := ctxObj.Hold()
	require.True(t, ok)
	c := newCore(nil, ref, &sink{}, &family{})
	c.h = 1
	if len(realDestroy) > 0 && realDestroy[0] {
		c.obj.Init(c.destroy) // its CUDA calls fail where no driver loads
	} else {
		c.obj.Init(func() error { return c.ctxRef.Release() })
	}
	return &Graph{graphCore: c}, ctxObj
}

// Destroying a conditional node closes its bodies and every body nested in
// them at any depth, since CUDA destroys those graphs with the node; the
// bodies' references on the context go with them.
func TestNestedBodiesCloseWithOuterNode(t *testing.T) {
	root, ctxObj := fakeRoot(t)
	wrap := func(g *Graph, node cu.CUgraphNode, hs ...cu.CUgraph) []*Graph {
		t.Helper()
		g.fam.mu.Lock()
		bodies, err := g.wrapBodies(node, hs)
		g.fam.mu.Unlock()
		require.NoError(t, err)
		require.Len(t, bodies, len(hs))
		for i, b := range bodies {
			assert.Equal(t, hs[i], b.h)
			assert.Same(t, root.graphCore, b.root, "bodies at any depth record in the top-level graph")
			assert.Same(t, root, b.up, "a body's handle keeps the top-level graph's reachable")
		}
		return bodies
	}
	a := wrap(root, 0x10, 0x100)                   // while node A in the root
	bs := wrap(a[0], 0x20, 0x200, 0x201)           // if/else node B in A's body
	cs := wrap(bs[1], 0x30, 0x300)                 // if node C in B's else branch
	other := wrap(root, 0x40, 0x400, 0x401, 0x402) // switch node D beside A
	assert.EqualValues(t, 1+1+1+2+1+3, ctxObj.Refs(), "the root and each body hold the context")
	isOpen := func(gs ...*Graph) bool {
		for _, g := range gs {
			if g.obj.Closed() {
				return false
			}
		}
		return true
	}

	// Destroying B (as Node.Destroy does) closes B's branches and C's body.
	a[0].fam.mu.Lock()
	a[0].dropBodies(0x20)
	a[0].fam.mu.Unlock()
	assert.False(t, isOpen(bs[0]) || isOpen(bs[1]) || isOpen(cs[0]))
	assert.True(t, isOpen(a[0]), "A's body is not B's")
	_, err := cs[0].Empty()
	assert.ErrorIs(t, err, driver.ErrClosed, "a nested body of a destroyed node refuses adds")
	assert.True(t, isOpen(other...))

	// Destroying A closes A's body (and what was nested, already closed).
	root.fam.mu.Lock()
	root.dropBodies(0x10)
	root.fam.mu.Unlock()
	assert.False(t, isOpen(a[0]))
	assert.True(t, isOpen(other...), "D's branches are not A's")
	assert.EqualValues(t, 1+1+3, ctxObj.Refs())

	// A new node nested two deep, then its outer node destroyed at once.
	e := wrap(other[2], 0x50, 0x500)
	f := wrap(e[0], 0x60, 0x600)
	root.fam.mu.Lock()
	root.dropBodies(0x40)
	root.fam.mu.Unlock()
	assert.False(t, isOpen(other[0]) || isOpen(other[1]) || isOpen(other[2]) || isOpen(e[0]) || isOpen(f[0]))
	assert.EqualValues(t, 1+1, ctxObj.Refs(), "only the root and the test's own reference")
	assert.NoError(t, f[0].Close(), "Close on a body does nothing")

	require.NoError(t, root.obj.Close())
	assert.EqualValues(t, 1, ctxObj.Refs())
	require.NoError(t, ctxObj.Close())
}

// Destroying the top-level graph closes every body graph, nested ones
// included, so their references on the context go too. (The destroy calls
// cuGraphDestroy on a made-up handle, so this runs only where no driver
// loads: the GPU tests check the same through the lifetime counters.)
func TestRootDestroyClosesBodies(t *testing.T) {
	if _, _, err := cu.Load(); err == nil {
		t.Skip("a driver is loaded here: TestBodyOwnersSurviveGC checks this on the GPU")
	}
	root, ctxObj := fakeRoot(t, true)
	root.fam.mu.Lock()
	a, err := root.wrapBodies(0x10, []cu.CUgraph{0x100, 0x101})
	require.NoError(t, err)
	b, err := a[1].wrapBodies(0x20, []cu.CUgraph{0x200})
	require.NoError(t, err)
	root.fam.mu.Unlock()
	assert.EqualValues(t, 2+3, ctxObj.Refs())
	objects := lifetime.ReadStats().Objects
	assert.Error(t, root.obj.Close(), "cuGraphDestroy cannot run without a driver")
	for _, g := range append(a, b...) {
		assert.True(t, g.obj.Destroyed())
	}
	assert.Nil(t, root.bodies)
	assert.EqualValues(t, 1, ctxObj.Refs(), "only the test's own reference is left")
	assert.Equal(t, objects-4, lifetime.ReadStats().Objects, "the root and its three bodies")
	_, err = b[0].Empty()
	assert.ErrorIs(t, err, driver.ErrClosed)
	require.NoError(t, ctxObj.Close())
}
