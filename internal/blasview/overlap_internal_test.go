package blasview

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bytesOf enumerates the bytes of s.
func bytesOf(s span) map[int64]bool {
	out := map[int64]bool{}
	for j := range s.count {
		for b := range s.seg {
			out[s.base+j*s.stride+b] = true
		}
	}
	return out
}

func TestOverlapsAgainstEnumeration(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	randSpan := func() span {
		s := span{base: r.Int64N(40), seg: r.Int64N(5), count: r.Int64N(5)}
		if s.count > 1 {
			s.stride = s.seg + r.Int64N(6)
			if r.IntN(3) == 0 {
				s.stride = 4 // often the same stride on both sides: the exact case
			}
			s.stride = max(s.stride, s.seg, 1)
		}
		return s
	}
	exact, conservative := 0, 0
	for range 200000 {
		a, b := randSpan(), randSpan()
		truth := false
		bb := bytesOf(b)
		for x := range bytesOf(a) {
			truth = truth || bb[x]
		}
		got := overlaps(a, b)
		require.Equal(t, got, overlaps(b, a), "symmetric: %+v %+v", a, b)
		if a.stride == b.stride || a.count <= 1 || b.count <= 1 {
			exact++
			require.Equal(t, truth, got, "exact case %+v %+v", a, b)
		} else {
			conservative++
			if truth {
				require.True(t, got, "a real overlap missed: %+v %+v", a, b)
			}
		}
	}
	assert.Greater(t, exact, 10000)
	assert.Greater(t, conservative, 10000)
}

func TestSame(t *testing.T) {
	a := span{base: 8, seg: 4, stride: 6, count: 3}
	assert.True(t, same(a, a))
	assert.False(t, same(a, span{base: 8, seg: 4, stride: 7, count: 3}))
	assert.True(t, same(span{base: 1, seg: 2, count: 1}, span{base: 1, seg: 2, count: 1, stride: 9}))
	assert.True(t, same(span{}, span{base: 3}))
	assert.False(t, same(span{}, a))
}
