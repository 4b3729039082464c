package stress

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/internal/seam"
)

// The graph stress's operations: one or more calls each, covering every
// exported method of package graph (GraphMethods, GraphExempt).

// traceDestroy (PURECUDA_STRESS_TRACE set) prints each Node.Destroy's node
// to stderr, to find which one a crash in cuGraphDestroyNode named.
var traceDestroy = os.Getenv("PURECUDA_STRESS_TRACE") != ""

// GraphOp is one call of the stress. Covers names the methods it calls
// (Type.Method, or a package function's name); Allow accepts errors other
// than ErrClosed that the call may give with valid arguments while other
// goroutines change and close things.
type GraphOp struct {
	Covers []string
	Do     func(w *GraphWorld, r *rand.Rand) error
	Allow  func(error) bool
}

// IsAny reports whether err matches one of targets.
func IsAny(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

// busy are the errors any graph call may give while others race it: a
// capture into the family is running, the node it names was destroyed, an
// executable's instantiation or update was refused by the driver for the
// graph's shape at that moment, a capture invalidated by a concurrent
// call, an edge that would close a cycle.
var busy = []error{graph.ErrCapturing, graph.ErrDestroyedNode, graph.ErrNotCapturing, graph.ErrCycle,
	driver.ErrInvalidValue, driver.ErrNotSupported, driver.ErrStreamCaptureInvalidated, driver.ErrStreamCaptureUnsupported,
	driver.ErrStreamCaptureUnjoined, driver.ErrStreamCaptureIsolation, driver.ErrStreamCaptureUnmatched, driver.ErrIllegalState,
	driver.ErrCapturedEvent, driver.ErrStreamCaptureImplicit, driver.ErrGraphExecUpdateFailure, driver.ErrInvalidHandle}

var allowBusy = IsAny(busy...)

// allowBusyOr is allowBusy plus more.
func allowBusyOr(more ...error) func(error) bool {
	return IsAny(append(append([]error(nil), busy...), more...)...)
}

func keep(w *GraphWorld, n graph.Node, err error) error {
	if err == nil {
		w.remember(n)
	}
	return err
}

func closeIt[T interface{ Close() error }](v T, err error) error {
	if err != nil {
		return err
	}
	return v.Close()
}

// builder is G.After a recent node of G, or G itself.
func (w *GraphWorld) builder(r *rand.Rand) graph.Builder {
	if r.IntN(2) == 0 {
		return w.G.After()
	}
	return w.G.After(w.gnode(r))
}

// captureBody queues work on s: a launch, an async copy and a host
// function, all of which the captured graph must hold.
func (w *GraphWorld) captureBody(s *driver.Stream) error {
	if err := s.Launch(w.Fill, driver.Grid(1), driver.Block(GraphN), w.Buf, int32(5), int32(GraphN)); err != nil {
		return err
	}
	if err := w.Buf.CopyToHostAsync(s, w.Host); err != nil {
		return err
	}
	calls := w.HostCalls
	return s.LaunchHostFunc(func() { calls.Add(1) })
}

// GraphOps is the table of operations.
func GraphOps() []GraphOp {
	var ops []GraphOp
	op := func(covers string, allow func(error) bool, do func(w *GraphWorld, r *rand.Rand) error) {
		ops = append(ops, GraphOp{Covers: strings.Split(covers, ","), Do: do, Allow: allow})
	}
	// Adds.
	op("Graph.Empty,Builder.Empty,Graph.After", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		n, err := w.builder(r).Empty()
		return keep(w, n, err)
	})
	op("Graph.Join", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		n, err := w.G.Join(w.gnode(r), w.gnode(r))
		return keep(w, n, err)
	})
	op("Graph.Kernel,Builder.Kernel", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		n, err := w.builder(r).Kernel(w.Fill, driver.Grid(1), driver.Block(GraphN), w.Buf, int32(r.IntN(9)), int32(GraphN))
		return keep(w, n, err)
	})
	op("Graph.KernelWith,Builder.KernelWith", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		n, err := w.G.KernelWith(w.Fill, w.cfg(), w.Buf, int32(r.IntN(9)), int32(GraphN))
		return keep(w, n, err)
	})
	op("Graph.KernelArgs,Builder.KernelArgs", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		n, err := w.builder(r).KernelArgs(w.Args, driver.Grid(1), driver.Block(GraphN))
		return keep(w, n, err)
	})
	op("Graph.HostFunc,Builder.HostFunc", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		calls := w.HostCalls
		n, err := w.builder(r).HostFunc(func() { calls.Add(1) })
		return keep(w, n, err)
	})
	op("Graph.Memset,Builder.Memset,Device", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		n, err := w.builder(r).Memset(graph.Device(w.Buf2), uint32(r.IntN(256)), 4)
		return keep(w, n, err)
	})
	op("Graph.Memcpy,Builder.Memcpy,Slice,Host,Raw", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		src := graph.Device(w.Buf)
		switch r.IntN(3) {
		case 0:
			src = graph.Host(w.HB)
		case 1:
			if ref, err := seam.Hold(w.Buf2); err == nil { // a Raw operand whose owner holds Buf2
				// Buf2 may be closed between the hold and Ptr, which then
				// reads 0 (the memory stays held): no raw operand then.
				if p := w.Buf2.Ptr(); p != 0 {
					src = graph.RawDevice(p, w.Buf2.Size(), ref)
				} else {
					_ = ref.Release()
				}
			}
		}
		n, err := w.builder(r).Memcpy(graph.Slice(w.Host), src)
		return keep(w, n, err)
	})
	op("Graph.MemAlloc,Graph.MemFree,Builder.MemAlloc,Builder.MemFree", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		a, p, err := w.Mem.MemAlloc(256, graph.MemAllocOptions{})
		if err != nil {
			return err
		}
		w.remember(a)
		if r.IntN(2) == 0 {
			_, err = w.Mem.After(a).KernelWith(w.Fill, w.cfg(), p, int32(1), int32(GraphN))
			if err != nil {
				return err
			}
		}
		f, err := w.Mem.After(a).MemFree(p)
		return keep(w, f, err)
	})
	op("Graph.On,Builder.On", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		// Nodes of Multi in Other, and copies between Other's memory and
		// Ctx's, launched now and then.
		var err error
		switch r.IntN(4) {
		case 0:
			_, err = w.Multi.On(w.Other).Memset(graph.Device(w.OtherBuf), uint32(r.IntN(256)), 4)
		case 1:
			_, err = w.Multi.After().On(w.Other).Memcpy(graph.Device(w.Buf), graph.Device(w.OtherBuf))
		case 2:
			_, err = w.Multi.Memcpy(graph.Device(w.OtherBuf), graph.Device(w.Buf))
		default:
			e, ierr := w.Multi.Instantiate()
			if ierr != nil {
				return ierr
			}
			err = e.Launch(w.S)
			if cerr := e.Close(); err == nil {
				err = cerr
			}
		}
		return err
	})
	op("Graph.Child,Builder.Child", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		n, err := w.builder(r).Child(w.Child)
		return keep(w, n, err)
	})
	op("Graph.EventRecord,Builder.EventRecord,Graph.EventWait,Builder.EventWait", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		n, err := w.builder(r).EventRecord(w.Ev2)
		if err := keep(w, n, err); err != nil {
			return err
		}
		m, err := w.G.After(n).EventWait(w.Ev2)
		return keep(w, m, err)
	})
	op("Graph.Batch", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		return w.G.Batch(func() error {
			for range 3 {
				n, err := w.G.KernelWith(w.Fill, w.cfg(), w.Buf, int32(2), int32(GraphN))
				if err := keep(w, n, err); err != nil {
					return err
				}
			}
			return nil
		})
	})
	// Topology and introspection.
	op("Graph.Nodes,Graph.Roots,Graph.Edges,Graph.Context", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		if w.G.Context() == nil {
			return errors.New("no context")
		}
		ns, err := w.G.Nodes()
		if err != nil {
			return err
		}
		w.remember(ns[:min(len(ns), 4)]...)
		if _, err := w.G.Roots(); err != nil {
			return err
		}
		_, err = w.G.Edges()
		return err
	})
	op("Graph.AddEdge,Graph.RemoveEdge", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		a, b := w.gnode(r), w.gnode(r)
		if a == b {
			return nil
		}
		if err := w.G.AddEdge(a, b); err != nil {
			return err
		}
		return w.G.RemoveEdge(a, b)
	})
	op("Graph.WriteDOT", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		return w.G.WriteDOT(io.Discard, graph.DOTVerbose)
	})
	op("Graph.Clone,Graph.Find", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		c, err := w.G.Clone()
		if err != nil {
			return err
		}
		defer c.Close()
		n, err := c.Find(w.gnode(r))
		if err != nil {
			return err
		}
		w.remember(n)
		return launchOnce(c, w.S)
	})
	op("Graph.Instantiate,Graph.InstantiateWith", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		e, err := w.G.InstantiateWith(graph.InstantiateOptions{Flags: graph.Upload, UploadStream: w.S})
		if err != nil {
			return err
		}
		defer e.Close()
		return e.Launch(w.S)
	})
	// Nodes.
	op("Node.Kind,Node.Dependencies,Node.Dependents,Node.Graph,Node.IsZero", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		n := w.node(r)
		if n.IsZero() || n.Graph() == nil {
			return nil
		}
		if _, err := n.Kind(); err != nil {
			return err
		}
		if _, err := n.Dependencies(); err != nil {
			return err
		}
		_, err := n.Dependents()
		return err
	})
	op("Node.KernelParams,Node.MemsetParams,Node.MemcpyParams,Node.MemAllocParams,Node.MemFreeParams",
		allowBusyOr(driver.ErrInvalidArgument), func(w *GraphWorld, r *rand.Rand) error {
			n := w.node(r)
			k, err := n.Kind()
			if err != nil {
				return err
			}
			switch k {
			case graph.KindKernel:
				_, err = n.KernelParams()
			case graph.KindMemset:
				_, err = n.MemsetParams()
			case graph.KindMemcpy:
				_, err = n.MemcpyParams()
			case graph.KindMemAlloc:
				_, err = n.MemAllocParams()
			case graph.KindMemFree:
				_, err = n.MemFreeParams()
			}
			return err
		})
	op("Node.Destroy", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		n := w.node(r)
		if n.IsZero() || n == w.K || n == w.M || n == w.C || n == w.H || n == w.ER || n == w.EW || n == w.CH {
			return nil // the executable's nodes stay, for its Set methods
		}
		if traceDestroy {
			k, _ := n.Kind()
			fmt.Fprintf(os.Stderr, "destroy %v body=%v g=%p\n", k, n.Graph() != w.G, n.Graph())
			defer fmt.Fprintf(os.Stderr, "destroyed %p\n", n.Graph())
		}
		return n.Destroy()
	})
	// Conditional nodes.
	op("Graph.NewCondition,Graph.If,Graph.IfElse,Graph.While,Graph.Switch,Builder.If,Builder.IfElse,Builder.While,Builder.Switch,Condition.Handle,Condition.IsZero,Condition.Graph",
		allowBusy, func(w *GraphWorld, r *rand.Rand) error {
			c, err := w.G.NewCondition(0, graph.AssignDefault)
			if err != nil {
				return err
			}
			if c.IsZero() || c.Graph() != w.G || c.Handle() == 0 {
				return errors.New("a condition without its graph or handle")
			}
			var bodies []*graph.Graph
			var n graph.Node
			switch r.IntN(4) {
			case 0:
				var b *graph.Graph
				n, b, err = w.builder(r).If(c)
				bodies = []*graph.Graph{b}
			case 1:
				var b1, b2 *graph.Graph
				n, b1, b2, err = w.builder(r).IfElse(c)
				bodies = []*graph.Graph{b1, b2}
			case 2:
				var b *graph.Graph
				n, b, err = w.builder(r).While(c)
				bodies = []*graph.Graph{b}
			default:
				n, bodies, err = w.builder(r).Switch(c, 2)
			}
			if err != nil {
				return err
			}
			w.remember(n)
			for _, b := range bodies {
				k, err := b.KernelWith(w.Fill, w.cfg(), w.Buf, int32(4), int32(GraphN))
				if err := keep(w, k, err); err != nil {
					return err
				}
			}
			return nil
		})
	// Captures.
	op("Capture,IsCapturing", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		g, err := graph.Capture(w.S2, graph.CaptureRelaxed, func(s *driver.Stream) error {
			st, err := graph.IsCapturing(s)
			if err == nil && st == graph.CaptureInvalidated {
				// A call CUDA refuses in a capture invalidates it
				// (purecuda refuses the executable launches it saw
				// crash libcuda so, before CUDA).
				return driver.ErrStreamCaptureInvalidated
			}
			if err != nil || st != graph.Capturing {
				return errors.Join(err, fmt.Errorf("capturing: %v", st))
			}
			return w.captureBody(s)
		})
		if err != nil {
			return err
		}
		defer g.Close()
		return launchOnce(g, w.S)
	})
	op("Graph.Capture,Builder.Capture", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		tail, err := w.builder(r).Capture(w.S2, graph.CaptureRelaxed, w.captureBody)
		w.remember(tail...)
		return err
	})
	op("BeginCapture,Graph.BeginCapture,Builder.BeginCapture,StreamCapture.Stream,StreamCapture.Fork,StreamCapture.Join,StreamCapture.End,StreamCapture.Tail,StreamCapture.Abort",
		allowBusy, func(w *GraphWorld, r *rand.Rand) error {
			var sc *graph.StreamCapture
			var err error
			into := r.IntN(2) == 0
			if into {
				sc, err = w.builder(r).BeginCapture(w.S2, graph.CaptureRelaxed)
			} else {
				sc, err = graph.BeginCapture(w.S2, graph.CaptureRelaxed)
			}
			if err != nil {
				return err
			}
			defer sc.Abort()
			if sc.Stream() != w.S2 {
				return errors.New("StreamCapture.Stream is not the stream")
			}
			if err := sc.Fork(w.S3); err != nil {
				return err
			}
			if err := w.captureBody(w.S3); err != nil {
				return err
			}
			if err := sc.Join(w.S3); err != nil {
				return err
			}
			if r.IntN(3) == 0 {
				return sc.Abort()
			}
			g, err := sc.End()
			if err != nil {
				return err
			}
			w.remember(sc.Tail()...)
			if !into {
				defer g.Close()
				return launchOnce(g, w.S)
			}
			return nil
		})
	op("StreamCapture.End (shared)", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		// One goroutine begins a capture that others end, abort, fork
		// into or launch on.
		switch r.IntN(4) {
		case 0:
			sc, err := graph.BeginCapture(w.S2, graph.CaptureRelaxed)
			if err != nil {
				return err
			}
			if !w.sc.CompareAndSwap(nil, sc) {
				return sc.Abort()
			}
			return nil
		case 1:
			if sc := w.sc.Swap(nil); sc != nil {
				g, err := sc.End()
				if err != nil {
					return err
				}
				defer g.Close()
				return launchOnce(g, w.S)
			}
		case 2:
			if sc := w.sc.Load(); sc != nil {
				return sc.Fork(w.S3)
			}
		default:
			return w.captureBody(w.S2)
		}
		return nil
	})
	// The executable.
	op("Exec.Launch,Exec.Upload,Exec.Err,Exec.Context", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		if w.Exec.Context() == nil {
			return errors.New("no context")
		}
		s := w.S
		if r.IntN(4) == 0 {
			s = w.S2 // refused while a capture holds it
		}
		if err := w.Exec.Upload(s); err != nil {
			return err
		}
		if err := w.Exec.Launch(s); err != nil {
			return err
		}
		return w.Exec.Err()
	})
	op("Exec.SetKernel,Exec.SetKernelWith,Exec.SetEnabled,Exec.Enabled", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		if err := w.Exec.SetKernel(w.K, w.Fill, driver.Grid(1), driver.Block(GraphN), w.Buf, int32(r.IntN(9)), int32(GraphN)); err != nil {
			return err
		}
		if err := w.Exec.SetKernelWith(w.K, w.Fill, w.cfg(), w.Buf2, int32(r.IntN(9)), int32(GraphN)); err != nil {
			return err
		}
		on := r.IntN(2) == 0
		if err := w.Exec.SetEnabled(w.K, on); err != nil {
			return err
		}
		_, err := w.Exec.Enabled(w.K)
		return err
	})
	// Refused (ErrInvalidArgument) when an Update came between SetKernel
	// and them: the executable no longer knows the node's parameters.
	op("Exec.SetKernelArg,Exec.SetKernelArgs", allowBusyOr(driver.ErrInvalidArgument), func(w *GraphWorld, r *rand.Rand) error {
		if err := w.Exec.SetKernel(w.K, w.Fill, driver.Grid(1), driver.Block(GraphN), w.Buf, int32(r.IntN(9)), int32(GraphN)); err != nil {
			return err
		}
		if err := w.Exec.SetKernelArg(w.K, 1, int32(r.IntN(9))); err != nil {
			return err
		}
		if err := w.Exec.SetKernelArg(w.K, 0, w.Buf2); err != nil {
			return err
		}
		a, err := w.Fill.NewArgs(w.Buf, int32(r.IntN(9)), int32(GraphN))
		if err != nil {
			return err
		}
		return errors.Join(w.Exec.SetKernelArgs(w.K, a), a.Close())
	})
	op("Exec.SetMemset,Exec.SetMemcpy", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		if err := w.Exec.SetMemset(w.M, graph.Device(w.Buf2), uint32(r.IntN(9)), 4); err != nil {
			return err
		}
		return w.Exec.SetMemcpy(w.C, graph.Slice(w.Host), graph.Device(w.Buf2))
	})
	op("Exec.SetHostFunc", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		calls := w.HostCalls
		return w.Exec.SetHostFunc(w.H, func() { calls.Add(1) })
	})
	op("Exec.SetEventRecord,Exec.SetEventWait", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		if err := w.Exec.SetEventRecord(w.ER, w.Ev2); err != nil {
			return err
		}
		return w.Exec.SetEventWait(w.EW, w.Ev2)
	})
	op("Exec.SetChild", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		return w.Exec.SetChild(w.CH, w.Child2)
	})
	op("Exec.Update", allowBusy, func(w *GraphWorld, r *rand.Rand) error {
		var ue *graph.UpdateError
		err := w.Exec.Update(w.Twin)
		if errors.As(err, &ue) { // the twin's topology changed meanwhile
			return nil
		}
		return err
	})
	op("New", nil, func(w *GraphWorld, r *rand.Rand) error {
		return closeIt(graph.New(w.Ctx))
	})
	return ops
}
