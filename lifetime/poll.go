package lifetime

import (
	"time"

	"github.com/purecuda/cuda/internal/hostfn"
)

// DefaultPollWindow is how long the host-function server polls after a host
// function was queued or run: long enough for a kernel or two before the
// host function, short enough to cost little CPU.
const DefaultPollWindow = 100 * time.Microsecond

// MaxPollWindow is the longest window SetPollWindow sets; longer ones are
// cut to it.
const MaxPollWindow = time.Second

// SetPollWindow sets how long the host-function server polls after a host
// function (a stream callback or a graph host node) was queued or run, and
// returns the previous window. A negative window counts as 0, one over
// MaxPollWindow as MaxPollWindow. The server keeps a CPU busy while it
// polls; in exchange a host function costs about what it costs in C
// instead of a few thread wake-ups more. A window of 0 turns polling off.
// On platforms other than linux/amd64 there is no polling server: the
// window is kept but has no effect.
func SetPollWindow(d time.Duration) time.Duration { return hostfn.SetPollWindow(d) }
