package driver

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRangeBasesLieInsideTheObject: every address registerGaps hands to
// CUDA lies inside the registered object, never on the part of its first
// page before it (which may hold a free object the garbage collector must
// not see a pointer to), whatever the object's offset and size.
func TestRangeBasesLieInsideTheObject(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		p := uintptr(1<<30) + uintptr(r.IntN(1<<20))
		n := uintptr(1 + r.IntN(1<<16))
		start, end := p&^(pageSize-1), (p+n+pageSize-1)&^(pageSize-1)
		gaps := [][2]uintptr{{start, end}}
		if k := (end - start) / pageSize; k > 2 { // a range in the middle is registered already
			mid := start + pageSize*uintptr(1+r.IntN(int(k-2)))
			gaps = [][2]uintptr{{start, mid}, {mid + pageSize, end}}
		}
		for _, g := range gaps {
			base := rangeBase(p, g)
			if !assert.True(t, base >= p && base < p+n, "object [%#x, %#x), gap [%#x, %#x): base %#x", p, p+n, g[0], g[1], base) {
				return
			}
			assert.Equal(t, g[0], base&^(pageSize-1), "the base is on the gap's first page")
		}
	}
}

// TestUncoveredAndOverlapping: the gaps of a span between registered
// ranges, and the ranges that overlap it, against a list made by hand.
func TestUncoveredAndOverlapping(t *testing.T) {
	hostRegs.mu.Lock()
	saved := hostRegs.ranges
	pg := pageSize
	hostRegs.ranges = nil
	insertRanges([]*hostRange{{start: 8 * pg, end: 10 * pg}, {start: 2 * pg, end: 3 * pg}, {start: 5 * pg, end: 6 * pg}})
	defer func() { hostRegs.ranges = saved; hostRegs.n.Store(int64(len(saved))); hostRegs.mu.Unlock() }()

	starts := func(rs []*hostRange) (s []uintptr) {
		for _, r := range rs {
			s = append(s, r.start/pg)
		}
		return s
	}
	assert.Equal(t, []uintptr{2, 5, 8}, starts(hostRegs.ranges), "kept sorted")
	for _, c := range []struct {
		from, to uintptr
		gaps     [][2]uintptr
		over     []uintptr
	}{
		{0, 2, [][2]uintptr{{0, 2}}, nil},
		{0, 12, [][2]uintptr{{0, 2}, {3, 5}, {6, 8}, {10, 12}}, []uintptr{2, 5, 8}},
		{2, 3, nil, []uintptr{2}},
		{3, 5, [][2]uintptr{{3, 5}}, nil},
		{9, 11, [][2]uintptr{{10, 11}}, []uintptr{8}},
		{5, 9, [][2]uintptr{{6, 8}}, []uintptr{5, 8}},
	} {
		var want [][2]uintptr
		for _, g := range c.gaps {
			want = append(want, [2]uintptr{g[0] * pg, g[1] * pg})
		}
		assert.Equal(t, want, uncovered(c.from*pg, c.to*pg), "gaps of [%d, %d)", c.from, c.to)
		assert.Equal(t, c.over, starts(overlapping(c.from*pg, c.to*pg)), "ranges over [%d, %d)", c.from, c.to)
	}
}
