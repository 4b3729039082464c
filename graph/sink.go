package graph

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/purecuda/cuda/internal/hostfn"
)

// maxSinkErrs is how many host-callback panics a sink keeps for Err; the
// rest are counted.
const maxSinkErrs = 64

// sink collects the panics (and Goexits) of host callbacks for Exec.Err. A
// graph's sink is shared by the graph, its clones and its executables. A
// callback keeps reporting to the sink of the graph it was added to; when
// that graph's callbacks come to run in another graph's executables too —
// it became a child node there, or the update of an executable — its sink
// forwards to the other's, so that every executable that may have run the
// callback reports it.
type sink struct {
	mu      sync.Mutex
	errs    []error
	dropped int
	fwd     []weak.Pointer[sink] // sinks that see this one's panics too
	// hosts is set once a graph reporting here has a host node: launching
	// its executables then tells the host-function server (hostfn.Expect).
	hosts atomic.Bool
}

// CallbackPanicked implements hostfn.PanicSink.
func (s *sink) CallbackPanicked(p any, stack []byte) {
	var err error
	if e, ok := p.(*hostfn.Goexited); ok {
		err = fmt.Errorf("graph: host node: %w", e)
	} else {
		err = fmt.Errorf("graph: host node panicked: %v\n%s", p, stack)
	}
	s.report(err, nil)
}

// report records err here and in every sink this one forwards to.
func (s *sink) report(err error, seen []*sink) {
	for _, x := range seen {
		if x == s {
			return
		}
	}
	s.mu.Lock()
	if len(s.errs) < maxSinkErrs {
		s.errs = append(s.errs, err)
	} else {
		s.dropped++
	}
	var next []*sink
	live := s.fwd[:0]
	for _, w := range s.fwd {
		if t := w.Value(); t != nil {
			next = append(next, t)
			live = append(live, w)
		}
	}
	clear(s.fwd[len(live):])
	s.fwd = live
	s.mu.Unlock()
	seen = append(seen, s)
	for _, t := range next {
		t.report(err, seen)
	}
}

// forward makes s report to t too (t sees s's panics from now on), and
// makes t's executables tell the host-function server if s's graph has
// host nodes.
func (s *sink) forward(t *sink) {
	if s == nil || t == nil || s == t {
		return
	}
	if s.hosts.Load() {
		t.hosts.Store(true)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.fwd {
		if w.Value() == t {
			return
		}
	}
	s.fwd = append(s.fwd, weak.Make(t))
}

// take returns the recorded errors, joined, and forgets them.
func (s *sink) take() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := s.errs
	if s.dropped > 0 {
		errs = append(errs, fmt.Errorf("graph: and %d more host-node panics", s.dropped))
	}
	s.errs, s.dropped = nil, 0
	return errors.Join(errs...)
}
