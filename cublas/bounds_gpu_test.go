package cublas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
)

// TestGPUOutOfBoundsRefused: on a real handle, views that would reach
// past their buffer by each dimension, a leading dimension, an offset, an
// increment, a stride or the batch count, and shapes cuBLAS would read
// wrongly, are refused before cuBLAS is called: the error matches its kind
// and driver.ErrInvalidArgument, names the routine and the operand, and
// the output's buffer is untouched (nothing was queued). The buffers are
// packed: each view that fits ends on its buffer's last element.
func TestGPUOutOfBoundsRefused(t *testing.T) {
	g := newGPU(t, nil)
	const m, n, k = 8, 6, 5
	// buf is a new buffer of size elements 1, 2, 3, …
	buf := func(size int) *driver.Buffer[float32] {
		host := make([]float32, size)
		for i := range host {
			host[i] = float32(i + 1)
		}
		return upload(t, g, host)
	}
	col := func(b *driver.Buffer[float32], rows, cols int) cublas.Matrix[float32] {
		return cublas.ColMajorMatrix(b, rows, cols)
	}
	vec := func(b *driver.Buffer[float32], size, inc int) cublas.Vector[float32] {
		return cublas.Vector[float32]{Buf: b, N: size, Inc: inc}
	}
	a, b := buf(m*k), buf(k*n)
	A, B := col(a, m, k), col(b, k, n)
	withLD := func(x cublas.Matrix[float32], ld int) cublas.Matrix[float32] { x.LD = ld; return x }
	withOff := func(x cublas.Matrix[float32], off int) cublas.Matrix[float32] { x.Offset = off; return x }
	const count = 3
	sa, sb := buf(count*m*k), buf(count*k*n)
	half := upload(t, g, make([]cublas.Half, m*k-1))
	halfB := upload(t, g, make([]cublas.Half, k*n))
	i8a, i8b := upload(t, g, make([]int8, 8*8)), upload(t, g, make([]int8, 8*8))

	type refusal struct {
		name        string
		op, operand string
		kind        error
		// call makes the refused call with out (outLen float32s) or
		// out32 (i32Ln int32s) as its output, which must not change.
		call          func(out *driver.Buffer[float32], out32 *driver.Buffer[int32]) error
		outLen, i32Ln int
	}
	cases := []refusal{
		{name: "A's rows (m)", op: "Gemm", operand: "A", kind: cublas.ErrOutOfBounds, outLen: (m + 1) * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, col(a, m+1, k), B, 0, col(c, m+1, n))
			}},
		{name: "B's columns (n)", op: "Gemm", operand: "B", kind: cublas.ErrOutOfBounds, outLen: m * (n + 1),
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, A, col(b, k, n+1), 0, col(c, m, n+1))
			}},
		{name: "the inner dimension (k)", op: "Gemm", operand: "A", kind: cublas.ErrOutOfBounds, outLen: m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, col(a, m, k+1), col(buf((k+1)*n), k+1, n), 0, col(c, m, n))
			}},
		{name: "C one element short", op: "Gemm", operand: "C", kind: cublas.ErrOutOfBounds, outLen: m*n - 1,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, A, B, 0, col(c, m, n))
			}},
		{name: "A's leading dimension past the end", op: "Gemm", operand: "A", kind: cublas.ErrOutOfBounds, outLen: m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, withLD(A, m+1), B, 0, col(c, m, n))
			}},
		{name: "B's leading dimension below its rows", op: "Gemm", operand: "B", kind: cublas.ErrShape, outLen: m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, A, withLD(B, k-1), 0, col(c, m, n))
			}},
		{name: "a row-major A's leading dimension", op: "Gemm", operand: "A", kind: cublas.ErrOutOfBounds, outLen: m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, withLD(cublas.RowMajorMatrix(a, m, k), k+1), B, 0, col(c, m, n))
			}},
		{name: "A's offset", op: "Gemm", operand: "A", kind: cublas.ErrOutOfBounds, outLen: m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, withOff(A, 1), B, 0, col(c, m, n))
			}},
		{name: "a negative offset", op: "Gemm", operand: "B", kind: cublas.ErrOutOfBounds, outLen: m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, A, withOff(B, -1), 0, col(c, m, n))
			}},
		{name: "a Sub block past the end", op: "Gemm", operand: "C", kind: cublas.ErrOutOfBounds, outLen: m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, col(a, m-1, k), B, 0, col(c, m, n).Sub(2, 0, m-1, n))
			}},
		{name: "C overlapping A", op: "Gemm", operand: "C", kind: cublas.ErrAlias, outLen: m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemm(g.h, 1, col(c, m, k), B, 0, col(c, m, n))
			}},
		{name: "A's stride", op: "GemmStridedBatched", operand: "A", kind: cublas.ErrOutOfBounds, outLen: count * m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.GemmStridedBatched(g.h, 1, col(sa, m, k), m*k+1, col(sb, k, n), k*n, 0, col(c, m, n), m*n, count)
			}},
		{name: "the batch count", op: "GemmStridedBatched", operand: "A", kind: cublas.ErrOutOfBounds, outLen: (count + 1) * m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.GemmStridedBatched(g.h, 1, col(sa, m, k), m*k, col(sb, k, n), k*n, 0, col(c, m, n), m*n, count+1)
			}},
		{name: "C's stride", op: "GemmStridedBatched", operand: "C", kind: cublas.ErrOutOfBounds, outLen: count * m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.GemmStridedBatched(g.h, 1, col(sa, m, k), m*k, col(sb, k, n), k*n, 0, col(c, m, n), m*n+1, count)
			}},
		{name: "a negative stride", op: "GemmStridedBatched", operand: "B", kind: cublas.ErrShape, outLen: count * m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.GemmStridedBatched(g.h, 1, col(sa, m, k), m*k, withOff(col(sb, k, n), (count-1)*k*n), -k*n, 0, col(c, m, n), m*n, count)
			}},
		{name: "a negative batch count", op: "GemmStridedBatched", kind: cublas.ErrShape, outLen: count * m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.GemmStridedBatched(g.h, 1, col(sa, m, k), m*k, col(sb, k, n), k*n, 0, col(c, m, n), m*n, -1)
			}},
		{name: "batches of C overlapping", op: "GemmStridedBatched", operand: "C", kind: cublas.ErrAlias, outLen: count * m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.GemmStridedBatched(g.h, 1, col(sa, m, k), m*k, col(sb, k, n), k*n, 0, col(c, m, n), m*n-1, count)
			}},
		{name: "Syrk's C", op: "Syrk", operand: "C", kind: cublas.ErrOutOfBounds, outLen: m*m - 1,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Syrk(g.h, cublas.Lower, 1, A, 0, col(c, m, m))
			}},
		{name: "Symm's A offset", op: "Symm", operand: "A", kind: cublas.ErrOutOfBounds, outLen: k * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Symm(g.h, cublas.Left, cublas.Upper, 1, withOff(col(buf(k*k), k, k), 1), B, 0, col(c, k, n))
			}},
		{name: "Trsm's B leading dimension", op: "Trsm", operand: "B", kind: cublas.ErrOutOfBounds, outLen: k * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Trsm(g.h, cublas.Left, cublas.Upper, cublas.NonUnit, 1, col(buf(k*k), k, k), withLD(col(c, k, n), k+1))
			}},
		{name: "Trmm's C", op: "Trmm", operand: "C", kind: cublas.ErrOutOfBounds, outLen: k*n - 1,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Trmm(g.h, cublas.Left, cublas.Upper, cublas.NonUnit, 1, col(buf(k*k), k, k), B, col(c, k, n))
			}},
		{name: "Gemv's x length", op: "Gemv", operand: "x", kind: cublas.ErrOutOfBounds, outLen: m,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemv(g.h, 1, col(buf(m*(k+1)), m, k+1), vec(buf(k), k+1, 1), 0, vec(c, m, 1))
			}},
		{name: "Gemv's y increment", op: "Gemv", operand: "y", kind: cublas.ErrOutOfBounds, outLen: m,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Gemv(g.h, 1, A, vec(buf(k), k, 1), 0, vec(c, m, 2))
			}},
		{name: "Ger's A leading dimension", op: "Ger", operand: "A", kind: cublas.ErrOutOfBounds, outLen: m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Ger(g.h, 1, vec(buf(m), m, 1), vec(buf(n), n, 1), withLD(col(c, m, n), m+1))
			}},
		{name: "Trsv's x offset", op: "Trsv", operand: "x", kind: cublas.ErrOutOfBounds, outLen: k,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Trsv(g.h, cublas.Lower, cublas.NonUnit, col(buf(k*k), k, k), cublas.Vector[float32]{Buf: c, Offset: 1, N: k, Inc: 1})
			}},
		{name: "Axpy's y increment", op: "Axpy", operand: "y", kind: cublas.ErrOutOfBounds, outLen: n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Axpy(g.h, 1, vec(buf(n), n, 1), vec(c, n, -2))
			}},
		{name: "Copy's x length", op: "Copy", operand: "x", kind: cublas.ErrOutOfBounds, outLen: n + 1,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Copy(g.h, vec(buf(n), n+1, 1), vec(c, n+1, 1))
			}},
		{name: "Scal's negative increment", op: "Scal", operand: "x", kind: cublas.ErrShape, outLen: n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Scal(g.h, 2, vec(c, n, -1))
			}},
		{name: "DotTo's result offset", op: "DotTo", operand: "result", kind: cublas.ErrOutOfBounds, outLen: 1,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.DotTo(g.h, vec(buf(n), n, 1), vec(buf(n), n, 1), cublas.Vector[float32]{Buf: c, Offset: 1, N: 1})
			}},
		{name: "Nrm2To's result offset", op: "Nrm2To", operand: "result", kind: cublas.ErrOutOfBounds, outLen: 2,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.Nrm2To(g.h, vec(buf(n), n, 1), cublas.Vector[float32]{Buf: c, Offset: 2, N: 1})
			}},
		{name: "IamaxTo's negative result offset", op: "IamaxTo", operand: "result", kind: cublas.ErrOutOfBounds, i32Ln: 1,
			call: func(_ *driver.Buffer[float32], r *driver.Buffer[int32]) error {
				return cublas.IamaxTo(g.h, vec(buf(n), n, 1), cublas.Vector[int32]{Buf: r, Offset: -1, N: 1})
			}},
		{name: "GemmEx's Half A", op: "GemmEx", operand: "A", kind: cublas.ErrOutOfBounds, outLen: m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.GemmEx(g.h, 1, cublas.ColMajorMatrix(half, m, k), cublas.ColMajorMatrix(halfB, k, n), 0, col(c, m, n), cublas.Compute32F)
			}},
		{name: "GemmEx's int8 B offset", op: "GemmEx", operand: "B", kind: cublas.ErrOutOfBounds, i32Ln: 64,
			call: func(_ *driver.Buffer[float32], r *driver.Buffer[int32]) error {
				bv := cublas.ColMajorMatrix(i8b, 8, 8)
				bv.Offset = 4
				return cublas.GemmEx(g.h, 1, cublas.ColMajorMatrix(i8a, 8, 8).T(), bv, 0, cublas.ColMajorMatrix(r, 8, 8), cublas.Compute32I)
			}},
		{name: "GemmStridedBatchedEx's batch count", op: "GemmStridedBatchedEx", operand: "B", kind: cublas.ErrOutOfBounds, outLen: 2 * m * n,
			call: func(c *driver.Buffer[float32], _ *driver.Buffer[int32]) error {
				return cublas.GemmStridedBatchedEx(g.h, 1, cublas.ColMajorMatrix(halfB, k, n).T(), 0, cublas.ColMajorMatrix(halfB, k, n), k*n, 0, cublas.ColMajorMatrix(c, n, n), n*n, 2, cublas.Compute32F)
			}},
	}
	for _, tc := range cases {
		var out *driver.Buffer[float32]
		var out32 *driver.Buffer[int32]
		var before []float32
		var before32 []int32
		if tc.outLen > 0 {
			out = buf(tc.outLen)
			before = download(t, g, out)
		} else {
			out32 = upload(t, g, make([]int32, tc.i32Ln))
			before32 = download(t, g, out32)
		}
		err := tc.call(out, out32)
		if tc.operand == "" {
			assert.ErrorIs(t, err, tc.kind, tc.name)
			assert.ErrorIs(t, err, driver.ErrInvalidArgument, tc.name)
			assert.Contains(t, err.Error(), "cublas: "+tc.op+": ", tc.name)
			assert.Equal(t, before, download(t, g, out), tc.name)
			continue
		}
		if out != nil {
			refusedUnchanged(t, g, err, tc.kind, tc.op, tc.operand, out, before)
		} else {
			refusedUnchanged(t, g, err, tc.kind, tc.op, tc.operand, out32, before32)
		}
		if t.Failed() {
			t.Logf("case %q: %v", tc.name, err)
		}
	}

	// A closed buffer is refused, named, and matches driver.ErrClosed.
	closed := buf(m * n)
	require.NoError(t, closed.Close())
	err := cublas.Gemm(g.h, 1, A, B, 0, col(closed, m, n))
	assert.ErrorIs(t, err, driver.ErrClosed)
	assert.Contains(t, err.Error(), "cublas: Gemm: C: ")
}
