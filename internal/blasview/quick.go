package blasview

// QuickGemm is Gemm for the common case, checked in a few instructions
// with no call: operands whose every size is below 2^31 and every sum
// below 2^63 by construction, so no product or sum needs an overflow
// check. It reports true, with g set to exactly what Gemm returns, only
// when Gemm accepts the operands; otherwise false (g undefined), and the
// caller calls Gemm, which decides and explains. A fuzz test holds it to
// that.
//
// The common case: each of A, B and C has a known layout, 1 to 2^31-1
// rows and columns, a leading dimension from its stored rows to 2^31-1,
// an offset below 2^31 and its last element in its buffer; buffers have
// fewer than 2^40 elements of 1 to 16 bytes, at addresses below 2^56;
// A's and B's operations are NoTrans or Trans, C's NoTrans; op(A), op(B)
// and C agree in shape; and C's bytes, from its first to its last, lie
// apart from A's and from B's.
func QuickGemm(a, b, c *Matrix, g *GemmArgs) bool {
	alo, ahi, ok1 := quickExtent(a)
	blo, bhi, ok2 := quickExtent(b)
	clo, chi, ok3 := quickExtent(c)
	if !(ok1 && ok2 && ok3) || a.Op > Trans || b.Op > Trans || c.Op != NoTrans ||
		(clo < ahi && alo < chi) || (clo < bhi && blo < chi) {
		return false
	}
	m, k := a.Rows, a.Cols
	if a.Op == Trans {
		m, k = k, m
	}
	kb, n := b.Rows, b.Cols
	if b.Op == Trans {
		kb, n = n, kb
	}
	if kb != k || c.Rows != m || c.Cols != n {
		return false
	}
	// An operand's operation as cuBLAS applies it to the stored matrix
	// in C's layout: the transpose identity flips it across layouts.
	opA, opB := a.Op, b.Op
	if a.Layout != c.Layout {
		opA ^= Trans
	}
	if b.Layout != c.Layout {
		opB ^= Trans
	}
	*g = GemmArgs{K: k, LDC: c.LD, OffC: c.Offset}
	if c.Layout == ColMajor {
		g.TransA, g.TransB = opA.raw(), opB.raw()
		g.M, g.N = m, n
		g.LDA, g.LDB = a.LD, b.LD
		g.OffA, g.OffB = a.Offset, b.Offset
	} else {
		g.Swapped = true
		g.TransA, g.TransB = opB.raw(), opA.raw()
		g.M, g.N = n, m
		g.LDA, g.LDB = b.LD, a.LD
		g.OffA, g.OffB = b.Offset, a.Offset
	}
	return true
}

// quickMax bounds QuickGemm's sizes, leading dimensions and offsets.
const quickMax = 1<<31 - 1

// quickExtent is the bytes [lo, hi) from m's first element to one past its
// last, when m is a common-case operand of QuickGemm (ok).
func quickExtent(m *Matrix) (lo, hi int64, ok bool) {
	sr, sc := m.Rows, m.Cols
	if m.Layout == RowMajor {
		sr, sc = sc, sr
	} else if m.Layout != ColMajor {
		return 0, 0, false
	}
	e := m.Buf.Elem
	// Unsigned comparisons: a negative value is huge.
	if uint64(sr-1) >= quickMax || uint64(sc-1) >= quickMax || uint64(m.LD) > quickMax || m.LD < sr ||
		uint64(m.Offset) >= 1<<31 || uint64(m.Buf.Len) >= 1<<40 || uint64(e-1) >= 16 || m.Buf.Addr >= 1<<56 {
		return 0, 0, false
	}
	last := m.Offset + (sc-1)*m.LD + sr - 1 // below 2^31 + 2^62 + 2^31
	if last >= m.Buf.Len {
		return 0, 0, false
	}
	return int64(m.Buf.Addr) + m.Offset*e, int64(m.Buf.Addr) + (last+1)*e, true
}
