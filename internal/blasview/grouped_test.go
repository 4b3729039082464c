package blasview_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bv "github.com/purecuda/cuda/internal/blasview"
)

// TestGemmGrouped: each group is a batch of its own shape and layout; the
// problems are numbered across the groups in refusals; no C overlaps
// another problem's operands in any group.
func TestGemmGrouped(t *testing.T) {
	g0 := bv.Group{ // two 2×2 = 2×3·3×2 products, column-major
		A: []bv.Matrix{col(0, 20, 0, 2, 3, 2), col(0, 20, 6, 2, 3, 2)},
		B: []bv.Matrix{col(1, 20, 0, 3, 2, 3), col(1, 20, 9, 3, 2, 3)},
		C: []bv.Matrix{col(2, 20, 0, 2, 2, 2), col(2, 20, 4, 2, 2, 2)},
	}
	g1 := bv.Group{ // one row-major 3×1 = 3×2·2×1 product
		A: []bv.Matrix{row(3, 20, 0, 3, 2, 2)},
		B: []bv.Matrix{row(4, 20, 0, 2, 1, 1)},
		C: []bv.Matrix{row(5, 20, 0, 3, 1, 1)},
	}
	got, err := bv.GemmGrouped([]bv.Group{g0, g1})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, int64(2), got[0].Count)
	assert.Equal(t, []int64{0, 4}, got[0].OffC)
	assert.False(t, got[0].Swapped)
	assert.Equal(t, int64(1), got[1].Count)
	assert.True(t, got[1].Swapped, "a row-major C computes the transposed problem")
	assert.Equal(t, int64(1), got[1].M)
	assert.Equal(t, int64(3), got[1].N)

	// Empty: no groups, or an empty group among others.
	got, err = bv.GemmGrouped(nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = bv.GemmGrouped([]bv.Group{{}, g1})
	require.NoError(t, err)
	assert.Zero(t, got[0].Count)

	// Refusals name the problem by its number across the groups.
	bad := g1
	bad.A = []bv.Matrix{row(3, 5, 0, 3, 2, 2)} // past the end of 5 elements
	_, err = bv.GemmGrouped([]bv.Group{g0, bad})
	refused(t, err, bv.ErrOutOfBounds, "A[2]", "")
	mixed := g0
	mixed.B = []bv.Matrix{g0.B[0], col(1, 20, 9, 3, 2, 4)}
	_, err = bv.GemmGrouped([]bv.Group{g1, mixed})
	refused(t, err, bv.ErrShape, "B[2]", "but B[1]'s is 3")
	uneven := g0
	uneven.C = g0.C[:1]
	_, err = bv.GemmGrouped([]bv.Group{g1, uneven})
	refused(t, err, bv.ErrShape, "group 1", "2 A, 2 B and 1 C views")

	// A C of one group over another group's operand.
	clash := g1
	clash.C = []bv.Matrix{row(1, 20, 0, 3, 1, 1)} // over g0's B[0] (region 1)
	_, err = bv.GemmGrouped([]bv.Group{g0, clash})
	refused(t, err, bv.ErrAlias, "C[2]", "B[0]")
	twice := g1
	twice.C = []bv.Matrix{row(2, 20, 0, 3, 1, 1)} // over g0's C[0]
	_, err = bv.GemmGrouped([]bv.Group{g0, twice})
	require.ErrorIs(t, err, bv.ErrAlias)
}

// TestGemmGroupedNeeds64: one group needing the 64-bit call makes every
// group's arguments 64-bit (one call serves them all).
func TestGemmGroupedNeeds64(t *testing.T) {
	huge := int64(math.MaxInt32) + 1
	big := bv.Group{
		A: []bv.Matrix{col(0, huge, 0, 1, 1, huge)},
		B: []bv.Matrix{col(1, 1, 0, 1, 1, 1)},
		C: []bv.Matrix{col(2, 1, 0, 1, 1, 1)},
	}
	small := bv.Group{
		A: []bv.Matrix{col(3, 1, 0, 1, 1, 1)},
		B: []bv.Matrix{col(4, 1, 0, 1, 1, 1)},
		C: []bv.Matrix{col(5, 1, 0, 1, 1, 1)},
	}
	got, err := bv.GemmGrouped([]bv.Group{small, big})
	require.NoError(t, err)
	assert.True(t, got[0].Needs64)
	assert.True(t, got[1].Needs64)
	got, err = bv.GemmGrouped([]bv.Group{small})
	require.NoError(t, err)
	assert.False(t, got[0].Needs64)
}
