package driver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

func TestDeviceInfo(t *testing.T) {
	e, _ := setup(t)
	n, err := driver.DeviceCount()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 1)
	name, err := e.dev.Name()
	require.NoError(t, err)
	assert.NotEmpty(t, name)
	uuid, err := e.dev.UUID()
	require.NoError(t, err)
	assert.NotEqual(t, [16]byte{}, uuid)
	major, minor := e.dev.ComputeCapability()
	assert.Equal(t, fmt.Sprintf("sm_%d%d", major, minor), e.dev.Arch())
	mem, err := e.dev.TotalMemory()
	require.NoError(t, err)
	assert.Greater(t, mem, 1<<30)
	sms, err := e.dev.SMCount()
	require.NoError(t, err)
	assert.Greater(t, sms, 0)
	warp, err := e.dev.Attribute(driver.AttrWarpSize)
	require.NoError(t, err)
	assert.Equal(t, 32, warp)
	vmajor, vminor, err := driver.Version()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, vmajor, 12)

	dom, _ := e.dev.Attribute(driver.AttrPciDomainId)
	bus, _ := e.dev.Attribute(driver.AttrPciBusId)
	slot, _ := e.dev.Attribute(driver.AttrPciDeviceId)
	byBus, err := driver.DeviceByPCIBusID(fmt.Sprintf("%04x:%02x:%02x.0", dom, bus, slot))
	require.NoError(t, err)
	assert.Equal(t, e.dev.Ordinal(), byBus.Ordinal())
	free, total, err := e.ctx.MemGetInfo()
	require.NoError(t, err)
	assert.LessOrEqual(t, free, total)
	t.Logf("%s: %s, %s, %d SMs, %d GiB, driver %d.%d", e.dev, name, e.dev.Arch(), sms, mem>>30, vmajor, vminor)
}

func TestCreatedContextLifetime(t *testing.T) {
	e, _ := setup(t)
	c, err := e.dev.NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	buf, err := driver.Alloc[int32](c, 16)
	require.NoError(t, err)
	cs, err := c.NewStream(driver.StreamNonBlocking) // holds c too
	require.NoError(t, err)
	closeErr := c.Close()
	require.NoError(t, closeErr)
	assert.Equal(t, closeErr, c.Close(), "Close is idempotent")
	_, err = driver.Alloc[int32](c, 1)
	assert.ErrorIs(t, err, driver.ErrClosed, "nothing new from a closed context")
	// The buffer and the stream keep the context alive until they are
	// closed; its legacy stream, which holds nothing, is closed with it.
	require.NoError(t, buf.CopyFromHost(cs, []int32{1, 2, 3}))
	out := make([]int32, 3)
	require.NoError(t, buf.CopyToHost(cs, out))
	assert.Equal(t, []int32{1, 2, 3}, out)
	assert.ErrorIs(t, buf.CopyToHost(c.LegacyStream(), out), driver.ErrClosed)
	require.NoError(t, buf.Close())
	require.NoError(t, cs.Close())

	// Two retains of the primary context are the same context.
	p2, err := e.dev.PrimaryContext()
	require.NoError(t, err)
	var h1, h2 uintptr
	require.NoError(t, e.ctx.Raw(func(h uintptr) error { h1 = h; return nil }))
	require.NoError(t, p2.Raw(func(h uintptr) error { h2 = h; return nil }))
	assert.Equal(t, h1, h2)
	require.NoError(t, p2.Close())
}

func TestContextExecAffinity(t *testing.T) {
	e, _ := setup(t)
	sms, err := e.dev.SMCount()
	require.NoError(t, err)
	n, err := e.ctx.SMCount()
	require.NoError(t, err)
	assert.Equal(t, sms, n, "a context without a limit may use every SM")

	ok, err := e.dev.SMCountAffinitySupported()
	require.NoError(t, err)
	c, err := e.dev.NewContextWith(driver.ContextOptions{Flags: driver.ContextSchedAuto, SMCount: sms / 2})
	if !ok {
		// Outside MPS the driver refuses SM limits: the error says why
		// before cuCtxCreate is asked.
		require.ErrorIs(t, err, driver.ErrUnsupportedExecAffinity)
		assert.Contains(t, err.Error(), "MPS")
		t.Logf("SM-count affinity not supported on %s (no MPS): checked the refusal", e.dev)
		return
	}
	require.NoError(t, err)
	defer c.Close()
	got, err := c.SMCount()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, got, sms/2)
	assert.Less(t, got, sms)
}

func TestStreamsAndEvents(t *testing.T) {
	e, s := setup(t)
	least, greatest, err := e.ctx.StreamPriorityRange()
	require.NoError(t, err)
	hi, err := e.ctx.NewStreamWithPriority(driver.StreamNonBlocking, greatest)
	require.NoError(t, err)
	defer hi.Close()
	p, err := hi.Priority()
	require.NoError(t, err)
	assert.Equal(t, greatest, p)
	assert.GreaterOrEqual(t, least, greatest)

	done, err := s.Query()
	require.NoError(t, err)
	assert.True(t, done)

	start, err := e.ctx.NewEvent(driver.EventDefault)
	require.NoError(t, err)
	defer start.Close()
	end, err := e.ctx.NewEvent(driver.EventDefault)
	require.NoError(t, err)
	defer end.Close()
	require.NoError(t, start.Record(s))
	require.NoError(t, s.Launch(e.fn["spin"], driver.Grid(1), driver.Block(1), int64(20_000_000)))
	require.NoError(t, end.Record(s))
	// hi waits for end before its own work.
	require.NoError(t, hi.WaitEvent(end))
	ctr, err := driver.Alloc[uint64](e.ctx, 1)
	require.NoError(t, err)
	defer ctr.Close()
	require.NoError(t, ctr.Memset8(e.ctx.LegacyStream(), 0))
	require.NoError(t, hi.Launch(e.fn["incr"], driver.Grid(1), driver.Block(1), ctr))
	require.NoError(t, hi.Synchronize())
	ready, err := end.Query()
	require.NoError(t, err)
	assert.True(t, ready, "hi waited for the event")
	require.NoError(t, end.Synchronize())
	d, err := driver.Elapsed(start, end)
	require.NoError(t, err)
	assert.Greater(t, d, time.Duration(0))

	// SynchronizeContext gives up at the deadline; the work goes on.
	require.NoError(t, s.Launch(e.fn["spin"], driver.Grid(1), driver.Block(1), int64(2_000_000_000)))
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, s.SynchronizeContext(cctx), context.DeadlineExceeded)
	require.NoError(t, s.SynchronizeContext(context.Background()))

	// The legacy default stream, asked for by name.
	legacy := e.ctx.LegacyStream()
	require.NoError(t, legacy.Launch(e.fn["empty"], driver.Grid(1), driver.Block(1)))
	require.NoError(t, legacy.Synchronize())
	require.NoError(t, legacy.Close())
}

func TestHostFunctions(t *testing.T) {
	e, s := setup(t)
	before := lifetime.ReadStats().Callbacks
	var count atomic.Int64
	const n = 200
	for i := 0; i < n; i++ {
		require.NoError(t, s.LaunchHostFunc(func() { count.Add(1) }))
		if i%50 == 0 {
			require.NoError(t, s.Launch(e.fn["empty"], driver.Grid(1), driver.Block(1)))
		}
	}
	require.NoError(t, s.Synchronize())
	assert.EqualValues(t, n, count.Load(), "each closure ran exactly once")
	assert.Equal(t, before, lifetime.ReadStats().Callbacks, "every closure was released")

	// A panic is recovered, reported once by Synchronize, and the stream goes on.
	require.NoError(t, s.LaunchHostFunc(func() { panic("boom") }))
	require.NoError(t, s.LaunchHostFunc(func() { count.Add(1) }))
	err := s.Synchronize()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "host function panicked: boom")
	assert.NoError(t, s.Synchronize())
	assert.EqualValues(t, n+1, count.Load())
	require.NoError(t, s.Launch(e.fn["empty"], driver.Grid(1), driver.Block(1)))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, before, lifetime.ReadStats().Callbacks)
}

func TestMemory(t *testing.T) {
	e, s := setup(t)
	const n = 1 << 16
	buf, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	defer buf.Close()
	assert.Equal(t, n, buf.Len())
	assert.Equal(t, 4*n, buf.Size())
	in := make([]int32, n)
	for i := range in {
		in[i] = int32(i * 3)
	}
	require.NoError(t, buf.CopyFromHost(e.ctx.LegacyStream(), in))
	other, err := driver.Alloc[int32](e.ctx, n)
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.CopyFrom(e.ctx.LegacyStream(), buf))
	out := make([]int32, n)
	require.NoError(t, other.CopyToHost(e.ctx.LegacyStream(), out))
	assert.Equal(t, in, out)

	require.NoError(t, buf.Memset32(e.ctx.LegacyStream(), 0xDEADBEEF))
	require.NoError(t, buf.CopyToHost(e.ctx.LegacyStream(), out[:4]))
	assert.Equal(t, int32(-559038737), out[0])
	require.NoError(t, buf.Memset16(e.ctx.LegacyStream(), 0x0102))
	require.NoError(t, buf.CopyToHost(e.ctx.LegacyStream(), out[:1]))
	assert.Equal(t, int32(0x01020102), out[0])
	require.NoError(t, buf.Memset8(e.ctx.LegacyStream(), 0x7F))
	require.NoError(t, buf.CopyToHost(e.ctx.LegacyStream(), out[:1]))
	assert.Equal(t, int32(0x7F7F7F7F), out[0])
	require.NoError(t, buf.Memset32Async(s, 5))
	require.NoError(t, s.Synchronize())
	require.NoError(t, buf.CopyToHost(e.ctx.LegacyStream(), out[:1]))
	assert.Equal(t, int32(5), out[0])

	// Async copies from Go memory survive the garbage collector.
	dst := make([]int32, 4096)
	for round := 0; round < 20; round++ {
		func() {
			src := make([]int32, 4096)
			for i := range src {
				src[i] = int32(round*10000 + i)
			}
			require.NoError(t, buf.CopyFromHostAsync(s, src))
		}()
		runtime.GC()
		require.NoError(t, buf.CopyToHostAsync(s, dst))
		runtime.GC()
		require.NoError(t, s.Synchronize())
		assert.Equal(t, int32(round*10000+4095), dst[4095])
		assert.Equal(t, int32(round*10000), dst[0])
	}

	// Stream-ordered allocation, from the default pool and from a new pool.
	ab, err := driver.AllocAsync[float64](s, 1000)
	require.NoError(t, err)
	require.NoError(t, ab.Memset8Async(s, 0))
	require.NoError(t, ab.Close())
	pool, err := e.ctx.NewMemPool()
	require.NoError(t, err)
	require.NoError(t, pool.SetAttribute(driver.PoolAttrReleaseThreshold, 1<<20))
	thr, err := pool.Attribute(driver.PoolAttrReleaseThreshold)
	require.NoError(t, err)
	assert.EqualValues(t, 1<<20, thr)
	require.NoError(t, pool.SetAttribute(driver.PoolAttrReuseAllowOpportunistic, 0))
	opp, err := pool.Attribute(driver.PoolAttrReuseAllowOpportunistic)
	require.NoError(t, err)
	assert.EqualValues(t, 0, opp)
	pb, err := driver.AllocFromPool[int32](s, pool, 1024)
	require.NoError(t, err)
	require.NoError(t, pb.CopyFromHostAsync(s, in[:1024]))
	require.NoError(t, pb.CopyToHostAsync(s, out[:1024]))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, in[:1024], out[:1024])
	used, err := pool.Attribute(driver.PoolAttrUsedMemCurrent)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, used, 4096)
	require.NoError(t, pb.Close())
	require.NoError(t, s.Synchronize())
	require.NoError(t, pool.Trim(0))
	require.NoError(t, pool.Close())
	def, err := e.ctx.DefaultMemPool()
	require.NoError(t, err)
	_, err = def.Attribute(driver.PoolAttrReleaseThreshold)
	require.NoError(t, err)

	// Pinned host memory.
	hb, err := driver.AllocHost[int32](e.ctx, 1024, driver.HostAllocDefault)
	require.NoError(t, err)
	for i := range hb.Slice() {
		hb.Slice()[i] = int32(-i)
	}
	require.NoError(t, buf.CopyFromPinnedAsync(s, hb))
	hb2, err := driver.AllocHost[int32](e.ctx, 1024, driver.HostAllocPortable)
	require.NoError(t, err)
	require.NoError(t, buf.CopyToPinnedAsync(s, hb2))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, hb.Slice(), hb2.Slice())
	require.NoError(t, hb.Close())
	require.NoError(t, hb2.Close())
	assert.Nil(t, hb.Slice())

	// Registered Go memory.
	goMem := make([]int32, 8192)
	reg, err := driver.RegisterHost(e.ctx, goMem)
	require.NoError(t, err)
	require.NoError(t, buf.CopyToHostAsync(s, reg.Slice()))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, int32(0), goMem[0])
	assert.Equal(t, int32(-1023), goMem[1023])
	require.NoError(t, reg.Close())

	// Managed memory, written by a kernel, read from the host.
	m, err := driver.AllocManaged[int32](e.ctx, 256)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(256), m, int32(1000), int32(256)))
	require.NoError(t, s.Synchronize())
	hs, err := m.HostSlice()
	require.NoError(t, err)
	assert.Equal(t, int32(1000), hs[0])
	assert.Equal(t, int32(1255), hs[255])
	_, err = buf.HostSlice()
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "device memory has no host view")
}

// TestHoldDefersFree: memory stays allocated after Close while a
// dependent (a graph node) holds it.
func TestHoldDefersFree(t *testing.T) {
	e, _ := setup(t)
	b, err := driver.Alloc[int32](e.ctx, 1024)
	require.NoError(t, err)
	ptr := b.Ptr()
	valid := func() bool { return allocated(ptr) }
	require.True(t, valid())
	ref, err := seam.Hold(b)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	assert.ErrorIs(t, b.CopyFromHost(e.ctx.LegacyStream(), []int32{1}), driver.ErrClosed)
	assert.True(t, valid(), "still allocated: a reference is held")
	require.NoError(t, ref.Release())
	lifetime.Flush() // Close handed its reference to the release queue
	assert.False(t, valid(), "freed with the last reference")
	_, err = seam.Hold(b)
	assert.ErrorIs(t, err, driver.ErrClosed)
}

func TestModulesAndFunctions(t *testing.T) {
	e, s := setup(t)
	add4 := e.fn["add4"]
	n, known, err := add4.ParamCount()
	require.NoError(t, err)
	require.True(t, known, "driver 580 has cuFuncGetParamInfo")
	assert.Equal(t, 4, n)
	mt, err := add4.MaxThreadsPerBlock()
	require.NoError(t, err)
	assert.Greater(t, mt, 0)
	_, err = add4.NumRegisters()
	require.NoError(t, err)
	blocks, err := add4.MaxActiveBlocksPerSM(128, 0)
	require.NoError(t, err)
	assert.Greater(t, blocks, 0)
	grid, block, err := e.fn["vadd"].SuggestedBlockSize(0)
	require.NoError(t, err)
	assert.Greater(t, grid, 0)
	assert.Greater(t, block, 0)
	require.NoError(t, e.fn["vadd"].SetAttribute(driver.FuncAttrMaxDynamicSharedSizeBytes, 1024))

	g, size, err := e.mod.Global("answer")
	require.NoError(t, err)
	assert.Equal(t, 4, size)
	assert.NotZero(t, g)

	// A context-independent library, launched on this context's stream.
	lib, err := driver.LoadLibrary(e.ptx)
	require.NoError(t, err)
	defer lib.Close()
	lf, err := lib.Function("add4")
	require.NoError(t, err)
	out, err := driver.Alloc[uint32](e.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	require.NoError(t, s.Launch(lf, driver.Grid(1), driver.Block(1), out, uint32(1), uint32(2), uint32(3)))
	require.NoError(t, s.Synchronize())
	got := make([]uint32, 1)
	require.NoError(t, out.CopyToHost(e.ctx.LegacyStream(), got))
	assert.Equal(t, uint32(6), got[0])
	ln, known, err := lf.ParamCount()
	require.NoError(t, err)
	assert.True(t, known)
	assert.Equal(t, 4, ln)
	// A library kernel's parameters are read with a context current: the
	// launch's, a buffer argument's, or else the active primary context's.
	lv, err := lib.Function("vadd")
	require.NoError(t, err)
	ln, known, err = lv.ParamCount()
	require.NoError(t, err, "read under the active primary context")
	assert.True(t, known)
	assert.Equal(t, 4, ln)
	lfill, err := lib.Function("fill")
	require.NoError(t, err)
	fa, err := lfill.NewArgs(out, int32(5), int32(1))
	require.NoError(t, err, "read under the buffer's context")
	require.NoError(t, s.LaunchArgs(fa, driver.Grid(1), driver.Block(1)))
	require.NoError(t, s.Synchronize())
	require.NoError(t, fa.Close())
	require.NoError(t, out.CopyToHost(e.ctx.LegacyStream(), got))
	assert.Equal(t, uint32(5), got[0])
	_, err = lfill.NewArgs(out, int32(5))
	assert.ErrorContains(t, err, "takes 3 arguments, got 2")
	_, err = lf.MaxThreadsPerBlock()
	require.NoError(t, err)
	// Library kernels take attributes per device.
	require.NoError(t, lf.SetAttributeOn(e.dev, driver.FuncAttrMaxDynamicSharedSizeBytes, 2048))
	v, err := lf.AttributeOn(e.dev, driver.FuncAttrMaxDynamicSharedSizeBytes)
	require.NoError(t, err)
	assert.Equal(t, 2048, v)
	v, err = e.fn["vadd"].AttributeOn(e.dev, driver.FuncAttrMaxDynamicSharedSizeBytes)
	require.NoError(t, err)
	assert.Equal(t, 1024, v)
}

func TestLaunchCorrectness(t *testing.T) {
	e, s := setup(t)
	const n = 100_003
	a, b := make([]float32, n), make([]float32, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range a {
		a[i], b[i] = r.Float32()*1000, r.Float32()*1000
	}
	da, err := driver.Alloc[float32](e.ctx, n)
	require.NoError(t, err)
	defer da.Close()
	db, err := driver.Alloc[float32](e.ctx, n)
	require.NoError(t, err)
	defer db.Close()
	dc, err := driver.Alloc[float32](e.ctx, n)
	require.NoError(t, err)
	defer dc.Close()
	require.NoError(t, da.CopyFromHostAsync(s, a))
	require.NoError(t, db.CopyFromHostAsync(s, b))
	require.NoError(t, s.Launch(e.fn["vadd"], driver.Grid((n+255)/256), driver.Block(256), da, db, dc, int32(n)))
	c := make([]float32, n)
	require.NoError(t, dc.CopyToHostAsync(s, c))
	require.NoError(t, s.Synchronize())
	for i := range c {
		if c[i] != a[i]+b[i] {
			t.Fatalf("c[%d] = %v, want %v", i, c[i], a[i]+b[i])
		}
	}

	// A struct by value.
	out, err := driver.Alloc[float64](e.ctx, 4)
	require.NoError(t, err)
	defer out.Close()
	require.NoError(t, s.Launch(e.fn["structArg"], driver.Grid(1), driver.Block(1), params{A: -7, B: 1.25, C: 1 << 40, D: 3.5}, out))
	require.NoError(t, s.Synchronize())
	got := make([]float64, 4)
	require.NoError(t, out.CopyToHost(e.ctx.LegacyStream(), got))
	assert.Equal(t, []float64{-7, 1.25, 1 << 40, 3.5}, got)

	// More arguments than a block holds inline, with a struct among them.
	sum, err := driver.Alloc[int64](e.ctx, 1)
	require.NoError(t, err)
	defer sum.Close()
	p := params{A: 1000, B: 2000, C: 3000, D: 4000}
	for round := int64(0); round < 3; round++ {
		require.NoError(t, s.Launch(e.fn["many"], driver.Grid(1), driver.Block(1),
			sum, int32(1), int8(2), int16(3), int64(4)+round, float32(5), float64(6), p, uint32(7), uint8(8), int64(9)))
		require.NoError(t, s.Synchronize())
		v := make([]int64, 1)
		require.NoError(t, sum.CopyToHost(e.ctx.LegacyStream(), v))
		assert.Equal(t, 10045+round, v[0], "round %d", round)
	}

	// Prepared arguments, changed between launches.
	res, err := driver.Alloc[uint32](e.ctx, 1)
	require.NoError(t, err)
	args, err := e.fn["add4"].NewArgs(res, uint32(1), uint32(2), uint32(3))
	require.NoError(t, err)
	require.NoError(t, s.LaunchArgs(args, driver.Grid(1), driver.Block(1)))
	require.NoError(t, s.Synchronize())
	u := make([]uint32, 1)
	require.NoError(t, res.CopyToHost(e.ctx.LegacyStream(), u))
	assert.Equal(t, uint32(6), u[0])
	require.NoError(t, driver.SetArg(args, 3, uint32(100)))
	require.NoError(t, s.LaunchArgs(args, driver.Grid(1), driver.Block(1)))
	require.NoError(t, s.Synchronize())
	require.NoError(t, res.CopyToHost(e.ctx.LegacyStream(), u))
	assert.Equal(t, uint32(103), u[0])
	// Raw handles serve a launch through the table.
	var fh, sh uintptr
	require.NoError(t, e.fn["add4"].Raw(func(h uintptr) error { fh = h; return nil }))
	require.NoError(t, s.Raw(func(h uintptr) error { sh = h; return nil }))
	rp, x, y, z := uint64(res.Ptr()), uint32(10), uint32(20), uint32(30)
	kp := []unsafe.Pointer{unsafe.Pointer(&rp), unsafe.Pointer(&x), unsafe.Pointer(&y), unsafe.Pointer(&z)}
	require.NoError(t, cu.LaunchKernel(cu.CUfunction(fh), 1, 1, 1, 1, 1, 1, 0, cu.CUstream(sh), &kp[0], nil))
	require.NoError(t, s.Synchronize())
	require.NoError(t, res.CopyToHost(e.ctx.LegacyStream(), u))
	assert.Equal(t, uint32(60), u[0])
	// The args hold the buffer: Close of the buffer defers its free.
	require.NoError(t, res.Close())
	require.NoError(t, s.LaunchArgs(args, driver.Grid(1), driver.Block(1)))
	require.NoError(t, s.Synchronize())
	require.NoError(t, args.Close())
	assert.ErrorIs(t, s.LaunchArgs(args, driver.Grid(1), driver.Block(1)), driver.ErrClosed)

	// Clusters and cooperative launches go through cuLaunchKernelEx.
	require.NoError(t, s.LaunchWith(e.fn["empty"], driver.LaunchConfig{Grid: driver.Grid(4), Block: driver.Block(32), Cluster: driver.Cluster(2)}))
	require.NoError(t, s.LaunchWith(e.fn["empty"], driver.LaunchConfig{Grid: driver.Grid(2), Block: driver.Block(32), Cooperative: true}))
	require.NoError(t, s.LaunchWith(e.fn["empty"], driver.LaunchConfig{Grid: driver.Grid(2), Block: driver.Block(32), SharedMem: 1024}))
	require.NoError(t, s.Synchronize())
}

func TestZeroAllocHotPaths(t *testing.T) {
	if gputest.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	e, s := setup(t)
	out, err := driver.Alloc[uint32](e.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	args, err := e.fn["add4"].NewArgs(out, uint32(1), uint32(2), uint32(3))
	require.NoError(t, err)
	defer args.Close()
	ev, err := e.ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer ev.Close()
	grid, block := driver.Grid(1), driver.Block(1)
	allocs := testing.AllocsPerRun(500, func() {
		_ = s.LaunchArgs(args, grid, block)
		_ = driver.SetArg(args, 1, uint32(5))
		_ = ev.Record(s)
	})
	assert.Zero(t, allocs, "LaunchArgs, SetArg and Event.Record")
	require.NoError(t, s.Synchronize())
	allocs = testing.AllocsPerRun(100, func() { _ = s.Synchronize() })
	assert.Zero(t, allocs, "Stream.Synchronize")
}

func TestPeerAccess(t *testing.T) {
	e, _ := setup(t)
	n, err := driver.DeviceCount()
	require.NoError(t, err)
	if n < 2 {
		t.Skipf("peer access needs two GPUs; this machine has %d", n)
	}
	d1, err := driver.DeviceByOrdinal(1)
	require.NoError(t, err)
	ok, err := e.dev.CanAccessPeer(d1)
	require.NoError(t, err)
	if !ok {
		t.Skip("devices 0 and 1 cannot access each other")
	}
	c1, err := d1.PrimaryContext()
	require.NoError(t, err)
	defer c1.Close()
	require.NoError(t, e.ctx.EnablePeerAccess(c1))
	require.NoError(t, e.ctx.DisablePeerAccess(c1))
}
