package graph

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/release"
	"github.com/purecuda/cuda/lifetime"
)

// CaptureMode is how a capture interacts with other threads
// (CUstreamCaptureMode).
type CaptureMode int

// Capture modes.
const (
	// CaptureGlobal refuses potentially unsafe calls on every thread while
	// the capture lasts.
	CaptureGlobal CaptureMode = 0 // CU_STREAM_CAPTURE_MODE_GLOBAL
	// CaptureThreadLocal refuses them on the capturing thread only.
	CaptureThreadLocal CaptureMode = 1 // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
	// CaptureRelaxed refuses nothing beyond what conflicts with capture.
	CaptureRelaxed CaptureMode = 2 // CU_STREAM_CAPTURE_MODE_RELAXED
)

// String names the mode.
func (m CaptureMode) String() string {
	switch m {
	case CaptureGlobal:
		return "global"
	case CaptureThreadLocal:
		return "thread-local"
	case CaptureRelaxed:
		return "relaxed"
	}
	return fmt.Sprintf("CaptureMode(%d)", int(m))
}

// CaptureStatus is a stream's capture state (CUstreamCaptureStatus).
type CaptureStatus int

// Capture states.
const (
	NotCapturing       CaptureStatus = 0 // CU_STREAM_CAPTURE_STATUS_NONE
	Capturing          CaptureStatus = 1 // CU_STREAM_CAPTURE_STATUS_ACTIVE
	CaptureInvalidated CaptureStatus = 2 // CU_STREAM_CAPTURE_STATUS_INVALIDATED
)

// String names the state.
func (c CaptureStatus) String() string {
	switch c {
	case NotCapturing:
		return "not capturing"
	case Capturing:
		return "capturing"
	case CaptureInvalidated:
		return "capture invalidated"
	}
	return fmt.Sprintf("CaptureStatus(%d)", int(c))
}

// ErrCapturing is matched by the error for beginning a capture, or forking
// into one, on a stream that is being captured already, and by the errors
// of calls on a graph while a capture into it (or into a graph of its
// family: its bodies, clones, the graph it was cloned from) is running.
var ErrCapturing = errors.New("graph: the stream is being captured already")

// ErrNotCapturing is matched by the error for ending, forking or joining a
// capture that is over (or a nil or zero StreamCapture).
var ErrNotCapturing = errors.New("graph: no capture in progress")

// IsCapturing reports s's capture state (cuStreamIsCapturing).
func IsCapturing(s *driver.Stream) (CaptureStatus, error) {
	if s == nil {
		return 0, fmt.Errorf("graph: IsCapturing: %w", driver.ErrNilStream)
	}
	st := new(cu.CUstreamCaptureStatus)
	err := s.Raw(func(h uintptr) error { return cu.StreamIsCapturing(cu.CUstream(h), st) })
	return CaptureStatus(*st), err
}

// Capture records the work f queues on s into a new graph and returns it;
// the caller owns it (Close). f runs between cuStreamBeginCapture and
// cuStreamEndCapture with the calling goroutine locked to its OS thread;
// it gets s back. The graph holds what the captured work names (see
// StreamCapture).
//
// If f returns an error, the capture is ended, the partial graph destroyed
// and f's error returned. If f panics (or calls runtime.Goexit), the same
// cleanup runs and the panic then goes on, unchanged.
func Capture(s *driver.Stream, mode CaptureMode, f func(s *driver.Stream) error) (*Graph, error) {
	c, err := captureFunc("Capture", s, mode, nil, nil, f)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.graph, nil
}

// Capture records the work f queues on s into g, as root nodes (see
// Builder.Capture).
func (g *Graph) Capture(s *driver.Stream, mode CaptureMode, f func(s *driver.Stream) error) ([]Node, error) {
	return g.After().Capture(s, mode, f)
}

// BeginCapture begins capturing s into g, as root nodes (see
// Builder.BeginCapture).
func (g *Graph) BeginCapture(s *driver.Stream, mode CaptureMode) (*StreamCapture, error) {
	return g.After().BeginCapture(s, mode)
}

// Capture records the work f queues on s into b's graph, after b's nodes
// (cuStreamBeginCaptureToGraph, CUDA 12.3+), as the package-level Capture
// does into a new graph; the graph may be a conditional node's body. It
// returns the nodes the capture ended on, for adding work after it.
func (b Builder) Capture(s *driver.Stream, mode CaptureMode, f func(s *driver.Stream) error) ([]Node, error) {
	if err := b.check("Graph.Capture"); err != nil {
		return nil, err
	}
	c, err := captureFunc("Graph.Capture", s, mode, b.g, b.deps, f)
	if err != nil {
		return nil, err
	}
	return c.Tail(), nil
}

// BeginCapture begins capturing s into a new graph
// (cuStreamBeginCapture). End returns the graph; defer Abort right after
// BeginCapture so that no path leaves s capturing. In CaptureGlobal and
// CaptureThreadLocal, the capture begins and ends on an OS thread of its
// own (see StreamCapture).
func BeginCapture(s *driver.Stream, mode CaptureMode) (*StreamCapture, error) {
	return beginCapture("BeginCapture", s, mode, nil, nil, mode != CaptureRelaxed)
}

// BeginCapture begins capturing s into b's graph after b's nodes
// (cuStreamBeginCaptureToGraph, CUDA 12.3+); End returns that graph.
func (b Builder) BeginCapture(s *driver.Stream, mode CaptureMode) (*StreamCapture, error) {
	if err := b.check("Graph.BeginCapture"); err != nil {
		return nil, err
	}
	return beginCapture("Graph.BeginCapture", s, mode, b.g, b.deps, mode != CaptureRelaxed)
}

// StreamCapture is a capture in progress, from BeginCapture until End or
// Abort: work queued on the stream is recorded into a graph instead of
// running. Capture and BeginCapture make a new graph; Graph.Capture,
// Graph.BeginCapture and the Builder's add to an existing graph or body.
//
// The graph holds what the captured work names, as if its nodes had been
// added explicitly (buffers, Args, modules, host buffers and Go slices,
// host functions, whose panics Exec.Err reports); work queued through Raw
// handles or other libraries is not seen. AllocAsync on a captured stream
// is refused: use a memory-alloc node. While a capture into a graph runs,
// calls on that graph and its family fail with ErrCapturing.
//
// Defer Abort right after BeginCapture; a StreamCapture dropped without
// End or Abort is aborted late, by a cleanup. CaptureRelaxed suits Go
// best: CUDA ends a global or thread-local capture only on the OS thread
// that began it (BeginCapture then uses a thread of its own), and in
// CaptureGlobal refuses calls such as cuMemAlloc on every thread whose
// mode is global. The frees and unloads that Close or a dropped object
// makes do not meet that: in the capturing context they wait for the
// capture to end (they wait for the context's work, which a capture there
// forbids), elsewhere they run with their thread's mode relaxed.
//
// The methods are safe for concurrent use. Work queued concurrently with
// Fork, Join, End or Abort is captured or not as CUDA sees it; either way,
// what it names lives as long as anything may run it.
type StreamCapture struct {
	st      *captureState
	cleanup runtime.Cleanup
	target  *Graph // the graph captured into (nil for a new graph)

	mu    sync.Mutex
	graph *Graph // after End: the graph
	tail  []Node // after End: the last nodes
}

func beginCapture(op string, s *driver.Stream, mode CaptureMode, target *Graph, deps []Node, thread bool) (*StreamCapture, error) {
	st, err := begin(op, s, mode, target, deps, thread)
	if err != nil {
		return nil, err
	}
	c := &StreamCapture{st: st, target: target}
	c.cleanup = runtime.AddCleanup(c, abortLeaked, st)
	return c, nil
}

// captureFunc runs f between begin and end on the calling goroutine, locked
// to its thread; on every path out of f the capture ends.
func captureFunc(op string, s *driver.Stream, mode CaptureMode, target *Graph, deps []Node, f func(*driver.Stream) error) (*StreamCapture, error) {
	if f == nil {
		return nil, invalid(op, "nil function")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st, err := begin(op, s, mode, target, deps, false)
	if err != nil {
		return nil, err
	}
	c := &StreamCapture{st: st, target: target}
	returned := false
	defer func() {
		if !returned { // f panicked or called runtime.Goexit: clean up, let it go on
			_ = c.Abort()
		}
	}()
	ferr := f(s)
	returned = true
	if ferr != nil {
		if err := c.Abort(); err != nil {
			return nil, errors.Join(ferr, err)
		}
		return nil, ferr
	}
	if _, err := c.End(); err != nil {
		return nil, err
	}
	return c, nil
}

// abortLeaked is the cleanup of a StreamCapture dropped while capturing:
// it aborts on the release goroutine.
func abortLeaked(st *captureState) {
	release.Defer(lifetime.OwnerFunc(func() error {
		_, _, err := st.finish(true, nil)
		if errors.Is(err, ErrNotCapturing) {
			return nil
		}
		return err
	}))
}

func (c *StreamCapture) state(op string) (*captureState, error) {
	if c == nil || c.st == nil {
		return nil, fmt.Errorf("graph: %s: nil or zero StreamCapture: %w", op, ErrNotCapturing)
	}
	return c.st, nil
}

// Stream is the stream the capture began on (nil for a nil StreamCapture).
func (c *StreamCapture) Stream() *driver.Stream {
	if c == nil || c.st == nil {
		return nil
	}
	return c.st.origin
}

// Fork brings other into the capture: work queued on other from now on is
// captured too, after the work captured on the capture's stream so far
// (an event recorded there, waited for on other). other must be a stream
// that is not being captured; it may belong to another context (another
// device's): then the graph made holds that context too, and its work
// there runs on that device (see "Several GPUs" in the package
// documentation; refused in a capture into a conditional node's body).
// End joins every forked stream back; Join does it earlier, where the
// order matters.
func (c *StreamCapture) Fork(other *driver.Stream) error {
	const op = "StreamCapture.Fork"
	st, err := c.state(op)
	if err != nil {
		return err
	}
	return st.fork(op, other)
}

// Join makes the work captured on the capture's stream from now on wait for
// the work captured on other, a stream brought in with Fork (or by waiting
// for an event recorded on a captured stream).
func (c *StreamCapture) Join(other *driver.Stream) error {
	const op = "StreamCapture.Join"
	st, err := c.state(op)
	if err != nil {
		return err
	}
	return st.join(op, other)
}

// End ends the capture (cuStreamEndCapture) and returns the graph: a new
// graph the caller owns, or the graph captured into. Streams forked into
// the capture and not joined back are joined first. End always ends the
// capture: on failure (an invalidated capture, say) what was captured is
// destroyed, what the capture held is released, and the error returned.
// The one exception: inside an NCCL Group's function whose group holds a
// stream of the capture (package nccl), End and Abort refuse with an error
// matching driver.ErrInvalidArgument and the capture goes on: end it after
// the Group.
// End after End or Abort is an error matching ErrNotCapturing.
func (c *StreamCapture) End() (*Graph, error) {
	st, err := c.state("StreamCapture.End")
	if err != nil {
		return nil, err
	}
	g, tail, err := st.finish(false, c.target)
	if errors.Is(err, errGroupHolds) {
		return nil, err // not ended
	}
	c.cleanup.Stop()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.graph, c.tail = g, tail
	c.mu.Unlock()
	return g, nil
}

// Tail returns, after a successful End, the nodes the capture's stream
// depended on last: the captured work's last nodes, for g.After(Tail()...).
// It is nil before End, and for a capture that added nothing.
func (c *StreamCapture) Tail() []Node {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.tail)
}

// Abort ends the capture, destroys what it captured (the new graph, or the
// nodes captured into an existing one) and releases what it held. It does
// nothing after End or Abort, so it can be deferred right after
// BeginCapture. Where CUDA refuses to destroy captured nodes (in graphs
// with memory nodes), they stay in the graph, holding what they name, and
// Abort says so.
func (c *StreamCapture) Abort() error {
	if c == nil || c.st == nil {
		return nil
	}
	_, _, err := c.st.finish(true, c.target)
	if errors.Is(err, errGroupHolds) {
		return err // not ended
	}
	c.cleanup.Stop()
	if errors.Is(err, ErrNotCapturing) {
		return nil
	}
	return err
}
