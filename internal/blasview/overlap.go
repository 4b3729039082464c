package blasview

// span is the set of bytes a view touches: count segments of seg bytes,
// the j-th at base + j*stride (a matrix: its stored columns; a vector: its
// elements). stride is unused (0) when count is 1. Every byte of a checked
// view's span lies in its buffer, so base + (count-1)*stride + seg fits in
// int64.
type span struct {
	base, seg, stride, count int64
}

func (s span) empty() bool { return s.count <= 0 || s.seg <= 0 }

// end is one past the last byte of s.
func (s span) end() int64 { return s.base + (s.count-1)*s.stride + s.seg }

// overlaps reports whether a and b share a byte.
//
// It is exact when both have the same stride (two matrices with the same
// leading dimension and element size, two vectors with the same |inc|) or
// one of them is a single segment (a single column, a contiguous vector):
// segment j of a meets segment k of b exactly when, with D = a.base -
// b.base, L the stride and d = k - j in [-(a.count-1), b.count-1],
//
//	D - b.seg < d*L < D + a.seg,
//
// and whether an integer d in range satisfies it is a division away.
// Otherwise it is conservative: it compares the intervals from each span's
// first byte to its last, and may report views that interleave without
// touching (a matrix and a vector with other strides, say) as overlapping.
func overlaps(a, b span) bool {
	if a.empty() || b.empty() || a.base >= b.end() || b.base >= a.end() {
		return false // apart: the common case, decided without a division
	}
	la, lb := a.stride, b.stride
	if a.count == 1 {
		la = lb
	}
	if b.count == 1 {
		lb = la
	}
	if la != lb {
		return true // the intervals meet
	}
	l := max(la, 1) // both single segments: only d = 0 counts, any l works
	lo := floorDiv(a.base-(b.base+b.seg), l) + 1
	hi := ceilDiv((a.base+a.seg)-b.base, l) - 1
	lo = max(lo, -(a.count - 1))
	hi = min(hi, b.count-1)
	return lo <= hi
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// same reports whether a and b touch exactly the same bytes in the same
// order of segments: the same view.
func same(a, b span) bool {
	if a.empty() || b.empty() {
		return a.empty() && b.empty()
	}
	if a.count == 1 || b.count == 1 {
		return a.count == b.count && a.base == b.base && a.seg == b.seg
	}
	return a == b
}
