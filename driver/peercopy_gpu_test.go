package driver_test

// Copies between buffers of two devices (Buffer.CopyFrom and
// CopyFromAsync with a source of another device's context), with and
// without peer access. They need two GPUs and skip, saying so, on one.
// Their lifetime rules are proved on a CPU in tests/fakedriver
// (peercopy_test.go, peercopy_close_test.go).

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

// peerEnv is device 0's shared context with a stream, and device 1's
// primary context with a stream.
type peerEnv struct {
	e      *testEnv
	c0, c1 *driver.Context
	s0, s1 *driver.Stream
}

// peerGPUs skips t without a GPU (failing under PURECUDA_REQUIRE_GPU) and
// on a machine with one; the context and stream of device 1 are closed
// when t ends.
func peerGPUs(t *testing.T) *peerEnv {
	t.Helper()
	e, s0 := setup(t)
	n, err := driver.DeviceCount()
	require.NoError(t, err)
	if n < 2 {
		t.Skipf("copies between devices need two GPUs; this machine has %d", n)
	}
	d1, err := driver.DeviceByOrdinal(1)
	require.NoError(t, err)
	c1, err := d1.PrimaryContext()
	require.NoError(t, err)
	t.Cleanup(func() { _ = c1.Close() })
	s1, err := c1.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s1.Close() })
	return &peerEnv{e: e, c0: e.ctx, c1: c1, s0: s0, s1: s1}
}

// setPeerAccess enables peer access both ways, or disables it, until t
// ends; enabling skips t where the devices cannot access each other.
func (p *peerEnv) setPeerAccess(t *testing.T, on bool) {
	t.Helper()
	if on {
		ok01, err := p.c0.Device().CanAccessPeer(p.c1.Device())
		require.NoError(t, err)
		ok10, err := p.c1.Device().CanAccessPeer(p.c0.Device())
		require.NoError(t, err)
		if !ok01 || !ok10 {
			t.Skip("devices 0 and 1 cannot access each other's memory")
		}
	}
	for _, pair := range [][2]*driver.Context{{p.c0, p.c1}, {p.c1, p.c0}} {
		a, b := pair[0], pair[1]
		if !on {
			if err := a.DisablePeerAccess(b); !errors.Is(err, driver.ErrPeerAccessNotEnabled) {
				require.NoError(t, err)
			}
			continue
		}
		err := a.EnablePeerAccess(b)
		if errors.Is(err, driver.ErrPeerAccessAlreadyEnabled) {
			continue
		}
		require.NoError(t, err)
		t.Cleanup(func() { _ = a.DisablePeerAccess(b) })
	}
}

// peerPattern is n words that differ from each other and from seed's.
func peerPattern(seed uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)*2654435761 ^ seed
	}
	return out
}

// mismatches counts the elements where got and want differ, and the first.
func mismatches[T comparable](got, want []T) (n, first int) {
	first = -1
	for i := range got {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	return n, first
}

// TestPeerCopyBetweenDevicesExact: a copy between the two devices, either
// way, on a stream of either, synchronous or not, with and without peer
// access, copies every element of 16 MiB exactly; views copy and are
// written only their own elements.
func TestPeerCopyBetweenDevicesExact(t *testing.T) {
	p := peerGPUs(t)
	const n = 4 << 20
	for _, access := range []bool{false, true} {
		t.Run(fmt.Sprintf("peer access %v", access), func(t *testing.T) {
			p.setPeerAccess(t, access)
			type side struct {
				name string
				s    *driver.Stream
			}
			d0, d1 := side{"device 0", p.s0}, side{"device 1", p.s1}
			for _, dir := range [][2]side{{d0, d1}, {d1, d0}} {
				from, to := dir[0], dir[1]
				for _, on := range []side{from, to} {
					for _, wait := range []bool{true, false} {
						name := fmt.Sprintf("%s to %s/on %s/wait %v", from.name, to.name, on.name, wait)
						t.Run(name, func(t *testing.T) {
							want := peerPattern(uint32(len(name)), n)
							src, err := driver.AllocCopy(from.s, want)
							require.NoError(t, err)
							defer src.Close()
							dst, err := driver.AllocZeroed[uint32](to.s, n)
							require.NoError(t, err)
							defer dst.Close()
							if wait {
								require.NoError(t, dst.CopyFrom(on.s, src))
							} else {
								require.NoError(t, dst.CopyFromAsync(on.s, src))
								require.NoError(t, on.s.Synchronize())
							}
							got, err := dst.ToHost(to.s)
							require.NoError(t, err)
							bad, first := mismatches(got, want)
							assert.Zero(t, bad, "elements not copied (first at %d)", first)

							// A quarter of the source, from its second
							// quarter, into the start of the destination.
							require.NoError(t, dst.Memset32(to.s, 0))
							sv, err := src.Slice(n/4, n/2)
							require.NoError(t, err)
							defer sv.Close()
							dv, err := dst.Slice(0, n/4)
							require.NoError(t, err)
							defer dv.Close()
							require.NoError(t, dv.CopyFrom(on.s, sv))
							got, err = dst.ToHost(to.s)
							require.NoError(t, err)
							want = append(append([]uint32{}, want[n/4:n/2]...), make([]uint32, n-n/4)...)
							bad, first = mismatches(got, want)
							assert.Zero(t, bad, "views: elements wrong (first at %d)", first)
						})
					}
				}
			}
		})
	}
}

// TestPeerCopyOrderedBehindKernels: the copy runs after a kernel of about
// 50 ms queued before it on its stream, whichever device's stream that is
// and whichever buffer the kernel writes, and, through an event, after one
// on the other device's stream.
func TestPeerCopyOrderedBehindKernels(t *testing.T) {
	p := peerGPUs(t)
	mod0, spin0 := loadSpin(t, p.e)
	defer mod0.Close()
	ptx, err := spinPTX()
	require.NoError(t, err)
	mod1, err := p.c1.LoadModule(ptx)
	require.NoError(t, err)
	defer mod1.Close()
	spin1, err := mod1.Function("spinfill")
	require.NoError(t, err)
	grid, block := driver.Grid(raceN/256), driver.Block(256)
	for _, access := range []bool{false, true} {
		t.Run(fmt.Sprintf("peer access %v", access), func(t *testing.T) {
			p.setPeerAccess(t, access)
			src, err := driver.AllocZeroed[int32](p.s0, raceN)
			require.NoError(t, err)
			defer src.Close()
			dst, err := driver.AllocZeroed[int32](p.s1, raceN)
			require.NoError(t, err)
			defer dst.Close()
			check := func(want int32, msg string) {
				t.Helper()
				got, err := dst.ToHost(p.c1.LegacyStream()) // waits for nothing of s0 and s1
				require.NoError(t, err)
				bad, first := wrong(got, want)
				assert.Zero(t, bad, "%s: %d elements not %d (first at %d)", msg, bad, want, first)
			}

			require.NoError(t, p.s0.Launch(spin0, grid, block, src, int32(9), int32(raceN), spinCycles))
			require.NoError(t, dst.CopyFromAsync(p.s0, src))
			require.NoError(t, p.s0.Synchronize())
			check(9, "on the source's stream, behind the kernel writing the source")

			require.NoError(t, src.Memset32(p.s0, 1))
			require.NoError(t, p.s1.Launch(spin1, grid, block, dst, int32(7), int32(raceN), spinCycles))
			require.NoError(t, dst.CopyFrom(p.s1, src))
			check(1, "on the destination's stream, behind the kernel writing the destination")

			ev, err := p.c0.NewEvent(driver.EventDisableTiming)
			require.NoError(t, err)
			defer ev.Close()
			require.NoError(t, p.s0.Launch(spin0, grid, block, src, int32(5), int32(raceN), spinCycles))
			require.NoError(t, ev.Record(p.s0))
			require.NoError(t, p.s1.WaitEvent(ev))
			require.NoError(t, dst.CopyFrom(p.s1, src))
			check(5, "on the destination's stream, behind an event recorded after the kernel on the source's")
		})
	}
}

// TestPeerCopyHoldsTheOtherBufferAndItsContext: a copy between the
// devices is queued behind a kernel of about 50 ms on one device's stream,
// and the buffer on the other device (in a context made for it) and its
// context are closed at once; that device's memory is then allocated and
// overwritten. The copy still reads the source's values, or writes into no
// memory handed out again: the buffer was not freed, nor its context
// destroyed, before the copy ran.
func TestPeerCopyHoldsTheOtherBufferAndItsContext(t *testing.T) {
	p := peerGPUs(t)
	mod0, spin0 := loadSpin(t, p.e)
	defer mod0.Close()
	ptx, err := spinPTX()
	require.NoError(t, err)
	mod1, err := p.c1.LoadModule(ptx)
	require.NoError(t, err)
	defer mod1.Close()
	spin1, err := mod1.Function("spinfill")
	require.NoError(t, err)
	const n = 1 << 20
	for _, access := range []bool{false, true} {
		for _, closing := range []string{"source", "destination"} {
			t.Run(fmt.Sprintf("peer access %v/%s", access, closing), func(t *testing.T) {
				p.setPeerAccess(t, access)
				// The closed buffer's device: 0 for the source, 1 for the
				// destination; the copy runs on the other device's stream.
				dev, mine, s, spin := p.c0.Device(), p.c1, p.s1, spin1
				if closing == "destination" {
					dev, mine, s, spin = p.c1.Device(), p.c0, p.s0, spin0
				}
				c, err := dev.NewContext(driver.ContextSchedAuto)
				require.NoError(t, err)
				theirs, err := driver.AllocCopy(c.LegacyStream(), peerPattern(3, n))
				require.NoError(t, err)
				kept, err := driver.AllocZeroed[uint32](s, n)
				require.NoError(t, err)
				defer kept.Close()
				scratch, err := driver.Alloc[int32](mine, 1)
				require.NoError(t, err)
				defer scratch.Close()
				require.NoError(t, s.Launch(spin, driver.Grid(1), driver.Block(1), scratch, int32(0), int32(1), spinCycles))
				if closing == "source" {
					require.NoError(t, kept.CopyFromAsync(s, theirs))
				} else {
					require.NoError(t, theirs.CopyFromAsync(s, kept))
				}
				require.NoError(t, theirs.Close())
				require.NoError(t, c.Close())
				other, err := dev.PrimaryContext()
				require.NoError(t, err)
				defer other.Close()
				ls := other.LegacyStream()
				var junk []*driver.Buffer[uint32]
				for range 4 { // memory of the closed buffer's device, where a freed one would be
					j, err := driver.Alloc[uint32](other, n)
					require.NoError(t, err)
					defer j.Close()
					require.NoError(t, j.Memset32(ls, 0xdeadbeef))
					junk = append(junk, j)
				}
				require.NoError(t, s.Synchronize())
				if closing == "source" {
					got, err := kept.ToHost(s)
					require.NoError(t, err)
					bad, first := mismatches(got, peerPattern(3, n))
					assert.Zero(t, bad, "the copy read memory freed under it (first at %d)", first)
					return
				}
				for i, j := range junk {
					got, err := j.ToHost(ls)
					require.NoError(t, err)
					bad, first := wrong(got, uint32(0xdeadbeef))
					assert.Zero(t, bad, "buffer %d allocated after the close was written by the copy (first at %d)", i, first)
				}
			})
		}
	}
}

// TestCopyOnAPeerStreamHoldsBothBuffers: a copy between two buffers of
// device 1, queued with peer access on a stream of device 0 behind a
// kernel of about 50 ms there, then the source (or the destination)
// closed at once and device 1's memory allocated and overwritten: the
// copy still reads the source's values (or writes into no memory handed
// out again), so neither was freed before it ran.
func TestCopyOnAPeerStreamHoldsBothBuffers(t *testing.T) {
	p := peerGPUs(t)
	p.setPeerAccess(t, true)
	mod0, spin0 := loadSpin(t, p.e)
	defer mod0.Close()
	const n = 1 << 20
	scratch, err := driver.Alloc[int32](p.c0, 1)
	require.NoError(t, err)
	defer scratch.Close()
	for _, closing := range []string{"source", "destination"} {
		t.Run(closing, func(t *testing.T) {
			src, err := driver.AllocCopy(p.s1, peerPattern(7, n))
			require.NoError(t, err)
			defer src.Close()
			dst, err := driver.AllocZeroed[uint32](p.s1, n)
			require.NoError(t, err)
			defer dst.Close()
			require.NoError(t, p.s0.Launch(spin0, driver.Grid(1), driver.Block(1), scratch, int32(0), int32(1), spinCycles))
			require.NoError(t, dst.CopyFromAsync(p.s0, src))
			if closing == "source" {
				require.NoError(t, src.Close())
			} else {
				require.NoError(t, dst.Close())
			}
			var junk []*driver.Buffer[uint32]
			for range 4 { // memory of device 1 that a freed buffer would be among
				j, err := driver.Alloc[uint32](p.c1, n)
				require.NoError(t, err)
				defer j.Close()
				require.NoError(t, j.Memset32(p.s1, 0xdeadbeef))
				junk = append(junk, j)
			}
			require.NoError(t, p.s0.Synchronize())
			if closing == "source" {
				got, err := dst.ToHost(p.s1)
				require.NoError(t, err)
				bad, first := mismatches(got, peerPattern(7, n))
				assert.Zero(t, bad, "the copy read memory freed under it (first at %d)", first)
				return
			}
			for i, j := range junk {
				got, err := j.ToHost(p.s1)
				require.NoError(t, err)
				bad, first := wrong(got, uint32(0xdeadbeef))
				assert.Zero(t, bad, "buffer %d allocated after the close was written by the copy (first at %d)", i, first)
			}
		})
	}
}
