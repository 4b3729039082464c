package graph

// Graphs with nodes on two GPUs (see "Several GPUs" in doc.go). They need
// two devices and skip, saying so, on one. Their lifetime rules are proved
// on a CPU in tests/fakedriver (graph_multi_test.go), where two contexts
// of one device stand for two devices.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// gpuSide is the kernels of this package's module loaded in one context.
type gpuSide struct {
	ctx         *driver.Context
	mod         *driver.Module
	fill, addTo *driver.Function
}

func loadSide(t *testing.T, ctx *driver.Context, ptx []byte) *gpuSide {
	t.Helper()
	mod, err := ctx.LoadModule(ptx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mod.Close() })
	fill, err := mod.Function("fill")
	require.NoError(t, err)
	addTo, err := mod.Function("addTo")
	require.NoError(t, err)
	return &gpuSide{ctx: ctx, mod: mod, fill: fill, addTo: addTo}
}

// gpuPair is device 0's shared context with a stream, and device 1's
// primary context with a stream and the kernels loaded there.
type gpuPair struct {
	e  *testEnv
	s0 *driver.Stream
	c1 *driver.Context
	s1 *driver.Stream
	d1 *gpuSide
}

// twoGPUs skips t without a GPU (failing under PURECUDA_REQUIRE_GPU) and on
// a machine with one; what it opens on device 1 is closed when t ends.
func twoGPUs(t *testing.T) *gpuPair {
	t.Helper()
	e, s0 := setup(t)
	n, err := driver.DeviceCount()
	require.NoError(t, err)
	if n < 2 {
		t.Skipf("graphs across devices need two GPUs; this machine has %d", n)
	}
	dev1, err := driver.DeviceByOrdinal(1)
	require.NoError(t, err)
	c1, err := dev1.PrimaryContext()
	require.NoError(t, err)
	t.Cleanup(func() { _ = c1.Close() })
	s1, err := c1.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s1.Close() })
	return &gpuPair{e: e, s0: s0, c1: c1, s1: s1, d1: loadSide(t, c1, e.ptx)}
}

// setPeerAccess enables peer access between c0 and c1 both ways, or
// disables it, until t ends; enabling skips t where the devices cannot
// reach each other's memory.
func setPeerAccess(t *testing.T, c0, c1 *driver.Context, on bool) {
	t.Helper()
	if on {
		ok01, err := c0.Device().CanAccessPeer(c1.Device())
		require.NoError(t, err)
		ok10, err := c1.Device().CanAccessPeer(c0.Device())
		require.NoError(t, err)
		if !ok01 || !ok10 {
			t.Skip("devices 0 and 1 cannot access each other's memory")
		}
	}
	for _, pair := range [][2]*driver.Context{{c0, c1}, {c1, c0}} {
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

// warmMulti builds, launches and closes a small graph with nodes on both
// devices and copies between them, and a capture forking into device 1,
// so that what CUDA sets up once per process for such graphs is not
// counted against a test's memory.
func warmMulti(t *testing.T, p *gpuPair) {
	t.Helper()
	b0, err := driver.Alloc[int32](p.e.ctx, 256)
	require.NoError(t, err)
	defer b0.Close()
	b1, err := driver.Alloc[int32](p.c1, 256)
	require.NoError(t, err)
	defer b1.Close()
	g, err := New(p.e.ctx)
	require.NoError(t, err)
	defer g.Close()
	k, err := g.KernelWith(p.d1.fill, cfg(256), b1, int32(1), int32(256))
	require.NoError(t, err)
	c, err := g.After(k).Memcpy(Device(b0), Device(b1))
	require.NoError(t, err)
	_, err = g.After(c).On(p.c1).Memcpy(Device(b1), Device(b0))
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	require.NoError(t, exe.Launch(p.s0))
	require.NoError(t, p.s0.Synchronize())

	// And a capture that forks into device 1, replayed once.
	sc, err := BeginCapture(p.s0, CaptureRelaxed)
	require.NoError(t, err)
	require.NoError(t, sc.Fork(p.s1))
	require.NoError(t, p.s1.LaunchWith(p.d1.fill, cfg(256), b1, int32(2), int32(256)))
	cg, err := sc.End()
	require.NoError(t, err)
	defer cg.Close()
	cexe, err := cg.Instantiate()
	require.NoError(t, err)
	defer cexe.Close()
	require.NoError(t, cexe.Launch(p.s0))
	require.NoError(t, p.s0.Synchronize())
}

// wrongAt counts the elements of got that differ from want(i), and the
// first such index.
func wrongAt(got []int32, want func(i int) int32) (n, first int) {
	first = -1
	for i, v := range got {
		if v != want(i) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	return n, first
}

// TestGPUMultiDeviceGraphExact: one graph of device 0's context with a
// kernel node on each GPU and memcpy nodes between them (0 → 1 run by
// device 0, 1 → 0 run by device 1 through On), replayed 1000 times, with
// and without peer access: every replay runs every node once, in order,
// on the right device (an accumulator on device 0 sums each replay's
// result: 1000 × (3+i) exactly).
func TestGPUMultiDeviceGraphExact(t *testing.T) {
	p := twoGPUs(t)
	const n, launches = 1 << 20, 1000
	for _, access := range []bool{false, true} {
		t.Run(fmt.Sprintf("peer access %v", access), func(t *testing.T) {
			setPeerAccess(t, p.e.ctx, p.c1, access)
			alloc := func(ctx *driver.Context) *driver.Buffer[int32] {
				b, err := driver.Alloc[int32](ctx, n)
				require.NoError(t, err)
				t.Cleanup(func() { _ = b.Close() })
				return b
			}
			a0, out0, acc0 := alloc(p.e.ctx), alloc(p.e.ctx), alloc(p.e.ctx)
			b1, sum1 := alloc(p.c1), alloc(p.c1)
			g, err := New(p.e.ctx)
			require.NoError(t, err)
			defer g.Close()
			ms, err := g.On(p.c1).Memset(Device(sum1), 0, 4) // on device 1
			require.NoError(t, err)
			k0, err := g.KernelWith(p.e.fn["fill"], cfg(n), a0, int32(3), int32(n)) // on device 0
			require.NoError(t, err)
			m01, err := g.After(k0).Memcpy(Device(b1), Device(a0)) // run by device 0
			require.NoError(t, err)
			k1, err := g.After(m01, ms).KernelWith(p.d1.addTo, cfg(n), b1, sum1, int32(n)) // a kernel of device 1's module: on device 1
			require.NoError(t, err)
			m10, err := g.After(k1).On(p.c1).Memcpy(Device(out0), Device(sum1)) // run by device 1
			require.NoError(t, err)
			_, err = g.After(m10).KernelWith(p.e.fn["addTo"], cfg(n), out0, acc0, int32(n)) // on device 0
			require.NoError(t, err)
			_, err = g.InstantiateWith(InstantiateOptions{Flags: DeviceLaunch})
			assert.ErrorIs(t, err, driver.ErrInvalidArgument, "device launch needs one context")
			exe, err := g.Instantiate()
			require.NoError(t, err)
			defer exe.Close()
			require.NoError(t, acc0.Memset32(p.s0, 0))
			for i := range launches {
				require.NoError(t, exe.Launch(p.s0), "launch %d", i)
			}
			require.NoError(t, p.s0.Synchronize())
			acc, err := acc0.ToHost(p.s0)
			require.NoError(t, err)
			bad, first := wrongAt(acc, func(i int) int32 { return launches * (3 + int32(i)) })
			assert.Zero(t, bad, "accumulated replays: %d wrong, the first at %d", bad, first)
			out, err := out0.ToHost(p.s0)
			require.NoError(t, err)
			bad, first = wrongAt(out, func(i int) int32 { return 3 + int32(i) })
			assert.Zero(t, bad, "device 1's result copied back: %d wrong, the first at %d", bad, first)
			on1, err := sum1.ToHost(p.s1)
			require.NoError(t, err)
			bad, first = wrongAt(on1, func(i int) int32 { return 3 + int32(i) })
			assert.Zero(t, bad, "on device 1: %d wrong, the first at %d", bad, first)
		})
	}
}

// TestGPUMultiDeviceGraphClosedInEveryOrder: the graph, its executable,
// device 0's buffers and everything of a context made on device 1 (its
// buffers, module and the context itself) are closed in each of the 24
// orders. Until the executable is closed it replays exactly (16 launches
// after each close, the result read from a Go slice the graph writes); once
// all is closed, lifetime's counters and both devices' free memory
// (MemGetInfo) are back where they started.
func TestGPUMultiDeviceGraphClosedInEveryOrder(t *testing.T) {
	p := twoGPUs(t)
	const n = 1 << 16
	dev1 := p.c1.Device()
	warmMulti(t, p)
	names := []string{"graph", "exec", "device 0's buffers", "device 1's context"}
	for _, order := range perms(len(names)) {
		label := ""
		for _, i := range order {
			label += names[i] + "; "
		}
		t.Run(label, func(t *testing.T) {
			collect()
			free0, free1 := memFree(t, p.e.ctx), memFree(t, p.c1)
			st0 := lifetime.ReadStats()
			cx, err := dev1.NewContext(driver.ContextSchedAuto)
			require.NoError(t, err)
			side := loadSide(t, cx, p.e.ptx)
			a0, err := driver.Alloc[int32](p.e.ctx, n)
			require.NoError(t, err)
			out0, err := driver.Alloc[int32](p.e.ctx, n)
			require.NoError(t, err)
			b1, err := driver.Alloc[int32](cx, n)
			require.NoError(t, err)
			sum1, err := driver.Alloc[int32](cx, n)
			require.NoError(t, err)
			host := make([]int32, n)

			g, err := New(p.e.ctx)
			require.NoError(t, err)
			ms, err := g.On(cx).Memset(Device(sum1), 0, 4)
			require.NoError(t, err)
			k0, err := g.KernelWith(p.e.fn["fill"], cfg(n), a0, int32(11), int32(n))
			require.NoError(t, err)
			m01, err := g.After(k0).Memcpy(Device(b1), Device(a0))
			require.NoError(t, err)
			k1, err := g.After(m01, ms).KernelWith(side.addTo, cfg(n), b1, sum1, int32(n))
			require.NoError(t, err)
			m10, err := g.After(k1).On(cx).Memcpy(Device(out0), Device(sum1))
			require.NoError(t, err)
			_, err = g.After(m10).Memcpy(Slice(host), Device(out0))
			require.NoError(t, err)
			exe, err := g.Instantiate()
			require.NoError(t, err)

			closers := []func(){
				func() { _ = g.Close() },
				func() { _ = exe.Close() },
				func() { _ = a0.Close(); _ = out0.Close() },
				func() { _ = b1.Close(); _ = sum1.Close(); _ = side.mod.Close(); _ = cx.Close() },
			}
			open := true
			for _, i := range order {
				closers[i]()
				collect()
				if i == 1 {
					open = false
				}
				if !open {
					continue
				}
				for l := range 16 {
					clear(host)
					require.NoError(t, exe.Launch(p.s0), "after closing %s: launch %d", names[i], l)
					require.NoError(t, p.s0.Synchronize())
					bad, first := wrongAt(host, func(i int) int32 { return 11 + int32(i) })
					require.Zero(t, bad, "after closing %s, launch %d: %d wrong, the first at %d", names[i], l, bad, first)
				}
			}
			assert.Error(t, exe.Launch(p.s0), "a closed executable launches nothing")
			eventually(t, func() bool {
				s := lifetime.ReadStats()
				return s.Objects <= st0.Objects && s.Tables <= st0.Tables && s.Live <= st0.Live &&
					memFree(t, p.e.ctx) >= free0-(2<<20) && memFree(t, p.c1) >= free1-(2<<20)
			}, "everything released, on both devices")
		})
	}
}

// perms lists every order of 0..n-1.
func perms(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range perms(n - 1) {
		for i := 0; i <= len(p); i++ {
			out = append(out, append(append(append([]int(nil), p[:i]...), n-1), p[i:]...))
		}
	}
	return out
}

// TestGPUMultiDeviceCaptureExact: a capture on device 0's stream forks into
// device 1's stream (and joins it back), each filling a buffer of its
// device; a memcpy node added to the graph made brings device 1's buffer
// over and kernels on device 0 accumulate both. 1000 replays are exact,
// after device 1's stream, buffer handle and module are closed (the graph
// holds them), and everything is released once the graph and executable
// are closed.
func TestGPUMultiDeviceCaptureExact(t *testing.T) {
	p := twoGPUs(t)
	const n, launches = 1 << 18, 1000
	warmMulti(t, p)
	collect()
	free0, free1 := memFree(t, p.e.ctx), memFree(t, p.c1)
	st0 := lifetime.ReadStats()
	s1, err := p.c1.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	side := loadSide(t, p.c1, p.e.ptx)
	a0, err := driver.Alloc[int32](p.e.ctx, n)
	require.NoError(t, err)
	tmp0, err := driver.Alloc[int32](p.e.ctx, n)
	require.NoError(t, err)
	acc0, err := driver.Alloc[int32](p.e.ctx, n)
	require.NoError(t, err)
	b1, err := driver.Alloc[int32](p.c1, n)
	require.NoError(t, err)

	sc, err := BeginCapture(p.s0, CaptureRelaxed)
	require.NoError(t, err)
	require.NoError(t, p.s0.LaunchWith(p.e.fn["fill"], cfg(n), a0, int32(3), int32(n)))
	require.NoError(t, sc.Fork(s1))
	require.NoError(t, s1.LaunchWith(side.fill, cfg(n), b1, int32(7), int32(n)))
	require.NoError(t, sc.Join(s1))
	g, err := sc.End()
	require.NoError(t, err)
	tail, err := g.Nodes()
	require.NoError(t, err)
	m, err := g.After(tail...).On(p.c1).Memcpy(Device(tmp0), Device(b1))
	require.NoError(t, err)
	k, err := g.After(m).KernelWith(p.e.fn["addTo"], cfg(n), tmp0, acc0, int32(n))
	require.NoError(t, err)
	_, err = g.After(k).KernelWith(p.e.fn["addTo"], cfg(n), a0, acc0, int32(n))
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	require.NoError(t, s1.Close())
	require.NoError(t, b1.Close())
	require.NoError(t, side.mod.Close())
	collect()

	require.NoError(t, acc0.Memset32(p.s0, 0))
	for i := range launches {
		require.NoError(t, exe.Launch(p.s0), "launch %d", i)
	}
	require.NoError(t, p.s0.Synchronize())
	acc, err := acc0.ToHost(p.s0)
	require.NoError(t, err)
	bad, first := wrongAt(acc, func(i int) int32 { return launches * (10 + 2*int32(i)) })
	assert.Zero(t, bad, "%d wrong, the first at %d", bad, first)
	require.NoError(t, exe.Close())
	for _, b := range []*driver.Buffer[int32]{a0, tmp0, acc0} {
		require.NoError(t, b.Close())
	}
	eventually(t, func() bool {
		s := lifetime.ReadStats()
		return s.Objects <= st0.Objects && s.Tables <= st0.Tables && s.Live <= st0.Live &&
			memFree(t, p.c1) >= free1-(2<<20) && memFree(t, p.e.ctx) >= free0-(2<<20)
	}, "device 1's buffer, stream and module released with the executable, and everything on both devices")
}

// TestGPULibraryKernelOnAnotherDevice: a library kernel (which belongs to
// no context) runs on device 1 through On in a graph of device 0, after
// the library and device 1's context handle are closed.
func TestGPULibraryKernelOnAnotherDevice(t *testing.T) {
	p := twoGPUs(t)
	const n = 1 << 16
	lib, err := driver.LoadLibrary(p.e.ptx)
	require.NoError(t, err)
	fill, err := lib.Function("fill")
	require.NoError(t, err)
	cx, err := p.c1.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	b1, err := driver.Alloc[int32](cx, n)
	require.NoError(t, err)
	host := make([]int32, n)
	g, err := New(p.e.ctx)
	require.NoError(t, err)
	defer g.Close()
	k, err := g.On(cx).KernelWith(fill, cfg(n), b1, int32(9), int32(n))
	require.NoError(t, err)
	_, err = g.After(k).On(cx).Memcpy(Slice(host), Device(b1))
	require.NoError(t, err)
	exe, err := g.Instantiate()
	require.NoError(t, err)
	defer exe.Close()
	require.NoError(t, lib.Close())
	require.NoError(t, b1.Close())
	require.NoError(t, cx.Close())
	collect()
	for l := range 10 {
		clear(host)
		require.NoError(t, exe.Launch(p.s0))
		require.NoError(t, p.s0.Synchronize())
		bad, first := wrongAt(host, func(i int) int32 { return 9 + int32(i) })
		require.Zero(t, bad, "launch %d: %d wrong, the first at %d", l, bad, first)
	}
}
