package graph

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/driver"
)

// The marks of a graph spanning contexts, on a CPU: a node of a body marks
// its top-level graph; device launch of a marked graph, and per-node
// updates of an executable of one, are refused with ErrInvalidArgument;
// other instantiation flags, and unmarked graphs, pass.
func TestMultiContextMarks(t *testing.T) {
	top := &graphCore{}
	body := &graphCore{root: top}
	assert.NoError(t, body.refuseMultiDeviceLaunch("op", DeviceLaunch), "unmarked")
	body.markMulti()
	assert.True(t, top.multi, "a body's node marks its top-level graph")
	for _, c := range []*graphCore{top, body} {
		err := c.refuseMultiDeviceLaunch("Graph.InstantiateWith", DeviceLaunch|Upload)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		assert.ErrorContains(t, err, "device launch")
		assert.NoError(t, c.refuseMultiDeviceLaunch("Graph.InstantiateWith", Upload|UseNodePriority|AutoFreeOnLaunch))
	}
	e := &Exec{execCore: &execCore{}}
	assert.NoError(t, e.singleContext("Exec.SetKernel"))
	e.multi = true
	err := e.singleContext("Exec.SetKernel")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorContains(t, err, "several contexts")
}

// On keeps the Builder's dependencies and graph, and On(nil) means the
// graph's context; a zero Builder's adds fail, with or without a context.
func TestOnKeepsTheBuilder(t *testing.T) {
	g := new(Graph)
	n := Node{g: g, h: 1}
	ctx := new(driver.Context)
	b := g.After(n).On(ctx)
	assert.Same(t, g, b.g)
	assert.Equal(t, []Node{n}, b.deps)
	assert.Same(t, ctx, b.ctx)
	assert.Nil(t, b.On(nil).ctx, "On(nil): the graph's context")
	assert.Same(t, ctx, g.On(ctx).ctx)
	_, err := Builder{}.On(ctx).Memset(Device[int32](nil), 0, 4)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "nil graph")
	_, err = Builder{g: new(Graph)}.On(ctx).Memcpy(Device[int32](nil), Device[int32](nil))
	assert.ErrorIs(t, err, driver.ErrClosed, "zero graph")
}
