package driver

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// universalDims is the launch shape every CUDA 13 device allows, written
// out plainly (no unsigned tricks): what quickDims may accept at most.
func universalDims(grid GridDim, block BlockDim) bool {
	in := func(v, lo, hi int) bool { return v >= lo && v <= hi }
	return in(grid.X, 1, 1<<31-1) && in(grid.Y, 1, 65535) && in(grid.Z, 1, 65535) &&
		in(block.X, 1, 1024) && in(block.Y, 1, 1024) && in(block.Z, 1, 64) &&
		block.X*block.Y*block.Z <= 1024
}

// quickDims, the shape check of Launch's quick paths, accepts only shapes
// every device allows (so the quick paths never launch what checkDims
// refuses), exactly the documented range (grid y and z up to 32768), and
// its unsigned arithmetic does not wrap for extreme or negative values.
func TestQuickDimsAcceptsOnlyUniversalShapes(t *testing.T) {
	var vals []int
	for _, v := range []int64{math.MinInt64, math.MinInt32, math.MinInt32 + 1, -1 << 32, -65536, -2, -1, 0, 1, 2, 63, 64, 65,
		1023, 1024, 1025, 32767, 32768, 32769, 65535, 65536, 1<<31 - 2, 1<<31 - 1, 1 << 31, 1<<32 + 1, math.MaxInt64 - 1, math.MaxInt64} {
		if int64(int(v)) == v { // those an int holds here
			vals = append(vals, int(v))
		}
	}
	vals = append(vals, math.MinInt, math.MinInt+1, math.MaxInt-1, math.MaxInt)
	d := &dimLimits{maxThreads: 1024, maxBlock: [3]int32{1024, 1024, 64}, maxGrid: [3]int32{1<<31 - 1, 65535, 65535}}
	for _, v := range vals {
		for axis := range 6 {
			g, b := GridDim{1, 1, 1}, BlockDim{1, 1, 1}
			switch axis {
			case 0:
				g.X = v
			case 1:
				g.Y = v
			case 2:
				g.Z = v
			case 3:
				b.X = v
			case 4:
				b.Y = v
			case 5:
				b.Z = v
			}
			q, u := quickDims(g, b), universalDims(g, b)
			if q && !u {
				t.Errorf("quickDims accepts %v × %v, which not every device allows", g, b)
			}
			want := u && g.Y <= 32768 && g.Z <= 32768
			assert.Equal(t, want, q, "quickDims(%v, %v)", g, b)
			assert.Equal(t, u, checkDims("L", d, g, b) == nil, "checkDims(%v, %v) with the universal limits", g, b)
		}
	}
	// Products: each dimension in range, the block too large; and wide
	// values whose product would wrap if it were computed first.
	for _, b := range []BlockDim{{1024, 2, 1}, {32, 32, 2}, {2, 1024, 1}, {1, 1, 64}, {16, 1, 64}, {math.MaxInt, math.MaxInt, 4}, {math.MinInt, math.MinInt, 1}} {
		assert.Equal(t, universalDims(Grid(1), b), quickDims(Grid(1), b), "block %v", b)
	}
}
