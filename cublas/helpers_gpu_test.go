package cublas_test

import (
	"fmt"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
)

// The GPU tests compare every routine's result on the device with a
// plain-Go reference computed here from the same views. Inputs are small
// integers (|v| <= 3 mostly), so every product and sum of the routines
// that only multiply and add (Gemm, GemmStridedBatched, Syrk, Symm, Trmm,
// Gemv, Ger, Axpy, Scal, Copy, Swap, Dot, Asum, Iamax, GemmEx of 16-bit
// and int8 inputs) is exact in every type, TF32 products included: their
// tolerance is 0. The solves (Trsm, Trsv) divide: relative tolerance
// 1e-4 for float32 and complex64, 1e-10 for float64 and complex128
// (solveTol); Nrm2 takes a square root: 1e-6 and 1e-14 (sqrtTol). A
// tolerance t accepts |got-want| <= t·max(1, |want|); NaN never passes.
//
// Every view is compared over its whole buffer: the elements outside the
// view must come back as they went in, so a write past a view shows.

// gpu is one test's device: the primary context of device 0, a stream of
// its own and a handle bound to it, all closed when the test ends.
type gpu struct {
	ctx *driver.Context
	s   *driver.Stream
	h   *cublas.Handle
}

// needCUBLAS skips tb without a GPU or without cuBLAS (fails it under
// PURECUDA_REQUIRE_GPU).
func needCUBLAS(tb testing.TB) {
	tb.Helper()
	gputest.Require(tb)
	if _, _, _, _, err := cublas.Version(); err != nil {
		if gputest.Required() {
			tb.Fatalf("PURECUDA_REQUIRE_GPU is set and cuBLAS is not usable: %v", err)
		}
		tb.Skip(err)
	}
}

// newGPU makes tb's device, stream and handle (options o).
func newGPU(tb testing.TB, o *cublas.Options) *gpu {
	tb.Helper()
	needCUBLAS(tb)
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(tb, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, ctx.Close()) })
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, s.Close()) })
	h, err := cublas.NewHandle(s, o)
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, h.Close()) })
	return &gpu{ctx: ctx, s: s, h: h}
}

// upload copies host to a new device buffer, closed when tb ends.
func upload[T any](tb testing.TB, g *gpu, host []T) *driver.Buffer[T] {
	tb.Helper()
	b, err := driver.AllocCopy(g.s, host)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// download is all of b, once the work queued on g's stream has run.
func download[T any](tb testing.TB, g *gpu, b *driver.Buffer[T]) []T {
	tb.Helper()
	out, err := b.ToHost(g.s)
	require.NoError(tb, err)
	return out
}

// num is re + im·i in T (im is dropped for real types).
func num[T cublas.Float](re, im int) T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(re)
	case *float64:
		*p = float64(re)
	case *complex64:
		*p = complex(float32(re), float32(im))
	case *complex128:
		*p = complex(float64(re), float64(im))
	}
	return z
}

// c128 is v as a complex128.
func c128[T cublas.Float](v T) complex128 {
	switch x := any(v).(type) {
	case float32:
		return complex(float64(x), 0)
	case float64:
		return complex(x, 0)
	case complex64:
		return complex128(x)
	}
	return any(v).(complex128)
}

// conj is v's conjugate (v for real types).
func conj[T cublas.Float](v T) T {
	switch x := any(v).(type) {
	case complex64:
		return any(complex64(cmplx.Conj(complex128(x)))).(T)
	case complex128:
		return any(cmplx.Conj(x)).(T)
	}
	return v
}

// complexType reports whether T is complex.
func complexType[T cublas.Float]() bool {
	var z T
	switch any(z).(type) {
	case complex64, complex128:
		return true
	}
	return false
}

// single32 reports whether T is float32 or complex64.
func single32[T cublas.Float]() bool {
	var z T
	switch any(z).(type) {
	case float32, complex64:
		return true
	}
	return false
}

// solveTol and sqrtTol are the tolerances of the solves and of Nrm2 for T.
func solveTol[T cublas.Float]() float64 {
	if single32[T]() {
		return 1e-4
	}
	return 1e-10
}

func sqrtTol[T cublas.Float]() float64 {
	if single32[T]() {
		return 1e-6
	}
	return 1e-14
}

// smallInts is n random values with parts in [-3, 3].
func smallInts[T cublas.Float](r *rand.Rand, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = num[T](r.IntN(7)-3, r.IntN(7)-3)
	}
	return out
}

// near checks got against want element by element within tol (see the
// top of this file), reporting at most five differences.
func near[T cublas.Float](tb testing.TB, what string, want, got []T, tol float64) bool {
	tb.Helper()
	if !assert.Len(tb, got, len(want), what) {
		return false
	}
	bad := 0
	for i := range want {
		w, g := c128(want[i]), c128(got[i])
		if cmplx.Abs(w-g) <= tol*max(1, cmplx.Abs(w)) {
			continue
		}
		if bad < 5 {
			tb.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
		bad++
	}
	if bad > 5 {
		tb.Errorf("%s: %d of %d elements differ", what, bad, len(want))
	}
	return bad == 0
}

// ld is m's leading dimension, 0 made explicit as Matrix documents.
func ld[T cublas.Element](m cublas.Matrix[T]) int {
	if m.LD != 0 {
		return m.LD
	}
	if m.Layout == cublas.RowMajor {
		return max(m.Cols, 1)
	}
	return max(m.Rows, 1)
}

// idx is the index in m's buffer of element (i, j) of m, before its
// operation, as Matrix defines it.
func idx[T cublas.Element](m cublas.Matrix[T], i, j int) int {
	if m.Layout == cublas.RowMajor {
		return m.Offset + i*ld(m) + j
	}
	return m.Offset + i + j*ld(m)
}

// opDims is the shape of op(m).
func opDims[T cublas.Element](m cublas.Matrix[T]) (rows, cols int) {
	if m.Op == cublas.NoTrans {
		return m.Rows, m.Cols
	}
	return m.Cols, m.Rows
}

// opAt is element (i, j) of op(m), read from m's buffer's contents data.
func opAt[T cublas.Float](data []T, m cublas.Matrix[T], i, j int) T {
	switch m.Op {
	case cublas.NoTrans:
		return data[idx(m, i, j)]
	case cublas.Trans:
		return data[idx(m, j, i)]
	}
	return conj(data[idx(m, j, i)])
}

// vidx is the index in v's buffer of element k of v, as Vector defines it.
func vidx[T cublas.Element](v cublas.Vector[T], k int) int {
	inc := v.Inc
	if inc == 0 {
		inc = 1
	}
	if inc < 0 {
		return v.Offset + (v.N-1-k)*-inc
	}
	return v.Offset + k*inc
}

// newMat makes a rows×cols view of layout l over a new buffer of small
// random integers. With pad the view is the block at (2, 1) of a matrix
// three rows and two columns larger (an offset, and a leading dimension
// beyond the view's extent); without, the buffer is exactly the packed
// matrix, its last element the buffer's last.
func newMat[T cublas.Float](tb testing.TB, g *gpu, r *rand.Rand, rows, cols int, l cublas.Layout, pad bool) (cublas.Matrix[T], []T) {
	tb.Helper()
	if !pad {
		host := smallInts[T](r, max(rows*cols, 1))
		return cublas.Matrix[T]{Buf: upload(tb, g, host), Rows: rows, Cols: cols, Layout: l}, host
	}
	host := smallInts[T](r, (rows+3)*(cols+2))
	full := cublas.Matrix[T]{Buf: upload(tb, g, host), Rows: rows + 3, Cols: cols + 2, Layout: l}
	return full.Sub(2, 1, rows, cols), host
}

// newVec makes an n-element vector with increment inc over a new buffer
// of small random integers, with pad two elements before it and three
// after.
func newVec[T cublas.Float](tb testing.TB, g *gpu, r *rand.Rand, n, inc int, pad bool) (cublas.Vector[T], []T) {
	tb.Helper()
	span := (n-1)*max(inc, -inc) + 1
	off := 0
	if pad {
		off = 2
		span += 5
	}
	host := smallInts[T](r, span)
	return cublas.Vector[T]{Buf: upload(tb, g, host), Offset: off, N: n, Inc: inc}, host
}

// inTriangle reports whether (i, j) is in the uplo triangle.
func inTriangle(uplo cublas.Uplo, i, j int) bool {
	if uplo == cublas.Lower {
		return i >= j
	}
	return i <= j
}

// triangular fills the n×n view a in host as a well-conditioned
// triangular matrix: small values in the uplo triangle, 4 (or 1+2i) on
// the diagonal (50 when diag is Unit: it must not be read), and 77
// outside the triangle (it must not be read either).
func triangular[T cublas.Float](host []T, a cublas.Matrix[T], uplo cublas.Uplo, diag cublas.Diag, r *rand.Rand) {
	for i := range a.Rows {
		for j := range a.Cols {
			switch {
			case i == j && diag == cublas.Unit:
				host[idx(a, i, j)] = num[T](50, 0)
			case i == j:
				host[idx(a, i, j)] = num[T](4, 1)
			case inTriangle(uplo, i, j):
				host[idx(a, i, j)] = num[T](r.IntN(3)-1, r.IntN(3)-1)
			default:
				host[idx(a, i, j)] = num[T](77, 0)
			}
		}
	}
}

// triAt is element (i, j) of op(T), T the triangular matrix that the view
// a of host stands for in Trsm, Trmm and Trsv.
func triAt[T cublas.Float](host []T, a cublas.Matrix[T], uplo cublas.Uplo, diag cublas.Diag, i, j int) T {
	if a.Op != cublas.NoTrans {
		i, j = j, i
	}
	var v T
	switch {
	case i == j && diag == cublas.Unit:
		v = num[T](1, 0)
	case inTriangle(uplo, i, j):
		v = host[idx(a, i, j)]
	}
	if a.Op == cublas.ConjTrans {
		v = conj(v)
	}
	return v
}

// layouts and ops are what the tests combine.
var layouts = []cublas.Layout{cublas.ColMajor, cublas.RowMajor}

func opsOf[T cublas.Float]() []cublas.Op {
	if complexType[T]() {
		return []cublas.Op{cublas.NoTrans, cublas.Trans, cublas.ConjTrans}
	}
	return []cublas.Op{cublas.NoTrans, cublas.Trans}
}

func lname(l cublas.Layout) string {
	if l == cublas.RowMajor {
		return "row"
	}
	return "col"
}

func oname(o cublas.Op) string { return [...]string{"N", "T", "C"}[o] }

// forTypes runs f's subtests for float32, float64, complex64, complex128.
func forTypes(t *testing.T, f32, f64, c64, c128 func(t *testing.T)) {
	t.Run("float32", f32)
	t.Run("float64", f64)
	t.Run("complex64", c64)
	t.Run("complex128", c128)
}

// refusedUnchanged checks that err is a refusal of kind naming op and
// operand, and that out's buffer still holds before: nothing was queued.
func refusedUnchanged[T any](tb testing.TB, g *gpu, err, kind error, op, operand string, out *driver.Buffer[T], before []T) {
	tb.Helper()
	what := fmt.Sprintf("%s of %s", op, operand)
	if !assert.Error(tb, err, what) {
		return
	}
	assert.ErrorIs(tb, err, kind, what)
	assert.ErrorIs(tb, err, driver.ErrInvalidArgument, what)
	assert.Contains(tb, err.Error(), "cublas: "+op+": "+operand+": ", what)
	if out != nil {
		assert.Equal(tb, before, download(tb, g, out), "%s: nothing may be queued", what)
	}
}
