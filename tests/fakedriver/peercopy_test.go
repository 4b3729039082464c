//go:build linux

package fakedriver_test

// Copies between buffers of two contexts (Buffer.CopyFrom and
// CopyFromAsync with a source of another context): fakecuda has one
// device, so the two contexts share it, which is what the copy's lifetime
// rules need. Its cuMemFree waits for the work of its own context only, so
// a buffer freed while a copy on a stream of the other context still
// reads it counts a bad use: the copies must hold it.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/lifetime"
)

// peerSide is one context of a peer copy test: the context, a stream of
// it and the kernels of fakecuda's module loaded in it.
type peerSide struct {
	ctx         *driver.Context
	s           *driver.Stream
	fill, empty *driver.Function
}

// newPeerSide makes a context (created, or the primary one), a stream and
// a module in it; they are closed when t ends.
func newPeerSide(t *testing.T, dev *driver.Device, primary bool) *peerSide {
	t.Helper()
	var c *driver.Context
	var err error
	if primary {
		c, err = dev.PrimaryContext()
	} else {
		c, err = dev.NewContext(driver.ContextSchedAuto)
	}
	require.NoError(t, err)
	s, err := c.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	mod, err := c.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	fill, err := mod.Function("fill")
	require.NoError(t, err)
	empty, err := mod.Function("empty")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = mod.Close()
		_ = s.Close()
		_ = c.Close()
	})
	return &peerSide{ctx: c, s: s, fill: fill, empty: empty}
}

// peerSetup is ltSetup (bad uses checked when t ends) with two sides: the
// primary context and a created one.
func peerSetup(t *testing.T) (*fixture, *peerSide, *peerSide) {
	t.Helper()
	f := ltSetup(t)
	dev := f.ctx.Device()
	return f, newPeerSide(t, dev, true), newPeerSide(t, dev, false)
}

func seq(v, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(v + i)
	}
	return out
}

// TestPeerCopyBothWaysExact: a copy between contexts, either way, on a
// stream (or the legacy stream) of either context, synchronous or not,
// copies every element.
func TestPeerCopyBothWaysExact(t *testing.T) {
	_, x, y := peerSetup(t)
	const n = 256
	for _, dir := range []struct {
		name     string
		from, to *peerSide
	}{{"primary to created", x, y}, {"created to primary", y, x}} {
		streams := map[string]*driver.Stream{
			"source's stream": dir.from.s, "destination's stream": dir.to.s,
			"source's legacy stream": dir.from.ctx.LegacyStream(), "destination's legacy stream": dir.to.ctx.LegacyStream(),
		}
		for on, s := range streams {
			for _, wait := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/wait=%v", dir.name, on, wait), func(t *testing.T) {
					want := seq(1000, n)
					src, err := driver.AllocCopy(dir.from.s, want)
					require.NoError(t, err)
					defer src.Close()
					dst, err := driver.AllocZeroed[int32](dir.to.s, n)
					require.NoError(t, err)
					defer dst.Close()
					if wait {
						require.NoError(t, dst.CopyFrom(s, src))
					} else {
						require.NoError(t, dst.CopyFromAsync(s, src))
						require.NoError(t, s.Synchronize())
					}
					got, err := dst.ToHost(dir.to.s)
					require.NoError(t, err)
					assert.Equal(t, want, got)
				})
			}
		}
	}
}

// TestPeerCopyViews: views copy, and are written, only their own
// elements; a source longer than the destination is refused.
func TestPeerCopyViews(t *testing.T) {
	_, x, y := peerSetup(t)
	src, err := driver.AllocCopy(x.s, seq(0, 16))
	require.NoError(t, err)
	defer src.Close()
	dst, err := driver.AllocCopy(y.s, seq(-100, 16))
	require.NoError(t, err)
	defer dst.Close()
	sv, err := src.Slice(4, 12)
	require.NoError(t, err)
	defer sv.Close()
	dv, err := dst.Slice(8, 16)
	require.NoError(t, err)
	defer dv.Close()
	require.NoError(t, dv.CopyFrom(x.s, sv))
	got, err := dst.ToHost(y.s)
	require.NoError(t, err)
	assert.Equal(t, append(seq(-100, 8), seq(4, 8)...), got, "elements 4-11 of the source into 8-15, the rest untouched")

	require.NoError(t, dst.CopyFromAsync(y.s, sv), "a shorter source goes to the start")
	require.NoError(t, y.s.Synchronize())
	got, err = dst.ToHost(y.s)
	require.NoError(t, err)
	assert.Equal(t, append(seq(4, 8), seq(4, 8)...), got)

	short, err := dst.Slice(0, 4)
	require.NoError(t, err)
	defer short.Close()
	assert.ErrorIs(t, short.CopyFrom(x.s, sv), driver.ErrInvalidArgument, "8 elements into 4")
	assert.ErrorIs(t, short.CopyFromAsync(y.s, src), driver.ErrInvalidArgument, "16 elements into 4")
}

// TestPeerCopyOrderedOnItsStream: the copy runs after the work queued on
// its stream before it (a slow kernel writing the source on the source's
// stream, or the destination on the destination's), and, through an
// event, after a slow kernel on the other context's stream.
func TestPeerCopyOrderedOnItsStream(t *testing.T) {
	_, x, y := peerSetup(t)
	const n = 64
	src, err := driver.AllocZeroed[int32](x.s, n)
	require.NoError(t, err)
	defer src.Close()
	dst, err := driver.AllocZeroed[int32](y.s, n)
	require.NoError(t, err)
	defer dst.Close()
	fcall(t, "fake_set_kernel_delay_us", 20000)
	check := func(want []int32, msg string) {
		t.Helper()
		got, err := dst.ToHost(y.s)
		require.NoError(t, err)
		assert.Equal(t, want, got, msg)
	}

	require.NoError(t, x.s.Launch(x.fill, g1, b1, src, int32(100), int32(n)))
	require.NoError(t, dst.CopyFromAsync(x.s, src))
	require.NoError(t, x.s.Synchronize())
	check(seq(100, n), "on the source's stream, after the kernel that wrote the source")

	require.NoError(t, y.s.Launch(y.fill, g1, b1, dst, int32(7), int32(n)))
	require.NoError(t, dst.CopyFrom(y.s, src))
	check(seq(100, n), "on the destination's stream, after the kernel that wrote the destination")

	ev, err := x.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer ev.Close()
	require.NoError(t, x.s.Launch(x.fill, g1, b1, src, int32(50), int32(n)))
	require.NoError(t, ev.Record(x.s))
	require.NoError(t, y.s.WaitEvent(ev))
	require.NoError(t, dst.CopyFrom(y.s, src))
	check(seq(50, n), "on the destination's stream, after an event recorded behind the kernel on the source's")
}

// TestPeerCopyHoldsBothBuffersUntilItRan: both buffers closed right after
// the copy was queued behind a slow kernel: the memory stays valid until
// the copy ran (the fake counts any use of freed memory), the copy is
// exact, and then the memory is freed. With either side's stream, and
// stream-ordered memory on either side.
func TestPeerCopyHoldsBothBuffersUntilItRan(t *testing.T) {
	_, x, y := peerSetup(t)
	const n = 64
	for _, on := range []string{"source's", "destination's"} {
		for _, kind := range []string{"Alloc", "AllocAsync"} {
			t.Run(on+"/"+kind, func(t *testing.T) {
				lifetime.Flush() // the frees the cases before handed over
				allocs := fcall(t, "fake_live_allocations")
				alloc := func(p *peerSide, v int) *driver.Buffer[int32] {
					var b *driver.Buffer[int32]
					var err error
					if kind == "Alloc" {
						b, err = driver.Alloc[int32](p.ctx, n)
					} else {
						b, err = driver.AllocAsync[int32](p.s, n)
					}
					require.NoError(t, err)
					require.NoError(t, b.CopyFromHost(p.s, seq(v, n)))
					return b
				}
				src, dst := alloc(x, 5), alloc(y, 0)
				side := x
				if on == "destination's" {
					side = y
				}
				// The result is read from managed memory of the stream's
				// context: for the source's stream, through a second copy
				// between contexts, which holds dst.
				out, err := driver.AllocManaged[int32](side.ctx, n)
				require.NoError(t, err)
				defer out.Close()
				s := side.s
				release := hold(t, "fake_set_kernel_delay_us") // the kernel runs until released: no timing
				require.NoError(t, s.Launch(side.empty, g1, b1), "a slow kernel first")
				require.NoError(t, dst.CopyFromAsync(s, src))
				require.NoError(t, out.CopyFromAsync(s, dst))
				// The buffer of the other context first: its free waits
				// for its own context's work only, none of which is the
				// copies'.
				first, second := src, dst
				if side == x {
					first, second = dst, src
				}
				require.NoError(t, first.Close())
				require.NoError(t, second.Close())
				assert.Equal(t, allocs+3, fcall(t, "fake_live_allocations"), "not freed while the copies may use them")
				release()
				require.NoError(t, s.Synchronize())
				host, err := out.HostSlice()
				require.NoError(t, err)
				assert.Equal(t, seq(5, n), host)
				assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_allocations") == allocs+1 }), "freed once the copies ran")
				ltNoBadUses(t)
			})
		}
	}
}

// TestPeerCopyRefusals: a stream of neither context, a source longer than
// the destination, a stream being captured, nil, zero and closed operands
// are errors that queue nothing (the destination keeps its elements, and
// the capture goes on).
func TestPeerCopyRefusals(t *testing.T) {
	f, x, y := peerSetup(t)
	z := newPeerSide(t, f.ctx.Device(), false) // a third context
	src, err := driver.AllocCopy(x.s, seq(1, 8))
	require.NoError(t, err)
	defer src.Close()
	long, err := driver.AllocCopy(x.s, seq(1, 9))
	require.NoError(t, err)
	defer long.Close()
	dst, err := driver.AllocCopy(y.s, seq(-8, 8))
	require.NoError(t, err)
	defer dst.Close()
	closed, err := driver.Alloc[int32](x.ctx, 8)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	closedStream, err := x.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, closedStream.Close())

	type call func(dst *driver.Buffer[int32], s *driver.Stream, src *driver.Buffer[int32]) error
	for _, c := range []struct {
		name string
		copy call
	}{
		{"CopyFrom", (*driver.Buffer[int32]).CopyFrom},
		{"CopyFromAsync", (*driver.Buffer[int32]).CopyFromAsync},
	} {
		for _, r := range []struct {
			name     string
			s        *driver.Stream
			dst, src *driver.Buffer[int32]
			want     error
		}{
			{"a stream of a third context", z.s, dst, src, driver.ErrInvalidArgument},
			{"the legacy stream of a third context", z.ctx.LegacyStream(), dst, src, driver.ErrInvalidArgument},
			{"a longer source", x.s, dst, long, driver.ErrInvalidArgument},
			{"a nil stream", nil, dst, src, driver.ErrNilStream},
			{"a zero stream", new(driver.Stream), dst, src, driver.ErrClosed},
			{"a closed stream", closedStream, dst, src, driver.ErrClosed},
			{"a nil source", x.s, dst, nil, driver.ErrInvalidArgument},
			{"a zero source", x.s, dst, new(driver.Buffer[int32]), driver.ErrClosed},
			{"a closed source", y.s, dst, closed, driver.ErrClosed},
			{"a zero destination", x.s, new(driver.Buffer[int32]), src, driver.ErrClosed},
			{"a closed destination", y.s, closed, dst, driver.ErrClosed},
			{"a nil destination", x.s, nil, src, driver.ErrInvalidArgument},
		} {
			assert.ErrorIs(t, c.copy(r.dst, r.s, r.src), r.want, "%s: %s", c.name, r.name)
		}
	}

	sc, err := graph.BeginCapture(y.s, graph.CaptureRelaxed)
	require.NoError(t, err)
	assert.ErrorIs(t, dst.CopyFromAsync(y.s, src), driver.ErrStreamCaptureUnsupported, "captured")
	assert.ErrorIs(t, dst.CopyFrom(y.s, src), driver.ErrStreamCaptureUnsupported, "captured")
	require.NoError(t, dst.Memset32Async(y.s, 4), "the capture goes on")
	g, err := sc.End()
	require.NoError(t, err, "the capture was not invalidated")
	require.NoError(t, g.Close())

	got, err := dst.ToHost(y.s)
	require.NoError(t, err)
	assert.Equal(t, seq(-8, 8), got, "nothing was copied")
}
