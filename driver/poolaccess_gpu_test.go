package driver_test

// Pool access from another device (MemPool.SetAccess): a kernel on device
// 1 reads and writes memory of a pool of device 0. Needs two GPUs that can
// access each other; skips, saying so, otherwise. The launch's hold of
// another context's buffer is proved on a CPU
// (poolaccess_fake_internal_test.go).

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/lifetime"
)

// TestGPUPoolAccessFromAnotherDevice: a fresh pool of device 0 gives
// device 1 no access, and device 1's launches with its buffers are
// refused; after SetAccess(read-write), vadd on device 1's stream adds two
// buffers of the pool into a third, exactly; the access reads back as set,
// and taking it away refuses launches again. Buffers closed while device
// 1's kernel still runs are held until it is done, and device 0's memory
// comes back once everything is closed.
func TestGPUPoolAccessFromAnotherDevice(t *testing.T) {
	p := peerGPUs(t)
	d0, d1 := p.c0.Device(), p.c1.Device()
	ok, err := d1.CanAccessPeer(d0)
	require.NoError(t, err)
	if !ok {
		t.Skip("device 1 cannot access device 0's memory")
	}
	mod1, err := p.c1.LoadModule(p.e.ptx)
	require.NoError(t, err)
	defer mod1.Close()
	vadd1, err := mod1.Function("vadd")
	require.NoError(t, err)
	spin1, err := mod1.Function("spin")
	require.NoError(t, err)
	lifetime.Flush()
	require.NoError(t, p.c0.Synchronize())
	free0, _, err := p.c0.MemGetInfo()
	require.NoError(t, err)

	pool, err := p.c0.NewMemPool()
	require.NoError(t, err)
	acc, err := pool.Access(d1)
	require.NoError(t, err)
	assert.Equal(t, driver.PoolAccessNone, acc, "a new pool: no access from device 1")
	acc, err = pool.Access(d0)
	require.NoError(t, err)
	assert.Equal(t, driver.PoolAccessReadWrite, acc, "the owner")
	assert.ErrorIs(t, pool.SetAccess(d0, driver.PoolAccessRead), driver.ErrInvalidArgument, "the owner's access cannot change")

	const n = 32 << 20 // 128 MiB a buffer: a leaked one shows in MemGetInfo
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(3*i+1)
	}
	a, err := driver.AllocFromPool[float32](p.s0, pool, n)
	require.NoError(t, err)
	b, err := driver.AllocFromPool[float32](p.s0, pool, n)
	require.NoError(t, err)
	c, err := driver.AllocFromPool[float32](p.s0, pool, n)
	require.NoError(t, err)
	require.NoError(t, a.CopyFromHost(p.s0, x))
	require.NoError(t, b.CopyFromHost(p.s0, y))
	require.NoError(t, c.MemsetFloat32(p.s0, -1))
	grid, block := driver.Grid((n+255)/256), driver.Block(256)
	assert.ErrorIs(t, p.s1.Launch(vadd1, grid, block, a, b, c, int32(n)), driver.ErrInvalidArgument, "no access yet")

	require.NoError(t, pool.SetAccess(d1, driver.PoolAccessReadWrite))
	acc, err = pool.Access(d1)
	require.NoError(t, err)
	assert.Equal(t, driver.PoolAccessReadWrite, acc)
	require.NoError(t, p.s1.Launch(vadd1, grid, block, a, b, c, int32(n)))
	require.NoError(t, p.s1.Synchronize())
	got, err := c.ToHost(p.s0)
	require.NoError(t, err)
	for i := range got {
		if got[i] != x[i]+y[i] {
			t.Fatalf("c[%d] = %v, want %v", i, got[i], x[i]+y[i])
		}
	}

	// Read only (which driver 580 refuses on an H200, leaving the access
	// as it was), then none.
	if err := pool.SetAccess(d1, driver.PoolAccessRead); err != nil {
		require.ErrorIs(t, err, driver.ErrNotSupported)
		t.Logf("read-only access: %v", err)
		acc, err = pool.Access(d1)
		require.NoError(t, err)
		assert.Equal(t, driver.PoolAccessReadWrite, acc, "refused: unchanged")
	} else {
		acc, err = pool.Access(d1)
		require.NoError(t, err)
		assert.Equal(t, driver.PoolAccessRead, acc)
	}
	require.NoError(t, pool.SetAccess(d1, driver.PoolAccessNone))
	acc, err = pool.Access(d1)
	require.NoError(t, err)
	assert.Equal(t, driver.PoolAccessNone, acc)
	assert.ErrorIs(t, p.s1.Launch(vadd1, grid, block, a, b, c, int32(n)), driver.ErrInvalidArgument, "access taken away")

	// Closed under device 1's kernel: held until it is done.
	require.NoError(t, pool.SetAccess(d1, driver.PoolAccessReadWrite))
	require.NoError(t, p.s1.Launch(spin1, driver.Grid(1), driver.Block(1), int64(200_000_000)))
	require.NoError(t, p.s1.Launch(vadd1, grid, block, a, b, c, int32(n)))
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, c.Close())
	require.NoError(t, pool.Close())
	require.NoError(t, p.s1.Synchronize(), "device 1's kernel ran on memory that was still allocated")
	require.NoError(t, p.s0.Synchronize())

	memoryBack(t, p.c0, free0)
}

// memoryBack waits up to 30 s for c's device to have free0 bytes free
// again, within 64 MiB (cuMemGetInfo lags: on an H200 it once showed half
// of 256 MiB back, and all of it in the next run), and fails t otherwise.
func memoryBack(t *testing.T, c *driver.Context, free0 int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC()
		lifetime.Flush()
		free, _, err := c.MemGetInfo()
		require.NoError(t, err)
		if free+64<<20 >= free0 {
			t.Logf("free memory %d MiB, before %d MiB", free>>20, free0>>20)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("free memory %d MiB, before %d MiB: the memory did not come back", free>>20, free0>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
