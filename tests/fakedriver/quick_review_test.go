//go:build linux

package fakedriver_test

// Review tests for 9473ca1 (Stream.Launch's and Stream.LaunchArgs' quick
// paths) and 158c7fd (Object.Release inlined). Each test says whether it
// is the regression test of a bug the review found (fixed since) or
// checks something the other tests do not reach.

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// Regression (older than the quick paths, which reached it through usedOn): a
// stream-ordered buffer of stream A launched on stream B while B is being
// closed. The launch holds B, but Close marks B closed; usedOn then
// records B with Stream.Hold, which refuses a closed stream, so nothing is
// recorded. The kernel is queued on B all the same, and the buffer's free
// on A does not wait for it: the kernel, held back behind a slow one,
// writes freed memory (fakecuda counts it). The Close has to land between
// the launch's Acquire and usedOn, so the test tries many times;
// driver's TestQuickReviewUsedOnStreamClosedDuringCall plays the same
// race step by step.
func TestQuickReviewStreamClosedDuringLaunchLosesFreeOrder(t *testing.T) {
	f := ltSetup(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0))))
	g := driver.Grid(1)
	warm, err := driver.Alloc[int32](f.ctx, 4)
	require.NoError(t, err)
	defer warm.Close()
	learnLaunch(t, f.s, f.fill, warm, int32(0), int32(4)) // quick path from here on

	var launched, lost int
	for i := 0; i < 1500 && lost == 0; i++ {
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		b, err := driver.AllocAsync[int32](f.s, 4)
		require.NoError(t, err)
		require.NoError(t, f.s.Synchronize())
		fcall(t, "fake_set_kernel_delay_us", 300)
		require.NoError(t, s.Launch(f.empty, g, g)) // keeps the next kernel queued for a while

		var start sync.WaitGroup
		var ready atomic.Int32
		start.Add(2)
		var launchErr error
		go func() {
			defer start.Done()
			ready.Add(1)
			for ready.Load() < 2 {
			}
			launchErr = s.Launch(f.fill, g, g, b, int32(7), int32(4))
		}()
		go func() {
			defer start.Done()
			ready.Add(1)
			for ready.Load() < 2 {
			}
			for range i % 64 { // move the Close across the launch
				runtime.Gosched()
			}
			assert.NoError(t, s.Close())
		}()
		start.Wait()
		require.NoError(t, b.Close()) // the free, on f.s, must wait for s
		require.NoError(t, f.ctx.Synchronize())
		fcall(t, "fake_set_kernel_delay_us", 0)
		if launchErr == nil {
			launched++
		} else {
			require.ErrorIs(t, launchErr, driver.ErrClosed)
		}
		if fcall(t, "fake_bad_ptr_uses") != 0 {
			lost++
			t.Errorf("try %d: the kernel launched on the closing stream wrote freed memory: %s", i, faketest.LastBadUse(t))
			fcall(t, "fake_reset_counters")
		}
	}
	t.Logf("%d launches went through", launched)
}

// namedU32 is a named scalar type: not one of the argument types.
type namedU32 uint32

// Not a bug: Launch (its quick path once the kernel's shape and buffer type
// are known) and LaunchWith (the general path, which Launch used before)
// accept and refuse the same arguments and shapes, with the same errors,
// and kernels read the same values. The existing tests compare each path
// with expectations written by hand for a few cases; this compares the
// two paths on many, including DevicePtr/uint64/uintptr in a pointer
// slot, views, structs of a parameter's size and extreme shapes.
func TestQuickReviewLaunchMatchesGeneralPath(t *testing.T) {
	f := ltSetup(t)
	pack, err := f.mod.Function("pack")
	require.NoError(t, err)
	out, err := driver.Alloc[uint32](f.ctx, 4)
	require.NoError(t, err)
	defer out.Close()
	base, err := driver.Alloc[uint32](f.ctx, 8)
	require.NoError(t, err)
	defer base.Close()
	view, err := base.Slice(4, 8)
	require.NoError(t, err)
	defer view.Close()
	closed, err := driver.Alloc[uint32](f.ctx, 4)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	var nilBuf *driver.Buffer[uint32]
	g1 := driver.Grid(1)
	learnLaunch(t, f.s, f.empty)
	learnLaunch(t, f.s, f.fill, out, int32(0), int32(4))
	learnLaunch(t, f.s, pack, out, uint8(0), uint16(0), uint8(0))
	learnLaunch(t, f.s, f.add4, out, uint32(0), uint32(0), uint32(0))
	p := out.Ptr()
	cases := []struct {
		name        string
		fn          *driver.Function
		grid, block driver.Dim3
		args        []any
	}{
		{"add4", f.add4, g1, g1, []any{out, uint32(1), uint32(2), uint32(3)}},
		{"add4 int32 float32", f.add4, g1, g1, []any{out, int32(-1), float32(1.5), int32(0)}},
		{"add4 DevicePtr", f.add4, g1, g1, []any{p, uint32(4), uint32(5), uint32(6)}},
		{"add4 uint64", f.add4, g1, g1, []any{uint64(p), uint32(7), uint32(5), uint32(6)}},
		{"add4 uintptr", f.add4, g1, g1, []any{uintptr(p), uint32(8), uint32(5), uint32(6)}},
		{"add4 view", f.add4, g1, g1, []any{view, uint32(9), uint32(1), uint32(1)}},
		{"add4 struct of 4 bytes", f.add4, g1, g1, []any{out, struct{ A uint32 }{10}, uint32(1), uint32(1)}},
		{"add4 array of 4 bytes", f.add4, g1, g1, []any{out, [2]uint16{11, 0}, uint32(1), uint32(1)}},
		{"add4 closed", f.add4, g1, g1, []any{closed, uint32(1), uint32(2), uint32(3)}},
		{"add4 typed nil", f.add4, g1, g1, []any{nilBuf, uint32(1), uint32(2), uint32(3)}},
		{"add4 zero buffer", f.add4, g1, g1, []any{new(driver.Buffer[uint32]), uint32(1), uint32(2), uint32(3)}},
		{"add4 nil", f.add4, g1, g1, []any{out, nil, uint32(2), uint32(3)}},
		{"add4 int", f.add4, g1, g1, []any{out, 1, uint32(2), uint32(3)}},
		{"add4 named", f.add4, g1, g1, []any{out, namedU32(1), uint32(2), uint32(3)}},
		{"add4 buffer as scalar", f.add4, g1, g1, []any{out, out, uint32(2), uint32(3)}},
		{"add4 scalar as buffer", f.add4, g1, g1, []any{uint32(1), uint32(1), uint32(2), uint32(3)}},
		{"add4 too few", f.add4, g1, g1, []any{out, uint32(1), uint32(2)}},
		{"add4 too many", f.add4, g1, g1, []any{out, uint32(1), uint32(2), uint32(3), uint32(4)}},
		{"add4 wide grid y", f.add4, driver.Grid(1, 40000), g1, []any{out, uint32(12), uint32(0), uint32(0)}},
		{"add4 wide grid z", f.add4, driver.Grid(1, 1, 65535), g1, []any{out, uint32(13), uint32(0), uint32(0)}},
		{"add4 grid y too wide", f.add4, driver.Grid(1, 65536), g1, []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 grid 0", f.add4, driver.Grid(0), g1, []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 grid x max", f.add4, driver.Grid(1<<31 - 1), g1, []any{out, uint32(14), uint32(0), uint32(0)}},
		{"add4 grid x too wide", f.add4, driver.Grid(1 << 31), g1, []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 block 1025", f.add4, g1, driver.Block(1025), []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 block 32x33", f.add4, g1, driver.Block(32, 33), []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 block z 65", f.add4, g1, driver.Block(1, 1, 65), []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 block 4 dims", f.add4, g1, driver.Block(1, 1, 1, 1), []any{out, uint32(1), uint32(0), uint32(0)}},
		{"add4 negative block", f.add4, g1, driver.Block(-1024), []any{out, uint32(1), uint32(0), uint32(0)}},
		{"fill", f.fill, g1, g1, []any{out, int32(-7), int32(4)}},
		{"fill uint32", f.fill, g1, g1, []any{out, uint32(0xfffffff0), uint32(3)}},
		{"pack", pack, g1, g1, []any{out, uint8(0xab), int16(-2), true}},
		{"pack bool false", pack, g1, g1, []any{out, false, uint16(0xffff), int8(-128)}},
		{"pack wrong size", pack, g1, g1, []any{out, uint16(1), uint16(2), uint8(3)}},
		{"empty", f.empty, g1, g1, nil},
		{"empty with an argument", f.empty, g1, g1, []any{uint32(1)}},
	}
	got := make([]uint32, 4)
	gotBase := make([]uint32, 8)
	run := func(launch func() error) ([]uint32, []uint32, error) {
		require.NoError(t, out.Memset32(0xeeeeeeee))
		require.NoError(t, base.Memset32(0xeeeeeeee))
		err := launch()
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, out.CopyToHost(got))
		require.NoError(t, base.CopyToHost(gotBase))
		return append([]uint32(nil), got...), append([]uint32(nil), gotBase...), err
	}
	for _, c := range cases {
		for pass := range 2 { // the general path first: it remembers the buffer type, so Launch goes quick
			slowOut, slowBase, slowErr := run(func() error {
				return f.s.LaunchWith(c.fn, driver.LaunchConfig{Grid: c.grid, Block: c.block}, c.args...)
			})
			quickOut, quickBase, quickErr := run(func() error { return f.s.Launch(c.fn, c.grid, c.block, c.args...) })
			if slowErr == nil {
				assert.NoError(t, quickErr, "%s (pass %d): Launch refuses what LaunchWith takes", c.name, pass)
			} else if assert.Error(t, quickErr, "%s (pass %d): Launch takes what LaunchWith refuses (%v)", c.name, pass, slowErr) {
				assert.Equal(t, slowErr.Error(), quickErr.Error(), "%s (pass %d): the same error", c.name, pass)
			}
			assert.Equal(t, slowOut, quickOut, "%s (pass %d): the kernel wrote the same", c.name, pass)
			assert.Equal(t, slowBase, quickBase, "%s (pass %d): the kernel wrote the same (view)", c.name, pass)
		}
	}
	ltNoBadUses(t)
}

// Regression (minor; fixed in quickScalar): a bool argument whose byte is neither 0 nor 1 reaches the
// kernel as 1 through the general path and NewArgs (scalarBits tests it
// and stores 1 or 0) but as its raw byte through Launch's quick path
// (quickScalar copies the byte), so the same call passes different bytes
// depending on the path it takes. Such a bool comes from safe code: a
// Buffer[bool] copied back from device memory a kernel (here a memset)
// filled with 2. pack(out, a, b, c) stores a | b<<8 | c<<24.
func TestQuickReviewQuickPathBoolBytes(t *testing.T) {
	f := ltSetup(t)
	pack, err := f.mod.Function("pack")
	require.NoError(t, err)
	out, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer out.Close()
	flags, err := driver.Alloc[bool](f.ctx, 4)
	require.NoError(t, err)
	defer flags.Close()
	require.NoError(t, flags.Memset8(2))
	host, err := flags.ToHost()
	require.NoError(t, err)
	odd := host[0] // a true bool whose byte is 2
	require.True(t, odd)

	g := driver.Grid(1)
	learnLaunch(t, f.s, pack, out, true, uint16(0), false)
	got := make([]uint32, 1)
	for _, c := range []struct {
		name   string
		launch func() error
	}{
		{"general path (LaunchWith)", func() error {
			return f.s.LaunchWith(pack, driver.LaunchConfig{Grid: g, Block: g}, out, odd, uint16(0), false)
		}},
		{"Launch (quick path)", func() error { return f.s.Launch(pack, g, g, out, odd, uint16(0), false) }},
	} {
		require.NoError(t, out.Memset32(0))
		require.NoError(t, c.launch(), c.name)
		require.NoError(t, f.s.Synchronize())
		require.NoError(t, out.CopyToHost(got))
		assert.Equal(t, uint32(1), got[0], "%s: a true bool is passed as 1", c.name)
	}
}

// Not a bug: Launch's quick path fills its parameter array (pointers into
// its own stack) before it notes, for stream-ordered buffers of another
// stream, that they are used on this one (usedOn: a lock, a reference, an
// append), which may grow and move the stack; the array is a stack object
// whose pointers the runtime adjusts, and it becomes an integer only just
// before the call. Launched from goroutines whose stacks sit at different
// depths, every kernel reads its own arguments and the buffers' frees wait
// for the launches. TestLaunchSmallBlockOnMovingStacks has no stream-ordered
// buffer, so no call inside that window.
func TestQuickReviewQuickLaunchUsedOnMovingStacks(t *testing.T) {
	f := ltSetup(t)
	other, err := f.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer other.Close()
	warm, err := driver.Alloc[uint32](f.ctx, 1)
	require.NoError(t, err)
	defer warm.Close()
	learnLaunch(t, f.s, f.add4, warm, uint32(0), uint32(0), uint32(0))
	const n = 64
	bufs := make([]*driver.Buffer[uint32], n)
	for i := range bufs {
		bufs[i], err = driver.AllocAsync[uint32](other, 1)
		require.NoError(t, err)
	}
	require.NoError(t, other.Synchronize())
	g := driver.Grid(1)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deep(i*3, func() {
				errs[i] = f.s.Launch(f.add4, g, g, bufs[i], uint32(i), uint32(1000*i), uint32(7))
				deep(i%7, func() {})
			})
		}()
	}
	wg.Wait()
	require.NoError(t, f.s.Synchronize())
	out := make([]uint32, 1)
	for i, b := range bufs {
		require.NoError(t, errs[i], "launch %d", i)
		require.NoError(t, b.CopyToHost(out))
		assert.Equal(t, uint32(i+1000*i+7), out[0], "kernel %d read its own arguments", i)
	}
	// The frees, queued on other, wait for f.s (usedOn recorded it).
	fcall(t, "fake_set_kernel_delay_us", 2000)
	for i, b := range bufs {
		require.NoError(t, f.s.Launch(f.add4, g, g, b, uint32(i), uint32(0), uint32(0)))
	}
	for _, b := range bufs {
		require.NoError(t, b.Close())
	}
	require.NoError(t, f.ctx.Synchronize())
}

// viewAt embeds a Buffer by value after another field: *viewAt gets the
// Buffer's methods by promotion, so it is a buffer argument.
type viewAt struct {
	_ int
	driver.Buffer[uint32]
}

// Regression (older than the quick paths; in the general path of both
// Launch and NewArgs): a
// nil pointer to a user type that embeds a Buffer anywhere but first (or
// embeds a *Buffer, like launch_review_test's matrix) panics inside the
// driver: smallBlock.fill calls dp.self() and marshal calls x.arg(), and
// the promoted method dereferences the nil pointer to reach the embedded
// field. A caller can cause it, so it should be an error like a typed nil
// *Buffer ("nil buffer"). Launch's quick path is not involved (the type
// is never remembered), it bails to the general path, which panicked.
// Fixed: the general path refuses a nil pointer before calling its
// methods.
func TestQuickReviewNilEmbeddingPointerPanics(t *testing.T) {
	f := ltSetup(t)
	g := driver.Grid(1)
	var v *viewAt
	var m *matrix
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Launch *viewAt", func() error { return f.s.Launch(f.add4, g, g, v, uint32(1), uint32(0), uint32(0)) }},
		{"Launch *matrix", func() error { return f.s.Launch(f.add4, g, g, m, uint32(1), uint32(0), uint32(0)) }},
		{"NewArgs *matrix", func() error {
			a, err := f.add4.NewArgs(m, uint32(1), uint32(0), uint32(0))
			if err == nil {
				_ = a.Close()
			}
			return err
		}},
	} {
		var err error
		if assert.NotPanics(t, func() { err = c.call() }, c.name) {
			assert.ErrorIs(t, err, driver.ErrInvalidArgument, c.name)
		}
	}
}

// Not a bug: launches on the quick paths racing Close of everything they
// name (stream, module and so kernel, buffer, Args), with kernels slowed
// down so that work is still queued when the last reference goes: every
// launch returns nil or ErrClosed, nothing reaches fakecuda freed or
// destroyed (ltSetup's check), and everything is released in the end.
// TestStressCloseRaces covers this among everything else, without slowed
// kernels; here every launch after the first two takes a quick path.
func TestQuickReviewQuickLaunchesRaceClose(t *testing.T) {
	f := ltSetup(t)
	before := lifetime.ReadStats().Objects
	mods, streams, allocs := fcall(t, "fake_live_modules"), fcall(t, "fake_live_streams"), fcall(t, "fake_live_allocations")
	g := driver.Grid(1)
	for round := range 20 {
		mod, err := f.ctx.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		add4, err := mod.Function("add4")
		require.NoError(t, err)
		s, err := f.ctx.NewStream(driver.StreamNonBlocking)
		require.NoError(t, err)
		buf, err := driver.Alloc[uint32](f.ctx, 1)
		require.NoError(t, err)
		learnLaunch(t, s, add4, buf, uint32(0), uint32(0), uint32(0))
		args, err := add4.NewArgs(buf, uint32(1), uint32(2), uint32(3))
		require.NoError(t, err)
		fcall(t, "fake_set_kernel_delay_us", 50)
		closers := []func() error{s.Close, mod.Close, buf.Close, args.Close}
		ltRaceN(4, 200, func(gr int) {
			var err error
			if gr%2 == 0 {
				err = s.Launch(add4, g, g, buf, uint32(gr), uint32(round), uint32(0))
			} else {
				err = s.LaunchArgs(args, g, g)
			}
			ltClosedOr(t, "launch", err)
		}, func() {
			for i := range closers {
				c := closers[(i+round)%len(closers)]
				assert.NoError(t, c())
			}
		})
		fcall(t, "fake_set_kernel_delay_us", 0)
		require.NoError(t, f.ctx.Synchronize())
	}
	assert.True(t, ltSettle(func() bool {
		return lifetime.ReadStats().Objects == before && fcall(t, "fake_live_modules") == mods &&
			fcall(t, "fake_live_streams") == streams && fcall(t, "fake_live_allocations") == allocs
	}), "every module, stream, buffer and Args released")
}
