//go:build linux

package cublas_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
)

// operands are the buffers every call of apiCalls works on: valid views of
// them as long as they are open.
type operands struct {
	s       *driver.Stream          // the stream of the handles NewHandle makes
	a, b, c *driver.Buffer[float32] // 4×4 matrices
	x, y    *driver.Buffer[float32] // 4-vectors
	r       *driver.Buffer[float32] // a device result
	ri      *driver.Buffer[int32]   // an index result
	mask    *driver.Buffer[byte]    // a ReLU mask of a 4×4 D (AuxLD 128)
}

// newOperands allocates operands on e's stream (closed when t ends, if not
// before).
func newOperands(t *testing.T, e *fenv) *operands {
	t.Helper()
	return &operands{s: e.s,
		a: up(t, e.s, data[float32](16, 1)), b: up(t, e.s, data[float32](16, 2)), c: up(t, e.s, data[float32](16, 3)),
		x: up(t, e.s, data[float32](4, 4)), y: up(t, e.s, data[float32](4, 5)),
		r: up(t, e.s, []float32{0}), ri: up(t, e.s, []int32{0}), mask: up(t, e.s, make([]byte, 64))}
}

// closeAll closes the buffers, each from a goroutine of its own, and
// returns at once; wg counts the goroutines.
func (o *operands) closeAll(t *testing.T, wg *sync.WaitGroup) {
	for _, c := range []func() error{o.a.Close, o.b.Close, o.c.Close, o.x.Close, o.y.Close, o.r.Close, o.ri.Close, o.mask.Close} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, c())
		}()
	}
}

func (o *operands) mats() (a, b, c cublas.Matrix[float32]) {
	return cublas.ColMajorMatrix(o.a, 4, 4), cublas.ColMajorMatrix(o.b, 4, 4), cublas.ColMajorMatrix(o.c, 4, 4)
}

func (o *operands) vecs() (x, y cublas.Vector[float32]) {
	return cublas.Vector[float32]{Buf: o.x, N: 4, Inc: 1}, cublas.Vector[float32]{Buf: o.y, N: 4, Inc: 1}
}

// apiCalls are every exported function of the package and every method of
// *Handle, each called with the handle h on the operands o; the close race
// runs them all, the handle refusals those that take a handle
// (handleFree: those that do not), and TestAPICallsCoverTheAPI checks that
// none is missing.
var apiCalls = map[string]func(h *cublas.Handle, o *operands) error{
	"NewHandle": func(_ *cublas.Handle, o *operands) error {
		h, err := cublas.NewHandle(o.s, &cublas.Options{WorkspaceBytes: 512})
		if err != nil {
			return err
		}
		a, b, c := o.mats()
		return errors.Join(cublas.Gemm(h, 1, a, b, 0, c), h.Close())
	},
	"Version": func(*cublas.Handle, *operands) error {
		major, _, _, _, err := cublas.Version()
		if err == nil && major != 13 {
			err = fmt.Errorf("version %d", major)
		}
		return err
	},
	"HalfOf": func(*cublas.Handle, *operands) error {
		if cublas.HalfOf(1.5).Float32() != 1.5 {
			return errors.New("HalfOf(1.5)")
		}
		return nil
	},
	"BFloat16Of": func(*cublas.Handle, *operands) error {
		if cublas.BFloat16Of(-2.5).Float32() != -2.5 {
			return errors.New("BFloat16Of(-2.5)")
		}
		return nil
	},
	"ColMajorMatrix": func(h *cublas.Handle, o *operands) error {
		return cublas.Gemm(h, 1, cublas.ColMajorMatrix(o.a, 4, 4), cublas.ColMajorMatrix(o.b, 4, 4), 1, cublas.ColMajorMatrix(o.c, 4, 4))
	},
	"RowMajorMatrix": func(h *cublas.Handle, o *operands) error {
		return cublas.Gemm(h, 1, cublas.RowMajorMatrix(o.a, 4, 4), cublas.RowMajorMatrix(o.b, 4, 4), 1, cublas.RowMajorMatrix(o.c, 4, 4))
	},
	"VectorOf": func(h *cublas.Handle, o *operands) error {
		return cublas.Axpy(h, 1, cublas.VectorOf(o.x), cublas.VectorOf(o.y))
	},
	"Gemm": func(h *cublas.Handle, o *operands) error {
		a, b, c := o.mats()
		return cublas.Gemm(h, 1, a, b.T(), 0, c)
	},
	"GemmBatched": func(h *cublas.Handle, o *operands) error {
		half := func(b *driver.Buffer[float32]) []cublas.Matrix[float32] {
			return []cublas.Matrix[float32]{cublas.ColMajorMatrix(b, 2, 2), {Buf: b, Offset: 8, Rows: 2, Cols: 2}}
		}
		return cublas.GemmBatched(h, 1, half(o.a), half(o.b), 0, half(o.c))
	},
	"GemmGrouped": func(h *cublas.Handle, o *operands) error {
		a, b, c := o.mats()
		return cublas.GemmGrouped(h, []cublas.GemmGroup[float32]{
			{Alpha: 1, A: []cublas.Matrix[float32]{a.Sub(0, 0, 2, 4)}, B: []cublas.Matrix[float32]{b}, C: []cublas.Matrix[float32]{c.Sub(0, 0, 2, 4)}},
			{Alpha: 2, Beta: 1, A: []cublas.Matrix[float32]{a.Sub(2, 0, 2, 4)}, B: []cublas.Matrix[float32]{b.Sub(0, 0, 4, 2)}, C: []cublas.Matrix[float32]{c.Sub(2, 0, 2, 2)}},
		})
	},
	"NewMatmulPlan": func(h *cublas.Handle, o *operands) error {
		a, b, c := o.mats()
		p, err := cublas.NewMatmulPlan(h, a, b, c, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLU})
		if err != nil {
			return err
		}
		err = errors.Join(p.Run(1, a, b, 0, c, c, nil), p.Close())
		// A forward ReLU storing its mask, then its gradient with the
		// bias gradient (into y), reading the mask.
		fw, ferr := cublas.NewMatmulPlan(h, a, b, c, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUAuxBias})
		if ferr != nil {
			return errors.Join(err, ferr)
		}
		err = errors.Join(err, fw.RunWith(1, a, b, 0, c, c, cublas.MatmulExtras[float32]{Bias: o.x, Mask: o.mask}), fw.Close())
		bw, berr := cublas.NewMatmulPlan(h, a, b, c, &cublas.MatmulOptions{Epilogue: cublas.EpilogueDReLUBGrad})
		if berr != nil {
			return errors.Join(err, berr)
		}
		return errors.Join(err, bw.RunWith(1, a, b, 0, c, c, cublas.MatmulExtras[float32]{Bias: o.y, Mask: o.mask}), bw.Close())
	},
	"Float8E4M3Of": func(*cublas.Handle, *operands) error {
		if cublas.Float8E4M3Of(-1.5).Float32() != -1.5 {
			return errors.New("Float8E4M3Of(-1.5)")
		}
		return nil
	},
	"Float8E5M2Of": func(*cublas.Handle, *operands) error {
		if cublas.Float8E5M2Of(3).Float32() != 3 {
			return errors.New("Float8E5M2Of(3)")
		}
		return nil
	},
	"GemmStridedBatched": func(h *cublas.Handle, o *operands) error {
		return cublas.GemmStridedBatched(h, 1, cublas.ColMajorMatrix(o.a, 2, 2), 4, cublas.ColMajorMatrix(o.b, 2, 4), 8, 0, cublas.ColMajorMatrix(o.c, 2, 4), 8, 2)
	},
	"GemmEx": func(h *cublas.Handle, o *operands) error {
		a, b, c := o.mats()
		return cublas.GemmEx(h, 1, a, b, 0, c, cublas.Compute32F)
	},
	"GemmStridedBatchedEx": func(h *cublas.Handle, o *operands) error {
		return cublas.GemmStridedBatchedEx(h, 1, cublas.ColMajorMatrix(o.a, 2, 2), 4, cublas.ColMajorMatrix(o.b, 2, 4), 8, 0, cublas.ColMajorMatrix(o.c, 2, 4), 8, 2, cublas.Compute32F)
	},
	"Syrk": func(h *cublas.Handle, o *operands) error {
		a, _, c := o.mats()
		return cublas.Syrk(h, cublas.Lower, 1, a, 0, c)
	},
	"Symm": func(h *cublas.Handle, o *operands) error {
		a, b, c := o.mats()
		return cublas.Symm(h, cublas.Left, cublas.Upper, 1, a, b, 0, c)
	},
	"Trsm": func(h *cublas.Handle, o *operands) error {
		a, b, _ := o.mats()
		return cublas.Trsm(h, cublas.Left, cublas.Lower, cublas.Unit, 1, a, b)
	},
	"Trmm": func(h *cublas.Handle, o *operands) error {
		a, b, c := o.mats()
		return cublas.Trmm(h, cublas.Right, cublas.Lower, cublas.Unit, 1, a, b, c)
	},
	"Gemv": func(h *cublas.Handle, o *operands) error {
		a, _, _ := o.mats()
		x, y := o.vecs()
		return cublas.Gemv(h, 1, a, x, 0, y)
	},
	"Ger": func(h *cublas.Handle, o *operands) error {
		a, _, _ := o.mats()
		x, y := o.vecs()
		return cublas.Ger(h, 1, x, y, a)
	},
	"Gerc": func(h *cublas.Handle, o *operands) error {
		a, _, _ := o.mats()
		x, y := o.vecs()
		return cublas.Gerc(h, 1, x, y, a)
	},
	"Trsv": func(h *cublas.Handle, o *operands) error {
		a, _, _ := o.mats()
		x, _ := o.vecs()
		return cublas.Trsv(h, cublas.Upper, cublas.Unit, a, x)
	},
	"Axpy": func(h *cublas.Handle, o *operands) error {
		x, y := o.vecs()
		return cublas.Axpy(h, 1, x, y)
	},
	"Copy": func(h *cublas.Handle, o *operands) error {
		x, y := o.vecs()
		return cublas.Copy(h, x, y)
	},
	"Swap": func(h *cublas.Handle, o *operands) error {
		x, y := o.vecs()
		return cublas.Swap(h, x, y)
	},
	"Scal": func(h *cublas.Handle, o *operands) error {
		x, _ := o.vecs()
		return cublas.Scal(h, -1, x)
	},
	"Dot": func(h *cublas.Handle, o *operands) error {
		x, y := o.vecs()
		_, err := cublas.Dot(h, x, y)
		return err
	},
	"Dotc": func(h *cublas.Handle, o *operands) error {
		x, y := o.vecs()
		_, err := cublas.Dotc(h, x, y)
		return err
	},
	"DotTo": func(h *cublas.Handle, o *operands) error {
		x, y := o.vecs()
		return cublas.DotTo(h, x, y, cublas.VectorOf(o.r))
	},
	"DotcTo": func(h *cublas.Handle, o *operands) error {
		x, y := o.vecs()
		return cublas.DotcTo(h, x, y, cublas.VectorOf(o.r))
	},
	"Nrm2": func(h *cublas.Handle, o *operands) error {
		x, _ := o.vecs()
		_, err := cublas.Nrm2(h, x)
		return err
	},
	"Asum": func(h *cublas.Handle, o *operands) error {
		x, _ := o.vecs()
		_, err := cublas.Asum(h, x)
		return err
	},
	"Iamax": func(h *cublas.Handle, o *operands) error {
		x, _ := o.vecs()
		_, err := cublas.Iamax(h, x)
		return err
	},
	"Nrm2To": func(h *cublas.Handle, o *operands) error {
		x, _ := o.vecs()
		return cublas.Nrm2To(h, x, cublas.VectorOf(o.r))
	},
	"AsumTo": func(h *cublas.Handle, o *operands) error {
		x, _ := o.vecs()
		return cublas.AsumTo(h, x, cublas.VectorOf(o.r))
	},
	"IamaxTo": func(h *cublas.Handle, o *operands) error {
		x, _ := o.vecs()
		return cublas.IamaxTo(h, x, cublas.VectorOf(o.ri))
	},
	"Close": func(h *cublas.Handle, _ *operands) error { return h.Close() },
	"Stream": func(h *cublas.Handle, o *operands) error {
		if s := h.Stream(); s != nil && s != o.s {
			return errors.New("another stream")
		}
		return nil
	},
	"Context": func(h *cublas.Handle, o *operands) error {
		if c := h.Context(); c != nil && c != o.s.Context() {
			return errors.New("another context")
		}
		return nil
	},
	"Options": func(h *cublas.Handle, _ *operands) error {
		if w := h.Options().WorkspaceBytes; w%256 != 0 {
			return fmt.Errorf("workspace of %d bytes", w)
		}
		return nil
	},
}

// plan is the MatmulPlan of the close race's *MatmulPlan methods.
type plan = cublas.MatmulPlan[float32, float32, float32]

// newPlan is a plan for o's matrices on h: D = ReLU(A·B + bias).
func newPlan(h *cublas.Handle, o *operands) (*plan, error) {
	a, b, c := o.mats()
	return cublas.NewMatmulPlan(h, a, b, c, &cublas.MatmulOptions{Epilogue: cublas.EpilogueReLUBias, Autotune: 3})
}

// planCalls are every method of *MatmulPlan, called on p (made by
// newPlan) with o; the close race runs them too, and
// TestAPICallsCoverTheAPI checks that none is missing.
var planCalls = map[string]func(p *plan, o *operands) error{
	"Run": func(p *plan, o *operands) error {
		a, b, c := o.mats()
		return p.Run(2, a, b, 1, c, c, o.x)
	},
	"RunWith": func(p *plan, o *operands) error {
		a, b, c := o.mats()
		return p.RunWith(1, a, b, 0, c, c, cublas.MatmulExtras[float32]{Bias: o.y})
	},
	"AuxLD": func(p *plan, _ *operands) error {
		if n := p.AuxLD(); n != 0 {
			return fmt.Errorf("AuxLD %d for a plan without an auxiliary matrix", n)
		}
		return nil
	},
	"Tuned": func(p *plan, _ *operands) error {
		if n := len(p.Tuned()); n > 3 {
			return fmt.Errorf("%d candidates tuned", n)
		}
		return nil
	},
	"Close": func(p *plan, _ *operands) error { return p.Close() },
}

// handleFree are the entries of apiCalls that make no call on the handle
// they are given (or, the methods, return no error).
var handleFree = map[string]bool{
	"NewHandle": true, "Version": true, "HalfOf": true, "BFloat16Of": true, "Float8E4M3Of": true, "Float8E5M2Of": true,
	"ColMajorMatrix": true, "RowMajorMatrix": true, "VectorOf": true,
	"Stream": true, "Context": true, "Options": true,
}

// unmodelled are the calls the fake has no function for: they end in
// ErrNotSupported once their views are checked.
var unmodelled = map[string]bool{"Symm": true, "Trmm": true}

// TestAPICallsRunFromFake: every entry of apiCalls succeeds on open
// operands and an open handle (so the close race below tests calls that
// do work).
func TestAPICallsRunFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	o := newOperands(t, e)
	for name, call := range apiCalls {
		if name == "Close" {
			continue
		}
		err := call(e.h, o)
		if unmodelled[name] {
			assert.ErrorIs(t, err, cublas.ErrNotSupported, name)
			continue
		}
		assert.NoError(t, err, name)
	}
	require.NoError(t, e.s.Synchronize())
	assert.NoError(t, apiCalls["Close"](e.h, o))
}

// TestCloseRacesEveryCallFromFake: every exported function and method
// runs from many goroutines while the handle and every buffer are closed
// from others: each call succeeds or fails cleanly (ErrClosed; the
// unmodelled ErrNotSupported), nothing panics, the fakes count no bad use
// (no call on a destroyed handle, no freed memory read), and no handle is
// left.
func TestCloseRacesEveryCallFromFake(t *testing.T) {
	if !faketest.InCUBLASAndCUDAChild(t) {
		return
	}
	e := newEnv(t)
	var succeeded, refused atomic.Int64
	for round := 0; round < 12; round++ {
		h, err := cublas.NewHandle(e.s, &cublas.Options{WorkspaceBytes: 1 << 12})
		require.NoError(t, err)
		o := newOperands(t, e)
		p, err := newPlan(h, o)
		require.NoError(t, err)
		start := make(chan struct{})
		var calls, closers sync.WaitGroup
		for name, call := range planCalls {
			calls.Add(1)
			go func() {
				defer calls.Done()
				<-start
				for i := 0; i < 4; i++ {
					var err error
					if !assert.NotPanics(t, func() { err = call(p, o) }, "MatmulPlan."+name) {
						return
					}
					switch {
					case err == nil:
						succeeded.Add(1)
					case errors.Is(err, driver.ErrClosed):
						refused.Add(1)
					default:
						t.Errorf("MatmulPlan.%s: %v", name, err)
					}
				}
			}()
		}
		for name, call := range apiCalls {
			for g := 0; g < 2; g++ {
				calls.Add(1)
				go func() {
					defer calls.Done()
					<-start
					for i := 0; i < 4; i++ {
						var err error
						if !assert.NotPanics(t, func() { err = call(h, o) }, name) {
							return
						}
						switch {
						case err == nil:
							succeeded.Add(1)
						case errors.Is(err, driver.ErrClosed):
							refused.Add(1)
						case unmodelled[name] && errors.Is(err, cublas.ErrNotSupported):
						default:
							t.Errorf("%s: %v", name, err)
						}
					}
				}()
			}
		}
		close(start)
		if round%3 != 0 { // sometimes after a first wave of calls
			calls.Add(1)
			go func() { defer calls.Done(); _, _ = cublas.Dot(h, cublas.VectorOf(o.x), cublas.VectorOf(o.y)) }()
		}
		closers.Add(2)
		go func() {
			defer closers.Done()
			assert.NoError(t, h.Close())
		}()
		go func() {
			defer closers.Done()
			assert.NoError(t, p.Close())
		}()
		o.closeAll(t, &closers)
		calls.Wait()
		closers.Wait()
		assert.NoError(t, h.Close(), "a second Close returns the first's result")
		assert.NoError(t, p.Close(), "a second Close returns the first's result")
	}
	t.Logf("%d calls succeeded, %d found something closed; %d cuBLAS operations ran", succeeded.Load(), refused.Load(), opsRun(t))
	assert.NotZero(t, succeeded.Load(), "the race let no call through")
	assert.NotZero(t, refused.Load(), "the race closed nothing in time")
	require.NoError(t, e.s.Synchronize())
	waitFor(t, "fake_cublas_live_handles", 1) // e's
	waitFor(t, "fake_cublaslt_live_handles", 0)
	waitFor(t, "fake_cublaslt_live_descs", 0)
	noBadUses(t)
}
