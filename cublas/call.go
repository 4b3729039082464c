package cublas

import (
	"fmt"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/blasview"
	"github.com/purecuda/cuda/internal/capture"
	"github.com/purecuda/cuda/internal/ccall"
	"github.com/purecuda/cuda/internal/ctxcall"
	"github.com/purecuda/cuda/internal/cublasraw"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// What every routine promises:
//
//   - it is queued on the handle's stream, in its order: it reads its
//     inputs once the work queued on the stream before it has run, and the
//     work queued after it sees its outputs written. Order work on other
//     streams with events, as for a kernel. A routine whose result goes to
//     the host (Dot, Nrm2, Asum, Iamax) waits for its work and returns the
//     value;
//   - alpha and beta are read when the routine is called (captured into a
//     graph: their values at the capture);
//   - every buffer is memory of the handle's context, and every view is
//     checked against its buffer first: a refused call queues nothing;
//   - the buffers, the workspace and the handle stay allocated until the
//     stream has passed the routine, whatever is closed meanwhile; inside a
//     capture (graph.Capture), the graph holds them, as it holds a
//     kernel's buffers.

// call is a routine being made: the handle held, its operands' buffers
// held (refs), until run or done.
type call struct {
	h    *Handle
	st   *handleState
	op   string
	refs [8]lifetime.Ref // the most a single call holds: a MatmulPlan Run's A, B, C, D and four FP8 scale operands
	n    int
	more []lifetime.Ref  // a batched call's operands past refs
	late []release.Owner // released once the stream has passed the routine (GemmBatched's pointer arrays)
}

// begin holds h for the routine op.
func (h *Handle) begin(op string) (call, error) {
	if h == nil || h.st == nil {
		return call{}, invalid(op, "nil or zero Handle")
	}
	if !h.obj.Acquire() {
		return call{}, fmt.Errorf("cublas: %s: the handle is closed: %w", op, driver.ErrClosed)
	}
	return call{h: h, st: h.st, op: op}, nil
}

// done releases what the call holds.
func (c *call) done() {
	for i := range c.n {
		_ = c.refs[i].Release()
		c.refs[i] = lifetime.Ref{}
	}
	c.n = 0
	for _, r := range c.more {
		_ = r.Release()
	}
	c.more = nil
	for _, o := range c.late {
		_ = o.Release()
	}
	c.late = nil
	_ = c.h.obj.Release()
}

// fail releases what the call holds and returns err.
func (c *call) fail(err error) error {
	c.done()
	return err
}

// use holds b's memory for the routine (the operand name), which must be
// the handle's context's, and returns it for the checks and its address.
func use[T Element](c *call, name string, b *driver.Buffer[T]) (blasview.Buffer, uintptr, error) {
	if b == nil {
		return blasview.Buffer{}, 0, invalid(c.op, "%s: nil buffer", name)
	}
	ptr, bytes, ref, err := seam.UseOn(c.op, b, c.st.s)
	if err != nil {
		return blasview.Buffer{}, 0, fmt.Errorf("cublas: %s: %s: %w", c.op, name, err)
	}
	if c.n < len(c.refs) {
		c.refs[c.n] = ref
		c.n++
	} else {
		c.more = append(c.more, ref)
	}
	esz := sizeOf[T]()
	return blasview.Buffer{Len: int64(bytes / esz), Addr: uint64(ptr), Elem: int64(esz)}, ptr, nil
}

// matrix holds m's buffer and returns its view and base address.
func matrix[T Element](c *call, name string, m Matrix[T]) (blasview.Matrix, uintptr, error) {
	buf, ptr, err := use(c, name, m.Buf)
	if err != nil {
		return blasview.Matrix{}, 0, err
	}
	return m.view(buf), ptr, nil
}

// matrices holds the buffers of a routine's three matrices, named A, B
// and C, and returns their views and base addresses.
func matrices[TA, TB, TC Element](c *call, a Matrix[TA], b Matrix[TB], m Matrix[TC]) (va, vb, vc blasview.Matrix, pa, pb, pc uintptr, err error) {
	if va, pa, err = matrix(c, "A", a); err != nil {
		return
	}
	if vb, pb, err = matrix(c, "B", b); err != nil {
		return
	}
	vc, pc, err = matrix(c, "C", m)
	return
}

// vector holds v's buffer and returns its view and base address.
func vector[T Element](c *call, name string, v Vector[T]) (blasview.Vector, uintptr, error) {
	buf, ptr, err := use(c, name, v.Buf)
	if err != nil {
		return blasview.Vector{}, 0, err
	}
	return v.view(buf), ptr, nil
}

// at is the address of element off of a buffer at base.
func at[T Element](base uintptr, off int64) uintptr { return base + uintptr(off)*sizeOf[T]() }

// The kinds of routine, for run.
const (
	queued     = iota // queues work on the stream
	hostResult        // and waits for it to write a result to the host: not capturable
	noWork            // queues nothing
	timing            // queues work and waits for it: not capturable (autotune)
)

// run makes the routine: with the handle's lock held and its context
// current, f calls cuBLAS. Queued work inside a capture hands what it
// holds, the workspace and the handle to the capture's graph; otherwise
// the references are released when f returns (a buffer's free waits for
// the work queued on its context's streams). It releases the call.
func (c *call) run(kind int, f func(h cublasraw.Handle) error) error {
	return c.runCall(kind, f, nil, nil)
}

// runStep is run for a queued routine that is one cuBLAS call: with the
// handle's lock held, fill sets the call's function and arguments in s;
// the push of the handle's context, the call and the thread's clearing
// are then one crossing into C, and status turns the call's result into
// its error.
func (c *call) runStep(fill func(h cublasraw.Handle) (ccall.Step, error), status func(r uintptr) error) error {
	return c.runCall(queued, nil, fill, status)
}

// runCall is run (f) or runStep (fill and status).
func (c *call) runCall(kind int, f func(h cublasraw.Handle) error, fill func(h cublasraw.Handle) (ccall.Step, error), status func(r uintptr) error) error {
	st := c.st
	st.mu.Lock()
	sink := capture.Enter(st.s)
	var err error
	if sink != nil && kind == hostResult {
		err = fmt.Errorf("cublas: %s: the result goes to the host, which waits for the stream: it cannot be captured: %w", c.op, driver.ErrStreamCaptureUnsupported)
	} else if sink != nil && kind == timing {
		err = fmt.Errorf("cublas: %s: Autotune times matmuls on the handle's stream, which is being captured: %w", c.op, driver.ErrStreamCaptureUnsupported)
	} else {
		if fill != nil {
			var s ccall.Step
			if s, err = fill(st.h); err == nil {
				err = ctxcall.Step(st.cuctx, &s, status)
			}
			err = wrap(c.op, err)
		} else {
			err = wrap(c.op, ctxcall.Bound(st.cuctx, func() error { return f(st.h) }))
		}
		if sink != nil && kind == queued {
			// Kept even when cuBLAS failed: it may have queued part of
			// the routine into the capture.
			c.keep(sink)
		} else {
			for _, o := range c.late {
				capture.AfterWork(st.s, o)
			}
			c.late = nil
		}
	}
	capture.Leave(st.s, sink)
	st.mu.Unlock()
	c.done()
	return err
}

// keep hands the capture's sink the operands' references, one on the
// workspace and one on the handle.
func (c *call) keep(sink capture.Sink) {
	owners := make([]release.Owner, 0, c.n+len(c.more)+len(c.late)+2)
	for i := range c.n {
		owners = append(owners, c.refs[i])
		c.refs[i] = lifetime.Ref{}
	}
	c.n = 0
	for _, r := range c.more {
		owners = append(owners, r)
	}
	c.more = nil
	owners = append(owners, c.late...)
	c.late = nil
	if r, ok := c.st.wsRef.Clone(); ok {
		owners = append(owners, r)
	}
	if c.h.obj.Retain() {
		owners = append(owners, lifetime.RefOf(&c.h.obj))
	}
	sink.Keep(owners)
}

// scalars stores alpha and beta where cuBLAS reads them (host pointer
// mode) and returns their addresses. The handle's lock is held.
func scalars[T any](st *handleState, alpha, beta T) (uintptr, uintptr) {
	pa, pb := st.slot(slotAlpha), st.slot(slotBeta)
	*(*T)(pa) = alpha
	*(*T)(pb) = beta
	return uintptr(pa), uintptr(pb)
}

// attr stores v where C reads an attribute's value (the handle's result
// slot: heap memory, which does not move, unlike a variable the stack
// holds) and returns its address. The handle's lock is held.
func attr[T any](st *handleState, v T) uintptr {
	p := st.slot(slotResult)
	*(*T)(p) = v
	return uintptr(p)
}

// i32 narrows a size checked by the views (Needs64 false) to C's int.
func i32(v int64) int32 { return int32(v) }
