package graph

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// countingOwner counts its releases.
type countingOwner struct{ n atomic.Int32 }

func (c *countingOwner) Release() error { c.n.Add(1); return nil }

// A Raw operand's owner is taken "also when the add fails": every refusal,
// also those made before Operand.resolve runs (nil graph, bad element size
// or value, a bad other operand in Memcpy, nil Exec), releases it exactly
// once, so the owner never leaks.
func TestRawOwnerReleasedOnEveryRefusal(t *testing.T) {
	var nilGraph *Graph
	var nilExec *Exec
	zero := new(Graph)
	cases := map[string]func(o release.Owner){
		"nil graph Memset":      func(o release.Owner) { _, _ = nilGraph.Memset(RawDevice(0x1000, 16, o), 0, 4) },
		"Memset element size 3": func(o release.Owner) { _, _ = zero.Memset(RawDevice(0x1000, 16, o), 0, 3) },
		"Memset value too big":  func(o release.Owner) { _, _ = zero.Memset(RawDevice(0x1000, 16, o), 0x1ff, 1) },
		"nil graph Memcpy":      func(o release.Owner) { _, _ = nilGraph.Memcpy(RawDevice(0x1000, 16, o), RawDevice(0x2000, 16, nil)) },
		"Memcpy bad dst, raw src": func(o release.Owner) {
			_, _ = zero.Memcpy(Slice([]int32{}), RawDevice(0x2000, 16, o))
		},
		"nil Exec SetMemset": func(o release.Owner) { _ = nilExec.SetMemset(Node{}, RawDevice(0x1000, 16, o), 0, 4) },
		"Exec SetMemset element size 3": func(o release.Owner) {
			_ = new(Exec).SetMemset(Node{}, RawDevice(0x1000, 16, o), 0, 3)
		},
		"nil Exec SetMemcpy": func(o release.Owner) {
			_ = nilExec.SetMemcpy(Node{}, RawDevice(0x1000, 16, o), RawDevice(0x2000, 16, nil))
		},
		"Exec SetMemcpy bad dst, raw src": func(o release.Owner) {
			_ = new(Exec).SetMemcpy(Node{}, Slice([]int32{}), RawDevice(0x2000, 16, o))
		},
	}
	for name, f := range cases {
		o := new(countingOwner)
		f(o)
		assert.EqualValues(t, 1, o.n.Load(), "%s: the Raw operand's owner must be released exactly once", name)
	}
}

// An Operand is a value that looks reusable, and a Raw operand carries its
// owner: reusing it, in a second add (or refused add) or on both sides of
// one copy, releases that owner at most once. A lifetime.Ref owner released
// twice would drop a reference that belongs to someone else, destroying the
// object while its owner still uses it.
func TestRawOperandReuseReleasesOwnerOnce(t *testing.T) {
	var obj lifetime.Object
	destroyed := false
	obj.Init(func() error { destroyed = true; return nil }) // the user's own reference
	ref, ok := obj.Hold()                                   // the one handed to the graph
	require.True(t, ok)
	op := RawDevice(0x1000, 16, ref)

	zero := new(Graph) // every add fails, after resolving the operand
	_, err := zero.Memset(op, 0, 4)
	require.Error(t, err)
	_, err = zero.Memset(op, 0, 4) // the same operand again
	require.Error(t, err)
	assert.False(t, destroyed, "reusing a Raw operand released its owner twice, destroying an object whose owner never let go")
	assert.EqualValues(t, 1, obj.Refs(), "only the user's own reference should be left")

	// The same in one call: the operand on both sides of a copy.
	c := new(countingOwner)
	both := RawDevice(0x1000, 16, c)
	_, _ = zero.Memcpy(both, both)
	assert.LessOrEqual(t, c.n.Load(), int32(1), "an owner given once is released at most once")
}
