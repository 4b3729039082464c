package graph

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// Bad inputs with real graphs: a condition of another graph, a Condition
// passed as a kernel argument, a zero branch count, and what CUDA refuses
// for graphs with conditional nodes — errors, never crashes.
func TestConditionalBadInputsGPU(t *testing.T) {
	e, _, fns := condSetup(t, versionIfWhile)
	st0 := lifetime.ReadStats()
	step := alloc[int32](t, e.ctx, 1)
	g, err := New(e.ctx)
	require.NoError(t, err)
	other, err := New(e.ctx)
	require.NoError(t, err)
	defer other.Close()
	theirs, err := other.NewCondition(0, 0)
	require.NoError(t, err)
	_, _, err = g.While(theirs)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a condition of another graph")
	_, _, err = g.If(Condition{})
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "the zero Condition")
	loop, err := g.NewCondition(1, AssignDefault)
	require.NoError(t, err)
	_, _, err = g.Switch(loop, 0)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a switch of no branches")
	_, err = g.KernelWith(fns["loop_tail"], one, step, int32(1), loop)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a Condition itself is not a kernel argument: pass Handle()")

	w, body, err := g.While(loop)
	require.NoError(t, err)
	inner, err := body.NewCondition(0, 0)
	require.NoError(t, err)
	_, innerBody, err := body.If(inner)
	require.NoError(t, err)
	_, err = body.KernelWith(fns["loop_tail"], one, step, int32(1), loop.Handle())
	require.NoError(t, err)
	_, err = body.Instantiate()
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a body is not instantiated on its own")
	_, err = body.Clone()
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.NoError(t, body.Close(), "a body belongs to its node")
	_, err = g.Child(body)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "a body is not a child graph")
	_, err = g.Clone()
	assert.Error(t, err, "CUDA does not clone graphs with conditional nodes")

	// Destroying the while node closes its body and the if's body nested
	// in it; their nodes' owners go with the graph.
	require.NoError(t, w.Destroy())
	_, err = body.Empty()
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = innerBody.Empty()
	assert.ErrorIs(t, err, driver.ErrClosed, "a nested body of a destroyed node")
	_, err = w.Kind()
	assert.ErrorIs(t, err, ErrDestroyedNode)
	require.NoError(t, g.Close())
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Callbacks <= st0.Callbacks && st.Tables <= st0.Tables
	}, "owners released")
}

// What CUDA refuses in graphs with conditional nodes, as driver 580 (CUDA
// 13.0) does it: errors with the driver's reason, never crashes, and
// nothing leaks.
func TestConditionalCUDARules(t *testing.T) {
	e, s, _ := condSetup(t, versionIfWhile)
	st0 := lifetime.ReadStats()

	// A host node in a body: the add succeeds, instantiation refuses it.
	g, err := New(e.ctx)
	require.NoError(t, err)
	c, err := g.NewCondition(1, AssignDefault)
	require.NoError(t, err)
	_, body, err := g.If(c)
	require.NoError(t, err)
	_, err = body.HostFunc(func() {})
	require.NoError(t, err, "CUDA accepts the add")
	_, err = g.Instantiate()
	var ie *InstantiateError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, InstantiateNodeOperationUnsupported, ie.Result)
	assert.False(t, ie.Node.IsZero(), "the driver names the node")
	require.NoError(t, g.Close())

	// One executable at a time; a condition no node uses; no child graph.
	g, err = New(e.ctx)
	require.NoError(t, err)
	defer g.Close()
	c, err = g.NewCondition(1, AssignDefault)
	require.NoError(t, err)
	_, body, err = g.If(c)
	require.NoError(t, err)
	a, b := alloc[int32](t, e.ctx, 64), alloc[int32](t, e.ctx, 64)
	set := must[Node](t)(body.Memset(Device(a), 7, 4)) // device memset and copy are allowed in bodies
	_, err = body.After(set).Memcpy(Device(b), Device(a))
	require.NoError(t, err)
	x1, err := g.Instantiate()
	require.NoError(t, err)
	_, err = g.Instantiate()
	assert.ErrorIs(t, err, driver.ErrNotSupported, "a second executable while the first exists")
	parent, err := New(e.ctx)
	require.NoError(t, err)
	defer parent.Close()
	_, err = parent.Child(g)
	assert.ErrorIs(t, err, driver.ErrNotSupported, "a graph with conditional nodes as a child")
	require.NoError(t, x1.Close())
	x2, err := g.Instantiate()
	require.NoError(t, err, "a new executable once the first is closed")
	require.NoError(t, b.Memset32(e.ctx.LegacyStream(), 0))
	require.NoError(t, x2.Launch(s))
	require.NoError(t, s.Synchronize())
	got := make([]int32, 64)
	require.NoError(t, b.CopyToHost(e.ctx.LegacyStream(), got))
	assert.Equal(t, []int32{7, 7}, []int32{got[0], got[63]}, "the body's memset and device copy ran")
	require.NoError(t, x2.Close())
	_, err = g.NewCondition(1, 0) // used by no node
	require.NoError(t, err)
	_, err = g.Instantiate()
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, InstantiateConditionalHandleUnused, ie.Result)

	// A copy with pageable host memory in a body: instantiation refuses
	// it. A Go slice through Slice is registered (page-locked), so a body
	// may copy it.
	pageable := make([]int32, 64)
	h, err := New(e.ctx)
	require.NoError(t, err)
	defer h.Close()
	c, err = h.NewCondition(1, AssignDefault)
	require.NoError(t, err)
	_, body, err = h.If(c)
	require.NoError(t, err)
	_, err = body.Memcpy(Device(a), RawHost(uintptr(unsafe.Pointer(&pageable[0])), 4*len(pageable), nil))
	require.NoError(t, err)
	_, err = h.Instantiate()
	require.ErrorAs(t, err, &ie)
	t.Logf("pageable copy in a body: %v", err)
	runtime.KeepAlive(pageable)

	sl, err := New(e.ctx)
	require.NoError(t, err)
	defer sl.Close()
	c, err = sl.NewCondition(1, AssignDefault)
	require.NoError(t, err)
	_, body, err = sl.If(c)
	require.NoError(t, err)
	in := []int32{5, 6, 7}
	_, err = body.Memcpy(Device(a), Slice(in))
	require.NoError(t, err)
	xs, err := sl.Instantiate()
	require.NoError(t, err, "a Go slice's copy in a body")
	require.NoError(t, xs.Launch(s))
	require.NoError(t, s.Synchronize())
	got3, err := a.ToHost(s)
	require.NoError(t, err)
	assert.Equal(t, in, got3[:3], "the body copied the slice")
	require.NoError(t, xs.Close())
	require.NoError(t, sl.Close())

	require.NoError(t, g.Close())
	require.NoError(t, h.Close())
	require.NoError(t, parent.Close()) // its refused Child add made it an owner table
	eventually(t, func() bool {
		st := lifetime.ReadStats()
		return st.Live <= st0.Live && st.Callbacks <= st0.Callbacks && st.Pinned <= st0.Pinned && st.Tables <= st0.Tables
	}, "owners released")
}
