package graph

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/driver"
)

// Nil and zero values are errors, never panics; these need no GPU.
func TestNilAndZeroValues(t *testing.T) {
	var g *Graph
	_, err := New(nil)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorIs(t, g.Close(), driver.ErrInvalidArgument)
	_, err = g.Empty()
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = g.KernelWith(nil, driver.LaunchConfig{})
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = g.Nodes()
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = g.Instantiate()
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = g.Clone()
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorIs(t, g.WriteDOT(&bytes.Buffer{}, 0), driver.ErrInvalidArgument)
	assert.ErrorIs(t, g.Batch(func() error { return nil }), driver.ErrInvalidArgument)
	assert.Nil(t, g.Context())

	zero := new(Graph)
	assert.NoError(t, zero.Close())
	_, err = zero.Empty()
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = zero.Edges()
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = zero.HostFunc(func() {})
	assert.ErrorIs(t, err, driver.ErrClosed)
	assert.ErrorIs(t, zero.AddEdge(Node{}, Node{}), driver.ErrClosed)

	var n Node
	assert.True(t, n.IsZero())
	_, err = n.Kind()
	assert.ErrorIs(t, err, ErrForeignNode)
	assert.ErrorIs(t, n.Destroy(), ErrForeignNode)
	_, err = n.Dependencies()
	assert.ErrorIs(t, err, ErrForeignNode)

	var x *Exec
	assert.ErrorIs(t, x.Launch(nil), driver.ErrNilStream)
	assert.ErrorIs(t, x.Close(), driver.ErrInvalidArgument)
	assert.ErrorIs(t, x.Err(), driver.ErrInvalidArgument)
	assert.NoError(t, new(Exec).Close())
	s := new(driver.Stream)
	assert.ErrorIs(t, new(Exec).Launch(s), driver.ErrClosed)
}

// Operands that cannot be right are refused when made, and the refusal is
// reported by the add without touching CUDA.
func TestOperandRefusals(t *testing.T) {
	for name, o := range map[string]Operand{
		"nil buffer":       Device((*driver.Buffer[int32])(nil)),
		"untyped nil":      Device[int32](nil),
		"nil host buffer":  Host[int32](nil),
		"empty slice":      Slice([]int32{}),
		"slice of pointer": Slice([]*int{nil}),
		"raw nil address":  RawHost(0, 4, nil),
		"raw no size":      RawDevice(0x1000, 0, nil),
	} {
		_, err := o.resolve("test", nil, false)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
	}
}

func TestKindNames(t *testing.T) {
	assert.Equal(t, "kernel", KindKernel.String())
	assert.Equal(t, "memory free", KindMemFree.String())
	assert.Equal(t, "Kind(99)", Kind(99).String())
	assert.Equal(t, "CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE", InstantiateInvalidStructure.String())
}
