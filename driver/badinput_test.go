package driver_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

// TestBadInputs: each misuse is a clear error, and the process survives.
func TestBadInputs(t *testing.T) {
	e, s := setup(t)
	ctx := e.ctx
	buf, err := driver.Alloc[int32](ctx, 16)
	require.NoError(t, err)
	defer buf.Close()

	closedStream, err := ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	require.NoError(t, closedStream.Close())
	closedEvent, err := ctx.NewEvent(driver.EventDefault)
	require.NoError(t, err)
	require.NoError(t, closedEvent.Close())
	closedBuf, err := driver.Alloc[int32](ctx, 4)
	require.NoError(t, err)
	require.NoError(t, closedBuf.Close())
	closedMod, err := ctx.LoadModule(e.ptx)
	require.NoError(t, err)
	fnOfClosed, err := closedMod.Function("empty")
	require.NoError(t, err)
	require.NoError(t, closedMod.Close())
	closedCtx, err := e.dev.NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	require.NoError(t, closedCtx.Close())
	otherCtx, err := e.dev.NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer otherCtx.Close()
	otherBuf, err := driver.Alloc[int32](otherCtx, 4)
	require.NoError(t, err)
	defer otherBuf.Close()
	otherMod, err := otherCtx.LoadModule(e.ptx)
	require.NoError(t, err)
	defer otherMod.Close()
	otherFn, err := otherMod.Function("empty")
	require.NoError(t, err)
	odd, err := driver.Alloc[byte](ctx, 6)
	require.NoError(t, err)
	defer odd.Close()
	noTiming, err := ctx.NewEvent(driver.EventDisableTiming)
	require.NoError(t, err)
	defer noTiming.Close()
	require.NoError(t, noTiming.Record(s))
	require.NoError(t, s.Synchronize())
	args, err := e.fn["add4"].NewArgs(buf, uint32(1), uint32(2), uint32(3))
	require.NoError(t, err)
	defer args.Close()
	var nilStream *driver.Stream
	g1, b1 := driver.Grid(1), driver.Block(1)
	add4, empty := e.fn["add4"], e.fn["empty"]

	cases := []struct {
		name string
		err  error  // matched with errors.Is, if set
		msg  string // contained in the message, if set
		call func() error
	}{
		{"nil stream launch", driver.ErrNilStream, "", func() error { return nilStream.Launch(empty, g1, b1) }},
		{"nil stream sync", driver.ErrNilStream, "", func() error { return nilStream.Synchronize() }},
		{"nil stream async copy", driver.ErrNilStream, "", func() error { return buf.CopyFromHostAsync(nil, []int32{1}) }},
		{"nil stream memset", driver.ErrNilStream, "", func() error { return buf.Memset8Async(nil, 0) }},
		{"nil stream event record", driver.ErrNilStream, "", func() error { return noTiming.Record(nil) }},
		{"closed stream launch", driver.ErrClosed, "stream", func() error { return closedStream.Launch(empty, g1, b1) }},
		{"closed stream host func", driver.ErrClosed, "", func() error { return closedStream.LaunchHostFunc(func() {}) }},
		{"closed event record", driver.ErrClosed, "event", func() error { return closedEvent.Record(s) }},
		{"closed buffer copy", driver.ErrClosed, "buffer", func() error { return closedBuf.CopyFromHost(e.ctx.LegacyStream(), []int32{1}) }},
		{"closed buffer as argument", driver.ErrClosed, "argument 0", func() error { return s.Launch(add4, g1, b1, closedBuf, uint32(1), uint32(2), uint32(3)) }},
		{"closed module lookup", driver.ErrClosed, "module", func() error { _, err := closedMod.Function("empty"); return err }},
		{"function of a closed module", driver.ErrClosed, "module", func() error { return s.Launch(fnOfClosed, g1, b1) }},
		{"closed context SM count", driver.ErrClosed, "context", func() error { _, err := closedCtx.SMCount(); return err }},
		{"negative SM count", driver.ErrInvalidArgument, "SM count -1", func() error {
			_, err := e.dev.NewContextWith(driver.ContextOptions{SMCount: -1})
			return err
		}},
		{"SM count above the device's", driver.ErrInvalidArgument, "SM count 100000", func() error {
			_, err := e.dev.NewContextWith(driver.ContextOptions{SMCount: 100000})
			return err
		}},
		{"closed context stream", driver.ErrClosed, "context", func() error { _, err := closedCtx.NewStream(0); return err }},
		{"closed context alloc", driver.ErrClosed, "context", func() error { _, err := driver.Alloc[int32](closedCtx, 1); return err }},
		{"closed context module", driver.ErrClosed, "context", func() error { _, err := closedCtx.LoadModule(e.ptx); return err }},
		{"zero-element alloc", driver.ErrInvalidArgument, "positive", func() error { _, err := driver.Alloc[int32](ctx, 0); return err }},
		{"negative alloc", driver.ErrInvalidArgument, "positive", func() error { _, err := driver.AllocAsync[int32](s, -1); return err }},
		{"overflowing alloc", driver.ErrInvalidArgument, "overflow", func() error { _, err := driver.Alloc[int64](ctx, 1<<62); return err }},
		{"alloc beyond the device", driver.ErrOutOfMemory, "cuMemAlloc", func() error { _, err := driver.Alloc[byte](ctx, 1<<50); return err }},
		{"alloc of pointers", driver.ErrInvalidArgument, "Go pointers", func() error { _, err := driver.Alloc[*int](ctx, 1); return err }},
		{"copy longer than the buffer", driver.ErrInvalidArgument, "do not fit", func() error { return buf.CopyFromHost(e.ctx.LegacyStream(), make([]int32, 17)) }},
		{"read longer than the buffer", driver.ErrInvalidArgument, "do not fit", func() error { return buf.CopyToHost(e.ctx.LegacyStream(), make([]int32, 17)) }},
		{"device copy longer than the buffer", driver.ErrInvalidArgument, "do not fit", func() error {
			big, err := driver.Alloc[int32](ctx, 32)
			if err != nil {
				return err
			}
			defer big.Close()
			return buf.CopyFrom(e.ctx.LegacyStream(), big)
		}},
		{"memset32 of 6 bytes", driver.ErrInvalidArgument, "multiple of 4", func() error { return odd.Memset32(e.ctx.LegacyStream(), 1) }},
		{"too few arguments", driver.ErrInvalidArgument, "takes 4 arguments, got 2", func() error { return s.Launch(add4, g1, b1, buf, uint32(1)) }},
		{"too many arguments", driver.ErrInvalidArgument, "takes 0 arguments, got 1", func() error { return s.Launch(empty, g1, b1, int32(1)) }},
		{"wrong argument size", driver.ErrInvalidArgument, "argument 1: the kernel expects 4 bytes, got 8", func() error { return s.Launch(add4, g1, b1, buf, uint64(1), uint32(2), uint32(3)) }},
		{"Go int argument", driver.ErrInvalidArgument, "use int32 or int64", func() error { return s.Launch(add4, g1, b1, buf, 1, uint32(2), uint32(3)) }},
		{"string argument", driver.ErrInvalidArgument, "unsupported type string", func() error { return s.Launch(add4, g1, b1, buf, "x", uint32(2), uint32(3)) }},
		{"nil argument", driver.ErrInvalidArgument, "nil", func() error { return s.Launch(add4, g1, b1, nil, uint32(1), uint32(2), uint32(3)) }},
		{"grid of 0", driver.ErrInvalidArgument, "grid dimension x = 0", func() error { return s.Launch(empty, driver.Grid(0), b1) }},
		{"block of 0", driver.ErrInvalidArgument, "block dimension y = 0", func() error { return s.Launch(empty, g1, driver.Block(1, 0)) }},
		{"block over the device limit", driver.ErrInvalidArgument, "threads, the device allows 1024", func() error { return s.Launch(empty, g1, driver.Block(32, 32, 2)) }},
		{"block x over the limit", driver.ErrInvalidArgument, "block dimension x = 4096", func() error { return s.Launch(empty, g1, driver.Block(4096)) }},
		{"negative shared memory", driver.ErrInvalidArgument, "shared memory", func() error {
			return s.LaunchWith(empty, driver.LaunchConfig{Grid: g1, Block: b1, SharedMem: -1})
		}},
		{"too much shared memory", driver.ErrInvalidValue, "cuLaunchKernel", func() error {
			return s.LaunchWith(empty, driver.LaunchConfig{Grid: g1, Block: b1, SharedMem: 1 << 30})
		}},
		{"nil function", driver.ErrInvalidArgument, "nil function", func() error { return s.Launch(nil, g1, b1) }},
		{"missing kernel", driver.ErrNotFound, `kernel "no_such_kernel"`, func() error { _, err := e.mod.Function("no_such_kernel"); return err }},
		{"PTX that does not load", driver.ErrInvalidPtx, "JIT log", func() error {
			_, err := ctx.LoadModule([]byte(".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry k() { bogus.instruction; }\n"))
			return err
		}},
		{"empty image", driver.ErrInvalidArgument, "empty image", func() error { _, err := ctx.LoadModule(nil); return err }},
		{"buffer of another context", driver.ErrInvalidArgument, "another context", func() error { return s.Launch(add4, g1, b1, otherBuf, uint32(1), uint32(2), uint32(3)) }},
		{"async copy to a buffer of another context", driver.ErrInvalidArgument, "another context", func() error { return otherBuf.CopyFromHostAsync(s, []int32{1}) }},
		{"kernel of another context", driver.ErrInvalidArgument, "another context", func() error { return s.Launch(otherFn, g1, b1) }},
		{"device ordinal out of range", driver.ErrInvalidArgument, "ordinal 99", func() error { _, err := driver.DeviceByOrdinal(99); return err }},
		{"bad PCI bus id", driver.ErrInvalidValue, "PCI bus id", func() error { _, err := driver.DeviceByPCIBusID("nonsense"); return err }},
		{"elapsed time without timing", driver.ErrInvalidHandle, "cuEventElapsedTime", func() error { _, err := driver.Elapsed(noTiming, noTiming); return err }},
		{"nil host function", driver.ErrInvalidArgument, "nil function", func() error { return s.LaunchHostFunc(nil) }},
		{"SetArg of the wrong size", driver.ErrInvalidArgument, "is 4 bytes", func() error { return driver.SetArg(args, 1, uint64(1)) }},
		{"SetArg out of range", driver.ErrInvalidArgument, "argument 9", func() error { return driver.SetArg(args, 9, uint32(1)) }},
		{"NewArgs with a bad count", driver.ErrInvalidArgument, "takes 4 arguments", func() error { _, err := add4.NewArgs(buf); return err }},
		{"host view of device memory", driver.ErrInvalidArgument, "managed", func() error { _, err := buf.HostSlice(); return err }},
		{"peer access to itself", driver.ErrInvalidArgument, "own peer", func() error { return ctx.EnablePeerAccess(ctx) }},
		{"occupancy of a bad block size", driver.ErrInvalidArgument, "block size 0", func() error { _, err := empty.MaxActiveBlocksPerSM(0, 0); return err }},
	}
	require.GreaterOrEqual(t, len(cases), 30)
	for _, c := range cases {
		err := c.call()
		if !assert.Error(t, err, c.name) {
			continue
		}
		if c.err != nil {
			assert.True(t, errors.Is(err, c.err), "%s: %v is not %v", c.name, err, c.err)
		}
		if c.msg != "" {
			assert.Contains(t, err.Error(), c.msg, c.name)
		}
	}
	// Close twice returns the first result, for every kind of object.
	assert.Equal(t, closedStream.Close(), closedStream.Close())
	assert.NoError(t, closedEvent.Close())
	assert.NoError(t, closedBuf.Close())
	assert.NoError(t, closedMod.Close())
	assert.NoError(t, closedCtx.Close())
	// The stream still works after all that.
	require.NoError(t, s.Launch(empty, g1, b1))
	require.NoError(t, s.Synchronize())
	t.Logf("%d bad inputs, each a clear error", len(cases))
}
