//go:build linux

package driver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// A buffer of another context than the stream's, passed to a launch, is
// held until the stream has passed the kernel: its free waits for its own
// context's work only. fakecuda has one device, so no pool can grant
// another device access; the grant of device 0 is set directly here, and
// the second context on device 0 stands for another device's. The buffer
// is memory imported from an exportable pool (within the process), whose
// free fakecuda counts (fake_live_pool_imports): freed under the kernel, the
// count would drop while the kernel still runs. Every launch path is
// checked: Launch (its general path: the fast path takes buffers of the
// stream's context only), LaunchWith with shared memory (the small block),
// LaunchWith cooperative (the general block), and LaunchArgs.
func TestFakeLaunchHoldsAnotherContextsBuffer(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	x := newTwoContexts(t, true)
	ca, sa, sb, fill := x.ca, x.sa, x.sb, x.fill

	pool, err := ca.NewExportableMemPool()
	require.NoError(t, err)
	defer pool.Close()
	src, err := AllocFromPool[int32](sa, pool, 64)
	require.NoError(t, err)
	defer src.Close()
	exp, err := ExportBuffer(src)
	require.NoError(t, err)
	file, err := pool.ExportFD()
	require.NoError(t, err)
	ipool, err := ca.ImportMemPool(file)
	require.NoError(t, err)
	require.NoError(t, file.Close())
	defer ipool.Close()
	require.NoError(t, sa.Synchronize())
	imports := func() int64 { return faketest.Call(t, "fake_live_pool_imports") }

	b, err := ImportBuffer[int32](ipool, exp)
	require.NoError(t, err)
	assert.ErrorIs(t, sb.Launch(fill, Grid(1), Block(1), b, int32(1), int32(64)), ErrInvalidArgument,
		"another context's buffer without a grant")
	require.NoError(t, b.Close())
	ipool.granted.Or(1) // stands for SetAccess from another device

	type launchFunc = func(b *Buffer[int32]) (func(), error)
	launches := []struct {
		name   string
		launch launchFunc
	}{
		{"Launch", func(b *Buffer[int32]) (func(), error) {
			return func() {}, sb.Launch(fill, Grid(1), Block(1), b, int32(2), int32(64))
		}},
		{"LaunchWith (small)", func(b *Buffer[int32]) (func(), error) {
			return func() {}, sb.LaunchWith(fill, LaunchConfig{Grid: Grid(1), Block: Block(1), SharedMem: 16}, b, int32(3), int32(64))
		}},
		{"LaunchWith (general)", func(b *Buffer[int32]) (func(), error) {
			return func() {}, sb.LaunchWith(fill, LaunchConfig{Grid: Grid(1), Block: Block(1), Cooperative: true}, b, int32(4), int32(64))
		}},
		{"LaunchArgs", func(b *Buffer[int32]) (func(), error) {
			a, err := fill.NewArgs(b, int32(5), int32(64))
			if err != nil {
				return func() {}, err
			}
			return func() { assert.NoError(t, a.Close()) }, sb.LaunchArgs(a, Grid(1), Block(1))
		}},
	}
	defer faketest.Call(t, "fake_set_kernel_delay_us", 0)
	for _, l := range launches {
		name, launch := l.name, l.launch
		before := imports()
		b, err := ImportBuffer[int32](ipool, exp)
		require.NoError(t, err, name)
		faketest.Call(t, "fake_set_kernel_delay_us", ^uintptr(0)) // -1: the kernel waits until set to 0
		done, err := launch(b)
		require.NoError(t, err, name)
		done()
		require.NoError(t, b.Close(), name)
		lifetime.Flush()
		assert.Equal(t, before+1, imports(), "%s: the import is held while the kernel runs", name)
		faketest.Call(t, "fake_set_kernel_delay_us", 0)
		require.NoError(t, sb.Synchronize())
		ok := false
		for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); {
			lifetime.Flush()
			if ok = imports() == before; !ok {
				time.Sleep(time.Millisecond)
			}
		}
		assert.True(t, ok, "%s: freed once the stream passed the kernel", name)
	}
	// The kernel wrote the exporter's memory.
	got, err := src.ToHost(sa)
	require.NoError(t, err)
	assert.Equal(t, int32(5+63), got[63], "fill(v=5) ran last")
	faketest.NoBadUses(t)
}

// Peer access between contexts (Context.EnablePeerAccess) does not reach
// memory of a pool: CUDA maps a pool's memory for its own device and the
// devices the pool gave access to (MemPool.SetAccess) only, so a kernel
// of a peer context would fault on it. A launch in the peer context is
// refused for memory of a pool made with NewMemPool, of the device's
// default pool (AllocAsync) and imported from another process, until the
// pool gives the device access; memory from Alloc stays usable by the
// peer (checked without a launch: fakecuda's kernels use only their own
// context's memory of that kind). The second context on fakecuda's one device stands for another
// device's, and its peer access is set directly.
func TestFakePeerAccessDoesNotReachPoolMemory(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	x := newTwoContexts(t, true)
	ca, cb, sa, sb, fill := x.ca, x.cb, x.sa, x.sb, x.fill
	cb.peerMu.Lock()
	cb.peers = map[cu.CUcontext]bool{ca.h: true} // stands for cb.EnablePeerAccess(ca)
	cb.peerMu.Unlock()

	plain, err := Alloc[int32](ca, 64)
	require.NoError(t, err)
	defer plain.Close()
	assert.True(t, plain.a.usableIn(cb), "Alloc's memory: peer access reaches it")

	pool, err := ca.NewExportableMemPool()
	require.NoError(t, err)
	defer pool.Close()
	fromPool, err := AllocFromPool[int32](sa, pool, 64)
	require.NoError(t, err)
	defer fromPool.Close()
	async, err := AllocAsync[int32](sa, 64)
	require.NoError(t, err)
	defer async.Close()
	exp, err := ExportBuffer(fromPool)
	require.NoError(t, err)
	file, err := pool.ExportFD()
	require.NoError(t, err)
	ipool, err := ca.ImportMemPool(file)
	require.NoError(t, err)
	require.NoError(t, file.Close())
	defer ipool.Close()
	imported, err := ImportBuffer[int32](ipool, exp)
	require.NoError(t, err)
	defer imported.Close()
	require.NoError(t, sa.Synchronize())

	for name, b := range map[string]*Buffer[int32]{"AllocFromPool": fromPool, "AllocAsync": async, "ImportBuffer": imported} {
		assert.ErrorIs(t, sb.Launch(fill, Grid(1), Block(1), b, int32(2), int32(64)), ErrInvalidArgument, "%s: Launch", name)
		assert.ErrorIs(t, sb.LaunchWith(fill, LaunchConfig{Grid: Grid(1), Block: Block(1), Cooperative: true}, b, int32(2), int32(64)),
			ErrInvalidArgument, "%s: LaunchWith", name)
		_, err := fill.NewArgs(b, int32(2), int32(64))
		assert.ErrorIs(t, err, ErrInvalidArgument, "%s: NewArgs", name)
		assert.Equal(t, int64(1), b.a.obj.Refs(), "%s: the refusals hold nothing", name)
	}

	// The pools' grants reach their memory.
	pool.granted.Or(1)
	ipool.granted.Or(1)
	require.NoError(t, sb.Launch(fill, Grid(1), Block(1), fromPool, int32(3), int32(64)), "granted pool")
	require.NoError(t, sb.Launch(fill, Grid(1), Block(1), imported, int32(3), int32(64)), "granted imported pool")
	require.NoError(t, sb.Synchronize())
	faketest.NoBadUses(t)
}

// Asynchronous work on a stream of a peer context (Context.EnablePeerAccess)
// holds the memory it uses until the stream has passed it, as launches do:
// the memory's free waits for its own context's work only. Stream-ordered
// memory is not noted as used on the peer's stream, whose work its free
// cannot wait for through an event of its own context (CUDA refuses to
// record an event on another context's stream, and the free failed,
// leaking the memory). The second context on fakecuda's one device stands
// for another device's; its peer access is set directly.
func TestFakePeerStreamWorkHoldsMemory(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	x := newTwoContexts(t, false)
	ca, cb, sa, sb := x.ca, x.cb, x.sa, x.sb
	cb.peerMu.Lock()
	cb.peers = map[cu.CUcontext]bool{ca.h: true} // stands for cb.EnablePeerAccess(ca)
	cb.peerMu.Unlock()
	errs := len(lifetime.Errors())
	allocs := faketest.Call(t, "fake_live_allocations")
	data := make([]int32, 64)

	// Stream-ordered memory copied on the peer's stream, then freed.
	async, err := AllocAsync[int32](sa, 64)
	require.NoError(t, err)
	require.NoError(t, sa.Synchronize())
	require.NoError(t, async.CopyFromHost(sb, data))
	require.NoError(t, async.CopyFromHostAsync(sb, data))
	require.NoError(t, sb.Synchronize())
	require.NoError(t, async.Close())
	require.NoError(t, sa.Synchronize())

	// Memory from Alloc, closed under a copy queued on the peer's stream.
	plain, err := Alloc[int32](ca, 64)
	require.NoError(t, err)
	faketest.Call(t, "fake_set_copy_delay_us", ^uintptr(0)) // -1: holds copies until set to 0
	defer faketest.Call(t, "fake_set_copy_delay_us", 0)
	require.NoError(t, plain.CopyFromHostAsync(sb, data))
	require.NoError(t, plain.Close())
	lifetime.Flush()
	faketest.Call(t, "fake_set_copy_delay_us", 0)
	require.NoError(t, sb.Synchronize())

	ok := false
	for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); {
		lifetime.Flush()
		if ok = faketest.Call(t, "fake_live_allocations") == allocs; !ok {
			time.Sleep(time.Millisecond)
		}
	}
	assert.True(t, ok, "both buffers freed")
	assert.Len(t, lifetime.Errors(), errs, "no failed free: %v", lifetime.Errors())
	faketest.NoBadUses(t)
}

// Args prepared while a pool gave the stream's device access are refused
// once the access is taken away (MemPool.SetAccess with PoolAccessNone):
// the kernel would fault on the memory. The grant is set and taken back
// directly (fakecuda has one device); the second context stands for
// another device's.
func TestFakeLaunchArgsRecheckAnotherContextsBuffer(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	x := newTwoContexts(t, true)
	ca, sa, sb, fill := x.ca, x.sa, x.sb, x.fill
	pool, err := ca.NewMemPool()
	require.NoError(t, err)
	defer pool.Close()
	buf, err := AllocFromPool[int32](sa, pool, 64)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, sa.Synchronize())

	pool.granted.Or(1) // stands for SetAccess(device 1, PoolAccessReadWrite)
	args, err := fill.NewArgs(buf, int32(1), int32(64))
	require.NoError(t, err)
	defer args.Close()
	require.NoError(t, sb.LaunchArgs(args, Grid(1), Block(1)))
	pool.granted.And(^uint64(1)) // stands for SetAccess(device 1, PoolAccessNone)
	assert.ErrorIs(t, sb.LaunchArgs(args, Grid(1), Block(1)), ErrInvalidArgument, "the access was taken away")
	require.NoError(t, sb.Synchronize())
	faketest.NoBadUses(t)
}

// The device's default pool is one CUDA pool however many MemPool values
// DefaultMemPool returns: access given or taken away through one of them
// holds for buffers allocated from any other. (Taken away through another
// value, the access stayed recorded on the first, whose buffers were then
// launched on a device CUDA no longer let use them.) fakecuda's one device
// cannot be given access, so the record SetAccess makes is made directly;
// the second context stands for another device's.
func TestFakeDefaultPoolAccessIsOneRecord(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	require.NoError(t, Init())
	dev, err := DeviceByOrdinal(0)
	require.NoError(t, err)
	ca, err := dev.PrimaryContext()
	require.NoError(t, err)
	defer ca.Close()
	cb, err := dev.NewContext(0)
	require.NoError(t, err)
	defer cb.Close()
	sa, err := ca.NewStream(StreamNonBlocking)
	require.NoError(t, err)
	defer sa.Close()
	pa, err := ca.DefaultMemPool()
	require.NoError(t, err)
	defer pa.Close()
	pb, err := ca.DefaultMemPool()
	require.NoError(t, err)
	defer pb.Close()
	buf, err := AllocFromPool[int32](sa, pa, 64)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, sa.Synchronize())

	pb.noteAccess(cb.dev.ordinal, PoolAccessReadWrite) // as SetAccess through pb records it
	assert.True(t, buf.a.usableIn(cb), "access given through another value of the default pool")
	pb.noteAccess(cb.dev.ordinal, PoolAccessNone)
	assert.False(t, buf.a.usableIn(cb), "access taken away through another value of the default pool")
	pa.noteAccess(cb.dev.ordinal, PoolAccessNone)
}

// twoContexts is the setup of the tests of work across contexts: device
// 0's primary context (a) and a second context on it (b), which stands for
// another device's (fakecuda has one device), a stream in each, and, when
// asked for, the fake kernel fill loaded in b. Everything is closed when
// the test ends, after the test's own defers.
type twoContexts struct {
	ca, cb *Context
	sa, sb *Stream
	fill   *Function
}

func newTwoContexts(t *testing.T, kernel bool) *twoContexts {
	t.Helper()
	require.NoError(t, Init())
	dev, err := DeviceByOrdinal(0)
	require.NoError(t, err)
	x := &twoContexts{}
	x.ca, err = dev.PrimaryContext()
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.ca.Close() })
	x.cb, err = dev.NewContext(0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.cb.Close() })
	x.sa, err = x.ca.NewStream(StreamNonBlocking)
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.sa.Close() })
	x.sb, err = x.cb.NewStream(StreamNonBlocking)
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.sb.Close() })
	if kernel {
		mod, err := x.cb.LoadModule([]byte("FAKE module"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = mod.Close() })
		x.fill, err = mod.Function("fill")
		require.NoError(t, err)
	}
	return x
}
