package blasview

import (
	"math"
	"strconv"

	"github.com/purecuda/cuda/internal/cublasraw"
)

// GemmArgs are the arguments of a column-major cublas<t>gemm call, in its
// order. A and B name cuBLAS's operands: when Swapped, cuBLAS's A is the
// caller's B and cuBLAS's B the caller's A (OffA is then an offset into
// B's buffer, LDA B's leading dimension).
type GemmArgs struct {
	TransA, TransB   cublasraw.Operation
	M, N, K          int64
	LDA, LDB, LDC    int64
	OffA, OffB, OffC int64 // element offsets of the pointers passed as A, B and C
	Swapped          bool  // C is row-major: cuBLAS computes Cᵀ = op(B)ᵀ·op(A)ᵀ
	Needs64          bool  // a size or leading dimension exceeds 2^31-1: call the _64 API
}

// opDims is the shape of op(m): rows × cols.
func opDims(m *Matrix) (rows, cols int64) {
	if m.Op == NoTrans {
		return m.Rows, m.Cols
	}
	return m.Cols, m.Rows
}

// mapOp is the operation cuBLAS applies to the stored (column-major) matrix
// of m when the equation is solved in the layout of want: op(m) itself
// when m's layout is want's, else by the transpose identity the
// transposed operation. A conjugate transpose across layouts would need a
// conjugate without transpose, which cuBLAS lacks: refused (ErrShape).
func mapOp(fn, name string, m *Matrix, want Layout) (Op, *Error) {
	if m.Layout == want {
		return m.Op, nil
	}
	op, ok := m.Op.transposed()
	if !ok {
		return 0, refuse(ErrShape, fn, name, "a conjugate transpose of a %s view cannot be expressed with a %s result (cuBLAS has no conjugate-only operation): give both the same layout",
			layoutName(m.Layout), layoutName(want))
	}
	return op, nil
}

func layoutName(l Layout) string {
	if l == RowMajor {
		return "row-major"
	}
	return "column-major"
}

// gemmOperands are the checked operands of a product and its m, n, k.
type gemmOperands struct {
	m, n, k    int64
	va, vb, vc view
}

// gemmShape checks a, b, c as operands of C = op(A)·op(B) into o.
func gemmShape(fn string, a, b, c *Matrix, o *gemmOperands) *Error {
	var err *Error
	if o.va, err = checkMatrix(fn, "A", a); err != nil {
		return err
	}
	if o.vb, err = checkMatrix(fn, "B", b); err != nil {
		return err
	}
	if o.vc, err = checkMatrix(fn, "C", c); err != nil {
		return err
	}
	if c.Op != NoTrans {
		return refuse(ErrShape, fn, "C", "the result takes no operation (have %d)", c.Op)
	}
	m, k := opDims(a)
	kb, n := opDims(b)
	if kb != k {
		return refuse(ErrShape, fn, "B", "op(B) has %d rows but op(A) has %d columns (k)", kb, k)
	}
	if c.Rows != m {
		return refuse(ErrShape, fn, "C", "C has %d rows but op(A) has %d (m)", c.Rows, m)
	}
	if c.Cols != n {
		return refuse(ErrShape, fn, "C", "C has %d columns but op(B) has %d (n)", c.Cols, n)
	}
	o.m, o.n, o.k = m, n, k
	return nil
}

// gemmArgs maps checked operands to the column-major call, into g.
func gemmArgs(fn string, a, b, c *Matrix, o *gemmOperands, g *GemmArgs) *Error {
	opA, err := mapOp(fn, "A", a, c.Layout)
	if err != nil {
		return err
	}
	opB, err := mapOp(fn, "B", b, c.Layout)
	if err != nil {
		return err
	}
	*g = GemmArgs{LDC: c.LD, OffC: o.vc.off, K: o.k,
		Needs64: o.va.big || o.vb.big || o.vc.big || over32(o.m, o.n, o.k)}
	if c.Layout == ColMajor {
		g.TransA, g.TransB = opA.raw(), opB.raw()
		g.M, g.N = o.m, o.n
		g.LDA, g.LDB = a.LD, b.LD
		g.OffA, g.OffB = o.va.off, o.vb.off
	} else {
		// Cᵀ (n×m, column-major: C's storage) = op(B)ᵀ·op(A)ᵀ.
		g.Swapped = true
		g.TransA, g.TransB = opB.raw(), opA.raw()
		g.M, g.N = o.n, o.m
		g.LDA, g.LDB = b.LD, a.LD
		g.OffA, g.OffB = o.vb.off, o.va.off
	}
	return nil
}

// Gemm checks C(m×n) = alpha·op(A)(m×k)·op(B)(k×n) + beta·C and maps it to
// a column-major cublas<t>gemm call.
//
// A, B and C may have any layouts; A and B any operation, C none. m, n and
// k come from op(A) and C, and op(B) must agree (ErrShape, naming the
// operand and the dimension). A column-major C is computed as is, each
// operand's operation taken through the transpose identity when its layout
// differs from C's; a row-major C is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ, with A
// and B swapped. A conjugate transpose of an operand whose layout differs
// from C's would need a conjugate without transpose and is refused
// (ErrShape).
//
// C must not overlap A or B in memory (ErrAlias): exact for equal leading
// dimensions and element sizes, conservative otherwise (see Buffer).
// Zero-sized operands are allowed; with k = 0 cuBLAS only scales C.
func Gemm(a, b, c Matrix) (GemmArgs, error) {
	const fn = "Gemm"
	var o gemmOperands
	if err := gemmShape(fn, &a, &b, &c, &o); err != nil {
		return GemmArgs{}, err
	}
	if overlaps(o.vc.sp, o.va.sp) {
		return GemmArgs{}, refuse(ErrAlias, fn, "C", "C overlaps A in memory")
	}
	if overlaps(o.vc.sp, o.vb.sp) {
		return GemmArgs{}, refuse(ErrAlias, fn, "C", "C overlaps B in memory")
	}
	var g GemmArgs
	if err := gemmArgs(fn, &a, &b, &c, &o, &g); err != nil {
		return GemmArgs{}, err
	}
	return g, nil
}

// StridedArgs are a GemmStridedBatched call's arguments: the Gemm
// arguments of batch 0 and the strides, in cuBLAS's order (StrideA goes
// with cuBLAS's A: the caller's B when Swapped).
type StridedArgs struct {
	GemmArgs
	StrideA, StrideB, StrideC int64
	Count                     int64
}

// GemmStridedBatched checks count products C_i = alpha·op(A_i)·op(B_i) +
// beta·C_i, where X_i is the view x with its Offset advanced by i*strideX,
// and maps them to cublas<t>gemmStridedBatched.
//
// Batch 0 is checked as Gemm checks its operands. Then: count >= 0 and the
// strides >= 0 (ErrShape; a stride of 0 repeats one A or B for every
// batch); the last batch of each operand, its last element at
// Offset + (count-1)*stride + extent, lies in its buffer, overflow-checked
// (ErrOutOfBounds); the batches of C do not overlap each other: strideC is
// at least the span of one C, from its first to its last element
// (ErrAlias; conservative: interleaved batches are refused); and C's
// batches do not overlap A's or B's, compared as the intervals from each
// operand's first batch's first byte to its last batch's last byte
// (ErrAlias; conservative). With count 0 nothing is touched; with count 1
// it is a Gemm. A count beyond 2^31-1 needs the _64 API.
func GemmStridedBatched(a, b, c Matrix, strideA, strideB, strideC, count int64) (StridedArgs, error) {
	const fn = "GemmStridedBatched"
	if count < 0 {
		return StridedArgs{}, refuse(ErrShape, fn, "", "batch count %d is negative", count)
	}
	var o gemmOperands
	if err := gemmShape(fn, &a, &b, &c, &o); err != nil {
		return StridedArgs{}, err
	}
	va, vb, vc := o.va, o.vb, o.vc
	sa, err := batchSpan(fn, "A", a, va, strideA, count)
	if err != nil {
		return StridedArgs{}, err
	}
	sb, err := batchSpan(fn, "B", b, vb, strideB, count)
	if err != nil {
		return StridedArgs{}, err
	}
	sc, err := batchSpan(fn, "C", c, vc, strideC, count)
	if err != nil {
		return StridedArgs{}, err
	}
	if count > 1 && !vc.empty {
		one := vc.sp.end() - vc.sp.base
		e := max(c.Buf.Elem, 1)
		if strideC*e < one {
			return StridedArgs{}, refuse(ErrAlias, fn, "C", "stride %d is less than the span of one C (%d elements): batches of C would overlap", strideC, one/e)
		}
	}
	if overlaps(sc, sa) {
		return StridedArgs{}, refuse(ErrAlias, fn, "C", "the batches of C overlap those of A in memory")
	}
	if overlaps(sc, sb) {
		return StridedArgs{}, refuse(ErrAlias, fn, "C", "the batches of C overlap those of B in memory")
	}
	var g GemmArgs
	if err := gemmArgs(fn, &a, &b, &c, &o, &g); err != nil {
		return StridedArgs{}, err
	}
	out := StridedArgs{GemmArgs: g, StrideA: strideA, StrideB: strideB, StrideC: strideC, Count: count}
	if g.Swapped {
		out.StrideA, out.StrideB = strideB, strideA
	}
	out.Needs64 = out.Needs64 || over32(count)
	return out, nil
}

// batchSpan checks the last batch of x (batch 0 checked as v) and returns
// the interval of bytes from batch 0's first to the last batch's last, as
// a single segment (conservative).
func batchSpan(fn, name string, x Matrix, v view, stride, count int64) (span, *Error) {
	if stride < 0 {
		return span{}, refuse(ErrShape, fn, name, "stride %d is negative", stride)
	}
	if count == 0 || v.empty {
		return span{}, nil
	}
	shift, ok := mulOK(count-1, stride)
	e := max(x.Buf.Elem, 1)
	extent := (v.sp.end() - v.sp.base) / e // elements from the first to the last, inclusive
	var last int64
	if ok {
		last, ok = addOK(x.Offset, shift)
	}
	if ok {
		last, ok = addOK(last, extent-1)
	}
	if !ok {
		return span{}, refuse(ErrOutOfBounds, fn, name, "batch %d lies beyond 2^63 elements (stride %d)", count-1, stride)
	}
	if last >= x.Buf.Len {
		return span{}, refuse(ErrOutOfBounds, fn, name, "batch %d's last element at %d is past the end of its buffer of %d elements (stride %d)", count-1, last, x.Buf.Len, stride)
	}
	return span{base: v.sp.base, seg: (last - x.Offset + 1) * e, count: 1}, nil
}

// GemmBatched checks a batch of products C[i] = alpha·op(A[i])·op(B[i]) +
// beta·C[i] for cublas<t>gemmBatched, whose pointer arrays share one m, n,
// k, operations and leading dimensions. The three slices have one length,
// the batch count (ErrShape). Every view is checked as Gemm checks it, its
// refusal naming it ("A[3]"); every A[i], B[i], C[i] must have batch 0's
// shape, layout, operation and leading dimension (ErrShape). No C[i]
// overlaps another C[j], nor any A[j] or B[j], of any batch: batches run
// concurrently (ErrAlias, exact as Gemm's check). The result holds the
// call's arguments and each batch's element offsets, in cuBLAS's order
// (OffA[i] is into B[i]'s buffer when Swapped); its GemmArgs' offsets are
// batch 0's. An empty batch is accepted and touches nothing.
func GemmBatched(as, bs, cs []Matrix) (BatchedArgs, error) {
	const fn = "GemmBatched"
	out, spans, err := batched(fn, as, bs, cs, 0)
	if err != nil {
		return BatchedArgs{}, err
	}
	if err := batchAliases(fn, spans); err != nil {
		return BatchedArgs{}, err
	}
	return out, nil
}

// batched checks one batch (GemmBatched's, or a group of GemmGrouped's
// whose problems are numbered from first) and returns its arguments and
// its operands' spans for the alias sweep; errors name the operands by
// their number.
func batched(fn string, as, bs, cs []Matrix, first int) (BatchedArgs, []batchItem, *Error) {
	if len(as) != len(bs) || len(as) != len(cs) {
		return BatchedArgs{}, nil, refuse(ErrShape, fn, "", "%d A, %d B and %d C views: one per batch of each", len(as), len(bs), len(cs))
	}
	count := int64(len(as))
	out := BatchedArgs{Count: count, OffA: make([]int64, count), OffB: make([]int64, count), OffC: make([]int64, count)}
	if count == 0 {
		return out, nil, nil
	}
	spans := make([]batchItem, 0, 3*count)
	for i := range as {
		var o gemmOperands
		var g GemmArgs
		err := gemmShape(fn, &as[i], &bs[i], &cs[i], &o)
		if err == nil {
			err = gemmArgs(fn, &as[i], &bs[i], &cs[i], &o, &g)
		}
		if err != nil {
			err.Operand = indexed(err.Operand, first+i)
			return BatchedArgs{}, nil, err
		}
		if i == 0 {
			out.GemmArgs = g
		} else if err := sameBatch(fn, i, first, as, bs, cs); err != nil {
			return BatchedArgs{}, nil, err
		}
		out.OffA[i], out.OffB[i], out.OffC[i] = g.OffA, g.OffB, g.OffC
		spans = append(spans, batchItem{o.va.sp, 'A', first + i}, batchItem{o.vb.sp, 'B', first + i}, batchItem{o.vc.sp, 'C', first + i})
	}
	out.Needs64 = out.Needs64 || count > math.MaxInt32
	return out, spans, nil
}

// Group is one group of a grouped GEMM: its A, B and C views, one per
// problem, all of one shape, layout, operation and leading dimension.
type Group struct {
	A, B, C []Matrix
}

// GemmGrouped checks the groups of a grouped GEMM
// (cublas<t>gemmGroupedBatched): each group as GemmBatched checks a batch,
// its problems numbered across the groups in order (the refusal of group
// 1's first A, after a group of 3, names "A[3]"). No C of any problem
// overlaps another problem's C, A or B, in any group: all run at once
// (ErrAlias). The result is each group's arguments; Needs64 is set on all
// of them when any group needs the 64-bit call, or when the problems
// number more than 2^31-1.
func GemmGrouped(groups []Group) ([]BatchedArgs, error) {
	const fn = "GemmGrouped"
	out := make([]BatchedArgs, len(groups))
	var spans []batchItem
	first, big := 0, false
	for gi, g := range groups {
		args, sp, err := batched(fn, g.A, g.B, g.C, first)
		if err != nil {
			if err.Operand == "" {
				err.Operand = "group " + strconv.Itoa(gi)
			}
			return nil, err
		}
		out[gi] = args
		spans = append(spans, sp...)
		first += len(g.A)
		big = big || args.Needs64
	}
	if err := batchAliases(fn, spans); err != nil {
		return nil, err
	}
	if big || first > math.MaxInt32 {
		for i := range out {
			out[i].Needs64 = true
		}
	}
	return out, nil
}

// BatchedArgs are a GemmBatched call's arguments: the shared ones (with
// batch 0's offsets) and every batch's element offsets, in cuBLAS's order.
type BatchedArgs struct {
	GemmArgs
	Count            int64
	OffA, OffB, OffC []int64
}
