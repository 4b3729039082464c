//go:build linux

package cublas_test

import (
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// Helpers of the tests that run package cublas against fakecublas and
// fakecuda (internal/cublasraw/testdata/MODEL.md), each in a child
// process (faketest.InCUBLASAndCUDAChild). The fake computes exactly in
// double and stores to the element type, so with small integers as data
// the results compare exactly.

// fenv is a test's fake device: the primary context, a non-blocking
// stream and a handle on it with a small workspace.
type fenv struct {
	ctx *driver.Context
	s   *driver.Stream
	h   *cublas.Handle
}

// newEnv sets up fenv; when t ends the handle and stream are closed, no
// cuBLAS handle may be left and no bad use counted, by fakecublas or
// fakecuda.
func newEnv(t *testing.T) *fenv {
	t.Helper()
	e := &fenv{ctx: fakeCtx(t)}
	var err error
	e.s, err = e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	e.h, err = cublas.NewHandle(e.s, &cublas.Options{WorkspaceBytes: 1 << 16})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, e.h.Close())
		assert.NoError(t, e.s.Close())
		waitNoHandles(t)
		noBadUses(t)
	})
	return e
}

// fakeCtx is the fake device's primary context, released when t ends.
func fakeCtx(t *testing.T) *driver.Context {
	t.Helper()
	dev, err := driver.DeviceByOrdinal(0)
	require.NoError(t, err)
	ctx, err := dev.PrimaryContext()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ctx.Close() })
	return ctx
}

// noBadUses checks that neither fake counted a bad use.
func noBadUses(t *testing.T) {
	t.Helper()
	assert.Zero(t, faketest.CUBLAS(t, "fake_cublas_bad_uses"), faketest.CUBLASLastBad(t))
	faketest.NoBadUses(t)
}

// opsRun is how many cuBLAS operations fakecublas has run.
func opsRun(t *testing.T) int64 {
	t.Helper()
	return faketest.CUBLAS(t, "fake_cublas_ops_run")
}

// liveHandles is how many cuBLAS handles are created and not destroyed.
func liveHandles(t *testing.T) int64 {
	t.Helper()
	return faketest.CUBLAS(t, "fake_cublas_live_handles")
}

// waitNoHandles waits (20 s at most) until no cuBLAS handle is left: one
// released by a cleanup or after queued work is destroyed in the
// background.
func waitNoHandles(t *testing.T) {
	t.Helper()
	waitFor(t, "fake_cublas_live_handles", 0)
}

// waitFor waits (20 s at most) until the fakes' counter (fakecublas's
// fake_cublas_*, else fakecuda's) reads want, flushing the release
// queue, and checks it does.
func waitFor(t *testing.T, counter string, want int64) {
	t.Helper()
	read := func() int64 {
		if strings.HasPrefix(counter, "fake_cublas") {
			return faketest.CUBLAS(t, counter)
		}
		return faketest.Call(t, counter)
	}
	deadline := time.Now().Add(20 * time.Second)
	for read() != want && time.Now().Before(deadline) {
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, want, read(), counter)
}

// gate holds s until open is called: work queued behind it waits.
func gate(t *testing.T, s *driver.Stream, slot uintptr) (open func()) {
	t.Helper()
	faketest.Call(t, "fake_close_gate", slot)
	require.NoError(t, s.Raw(func(h uintptr) error {
		return cu.LaunchHostFunc(cu.CUstream(h), cu.CUhostFn(faketest.Sym(t, "fake_gate_fn")), slot)
	}))
	var once sync.Once
	open = func() { once.Do(func() { faketest.Call(t, "fake_open_gate", slot) }) }
	t.Cleanup(open)
	return open
}

// up is a buffer of s's context holding v, closed when t ends.
func up[T any](t *testing.T, s *driver.Stream, v []T) *driver.Buffer[T] {
	t.Helper()
	b, err := driver.AllocCopy(s, v)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// down is b's contents, once s has run its work.
func down[T any](t *testing.T, s *driver.Stream, b *driver.Buffer[T]) []T {
	t.Helper()
	v, err := b.ToHost(s)
	require.NoError(t, err)
	return v
}

// toC is v as a complex128.
func toC[T cublas.Float](v T) complex128 {
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

// fromC is c as a T (its real part for real types).
func fromC[T cublas.Float](c complex128) T {
	var z T
	switch any(z).(type) {
	case float32:
		return any(float32(real(c))).(T)
	case float64:
		return any(real(c)).(T)
	case complex64:
		return any(complex64(c)).(T)
	}
	return any(c).(T)
}

// isCplx reports whether T is complex.
func isCplx[T cublas.Float]() bool {
	var z T
	switch any(z).(type) {
	case complex64, complex128:
		return true
	}
	return false
}

// data is n small integers (complex ones for complex types), different
// for each seed; 0 is never among them, so that a value left unwritten
// shows.
func data[T cublas.Float](n, seed int) []T {
	v := make([]T, n)
	for i := range v {
		re := float64((i*7+seed*3+i/5)%9 - 4)
		if re == 0 {
			re = 5
		}
		im := float64((i*5+seed)%7 - 3)
		v[i] = fromC[T](complex(re, im))
	}
	return v
}

// scalar is a small integer scalar (complex for complex types).
func scalar[T cublas.Float](re, im float64) T { return fromC[T](complex(re, im)) }

// opAtC is element (i, j) of op(m), m's data in host, as a complex128.
func opAtC[T cublas.Float](host []T, m cublas.Matrix[T], i, j int) complex128 {
	switch m.Op {
	case cublas.Trans:
		return toC(host[idx(m, j, i)])
	case cublas.ConjTrans:
		v := toC(host[idx(m, j, i)])
		return complex(real(v), -imag(v))
	}
	return toC(host[idx(m, i, j)])
}

// refGemmC is what Gemm leaves in C's buffer (cHost): C = alpha·op(A)·op(B)
// + beta·C, in plain Go on the views' own terms, in complex128 (C not
// read with beta 0).
func refGemmC[T cublas.Float](alpha T, a cublas.Matrix[T], aHost []T, b cublas.Matrix[T], bHost []T, beta T, c cublas.Matrix[T], cHost []T) []T {
	out := append([]T(nil), cHost...)
	_, k := opDims(a)
	for i := 0; i < c.Rows; i++ {
		for j := 0; j < c.Cols; j++ {
			var s complex128
			for l := 0; l < k; l++ {
				s += opAtC(aHost, a, i, l) * opAtC(bHost, b, l, j)
			}
			r := toC(alpha) * s
			if toC(beta) != 0 {
				r += toC(beta) * toC(cHost[idx(c, i, j)])
			}
			out[idx(c, i, j)] = fromC[T](r)
		}
	}
	return out
}

// shape is a stored matrix of rows×cols in layout l with op, placed as a
// block of a larger one (explicit LD and an offset) when sub.
func shape[T cublas.Float](t *testing.T, s *driver.Stream, rows, cols int, l cublas.Layout, op cublas.Op, sub bool, seed int) (cublas.Matrix[T], []T) {
	t.Helper()
	if !sub {
		host := data[T](rows*cols, seed)
		m := cublas.Matrix[T]{Buf: up(t, s, host), Rows: rows, Cols: cols, Layout: l, Op: op}
		return m, host
	}
	pr, pc := rows+2, cols+3
	host := data[T](pr*pc+1, seed)
	m := cublas.Matrix[T]{Buf: up(t, s, host), Offset: 1, Rows: pr, Cols: pc, Layout: l, Op: op}
	return m.Sub(1, 2, rows, cols), host
}

// shape16 is shape, its padded sub-matrix (sub) starting on a 16-byte
// boundary, as a MatmulPlan's matrices must.
func shape16[T cublas.Float](t *testing.T, s *driver.Stream, rows, cols int, l cublas.Layout, op cublas.Op, sub bool, seed int) (cublas.Matrix[T], []T) {
	t.Helper()
	if !sub {
		return shape[T](t, s, rows, cols, l, op, false, seed)
	}
	pr, pc := rows+2, cols+3
	per := 16 / int(unsafe.Sizeof(*new(T))) // elements per 16 bytes
	at := cublas.Matrix[T]{Rows: pr, Cols: pc, Layout: l}.Sub(1, 2, rows, cols).Offset
	base := (per - at%per) % per
	host := data[T](base+pr*pc, seed)
	m := cublas.Matrix[T]{Buf: up(t, s, host), Offset: base, Rows: pr, Cols: pc, Layout: l, Op: op}
	return m.Sub(1, 2, rows, cols), host
}
