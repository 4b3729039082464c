package hostfn

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Invariant I5: the id layout round-trips slot index and generation for
// this platform's uintptr, never yields 0, and a generation that wraps
// still gives a valid id (on 32-bit platforms the generation has 12 bits).
func TestIDLayout_I5(t *testing.T) {
	require.Equal(t, ptrBits, idxBits+genBits)
	for _, idx := range []int{0, 1, 2, 1000, maxSlot} {
		for _, gen := range []uint32{0, 1, 2, genMask - 1, genMask} {
			id := makeID(idx, gen)
			require.NotZero(t, id)
			gi, gg := splitID(id)
			assert.Equal(t, idx, gi)
			assert.Equal(t, gen, gg)
			assert.NotEqual(t, id, makeID(idx, (gen+1)&genMask), "another generation, another id")
		}
	}
	i, _ := splitID(0)
	assert.Equal(t, -1, i, "0 names no slot")

	// A slot's generation wraps without reaching an id of another slot.
	var m Map[int]
	id0 := m.Put(0)
	m.slots[0].gen = genMask
	require.True(t, m.Delete(id0) == false, "the stored generation no longer matches id0")
	m.slots[0].used = false
	m.free = append(m.free, 0)
	m.live--
	a := m.Put(1)
	idx, gen := splitID(a)
	require.Equal(t, 0, idx)
	require.Equal(t, uint32(genMask), gen)
	require.True(t, m.Delete(a))
	b := m.Put(2)
	idx, gen = splitID(b)
	assert.Equal(t, 0, idx)
	assert.Equal(t, uint32(0), gen, "the generation wraps to 0")
	assert.NotZero(t, b)
	_, ok := m.Get(a)
	assert.False(t, ok)
}
