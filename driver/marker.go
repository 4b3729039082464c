package driver

import (
	"errors"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/seam"
)

// Markers (seam.Mark): an event recorded on a stream, polled without
// blocking, for package nccl, which must wait for a communicator's work
// while watching for its failure.

func init() {
	seam.Mark = func(s any) (seam.Marker, bool, error) {
		st, _ := s.(*Stream)
		if st == nil {
			return nil, false, invalid("mark", "nil stream")
		}
		ev, err := st.recordUncaptured()
		switch {
		case err == errRawCapture || (err == nil && ev == 0):
			return nil, false, nil
		case err != nil:
			return nil, false, st.ctx.sawError(err)
		}
		return &marker{ctx: st.ctx, ev: ev}, true, nil
	}
}

// marker is a recorded event of a stream of ctx (held by the stream the
// caller holds, and by the marker's user until Release).
type marker struct {
	ctx *Context
	ev  cu.CUevent
}

// Passed queries the event, with the thread's capture mode relaxed (a
// capture in global mode on another thread would refuse the query and be
// invalidated by it).
func (m *marker) Passed() (bool, error) {
	var err error
	rerr := relaxedHere(func() error {
		err = bound(m.ctx, func() error { return cu.EventQuery(m.ev) })
		return nil
	})
	if rerr != nil {
		return false, rerr
	}
	err = m.ctx.sawError(err)
	switch {
	case err == nil, isSticky(err):
		return true, nil
	case errors.Is(err, ErrNotReady):
		return false, nil
	}
	return false, err
}

// Release destroys the event.
func (m *marker) Release() {
	if m.ev != 0 {
		_ = bound(m.ctx, func() error { return cu.EventDestroy(m.ev) })
		m.ev = 0
	}
}
