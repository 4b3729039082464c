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
