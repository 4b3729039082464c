//go:build linux

package fakedriver_test

import (
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/lifetime"
)

// TestBufferMethodsHoldMemory: every Buffer method holds the memory while
// CUDA uses it (I4), so a Close racing a slowed copy frees nothing under it
// (I3). Were only Launch to hold a reference, Close would free the memory
// while cuMemcpy* still ran, which fakecuda reports as "freed during the
// copy".
func TestBufferMethodsHoldMemory(t *testing.T) {
	f := ltSetup(t)
	allocs := fcall(t, "fake_live_allocations")
	src, err := driver.Alloc[int32](f.ctx, 4096)
	require.NoError(t, err)
	defer src.Close()
	pinned, err := driver.AllocHost[int32](f.ctx, 4096, driver.HostAllocDefault)
	require.NoError(t, err)
	defer pinned.Close()
	host := make([]int32, 4096)
	ops := map[string]func(b *driver.Buffer[int32]) error{
		"CopyFromHost":        func(b *driver.Buffer[int32]) error { return b.CopyFromHost(f.ctx.LegacyStream(), host) },
		"CopyToHost":          func(b *driver.Buffer[int32]) error { return b.CopyToHost(f.ctx.LegacyStream(), make([]int32, 4096)) },
		"CopyFrom":            func(b *driver.Buffer[int32]) error { return b.CopyFrom(f.ctx.LegacyStream(), src) },
		"CopyFrom (as src)":   func(b *driver.Buffer[int32]) error { return src.CopyFrom(f.ctx.LegacyStream(), b) },
		"CopyFromHostAsync":   func(b *driver.Buffer[int32]) error { return b.CopyFromHostAsync(f.s, host) },
		"CopyToHostAsync":     func(b *driver.Buffer[int32]) error { return b.CopyToHostAsync(f.s, make([]int32, 4096)) },
		"CopyFromAsync":       func(b *driver.Buffer[int32]) error { return b.CopyFromAsync(f.s, src) },
		"CopyFromAsync (src)": func(b *driver.Buffer[int32]) error { return src.CopyFromAsync(f.s, b) },
		"CopyFromPinnedAsync": func(b *driver.Buffer[int32]) error { return b.CopyFromPinnedAsync(f.s, pinned) },
		"CopyToPinnedAsync":   func(b *driver.Buffer[int32]) error { return b.CopyToPinnedAsync(f.s, pinned) },
		"ToHost":              func(b *driver.Buffer[int32]) error { _, err := b.ToHost(f.ctx.LegacyStream()); return err },
	}
	fcall(t, "fake_set_copy_delay_us", 3000)
	for name, op := range ops {
		for i := 0; i < 3; i++ {
			b, err := driver.Alloc[int32](f.ctx, 4096)
			require.NoError(t, err)
			done := make(chan error)
			go func() { done <- op(b) }()
			time.Sleep(time.Duration(i) * time.Millisecond) // before, at and during the copy
			assert.NoError(t, b.Close())
			ltClosedOr(t, name, <-done)
		}
		require.NoError(t, f.s.Synchronize())
	}
	fcall(t, "fake_set_copy_delay_us", 0)
	require.NoError(t, src.Close())
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_allocations") == allocs }), "every buffer was freed")
	ltNoBadUses(t)
}

// TestBufferLastUseIsHeld: when a copy is the caller's last use of a
// Buffer, the cleanup that frees an unreachable Buffer cannot free the
// memory under the copy: the call holds it (I4). Otherwise the Buffer could
// be collected while the slowed copy ran, and its cleanup free the memory
// mid-copy.
func TestBufferLastUseIsHeld(t *testing.T) {
	f := ltSetup(t)
	allocs := fcall(t, "fake_live_allocations")
	stop := make(chan struct{})
	var gcs sync.WaitGroup
	gcs.Add(1)
	go func() {
		defer gcs.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
				lifetime.Flush()
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	fcall(t, "fake_set_copy_delay_us", 5000)
	host := make([]int32, 1024)
	for i := 0; i < 10; i++ {
		func() {
			b, err := driver.Alloc[int32](f.ctx, 1024)
			require.NoError(t, err)
			if i%2 == 0 {
				assert.NoError(t, b.CopyFromHost(f.ctx.LegacyStream(), host)) // b is unreachable from here on
			} else {
				assert.NoError(t, b.CopyToHostAsync(f.s, host))
			}
		}()
	}
	require.NoError(t, f.s.Synchronize())
	fcall(t, "fake_set_copy_delay_us", 0)
	closeStop(stop)
	gcs.Wait()
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_allocations") == allocs }), "the cleanups freed every buffer")
	ltNoBadUses(t)
}

// TestHostSliceKeepsManagedMemory: once a managed Buffer has handed out a
// host slice, its cleanup no longer frees the memory: a Go slice of CUDA
// memory cannot keep the Buffer reachable. Otherwise the Buffer could be
// dropped while the slice was still in use, the cleanup free the memory,
// and the next access through the slice read freed memory (on a GPU, a
// fault).
func TestHostSliceKeepsManagedMemory(t *testing.T) {
	f := ltSetup(t)
	allocs := fcall(t, "fake_live_allocations")
	var hs []int32
	func() {
		b, err := driver.AllocManaged[int32](f.ctx, 256)
		require.NoError(t, err)
		hs, err = b.HostSlice()
		require.NoError(t, err)
		hs[0] = 7
	}()
	for i := 0; i < 20; i++ {
		runtime.GC()
		lifetime.Flush()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, allocs+1, fcall(t, "fake_live_allocations"), "the memory behind a host slice stays allocated")
	hs[255] = 9
	assert.Equal(t, int32(7), hs[0], "the slice still reads what was written (freed fake memory reads 0xdddddddd)")
	// Free it by hand so the counters balance: nothing else can now.
	p := uintptr(unsafe.Pointer(&hs[0]))
	require.NoError(t, f.ctx.Raw(func(uintptr) error { return cu.MemFree(cu.CUdeviceptr(p)) }))
	assert.Equal(t, allocs, fcall(t, "fake_live_allocations"))
}

// TestHostBufferCloseWaitsForCopies: HostBuffer.Close frees the pinned
// memory only after the copies queued to or from it have run, not at once,
// when the slowed copies would then use freed host memory.
func TestHostBufferCloseWaitsForCopies(t *testing.T) {
	f := ltSetup(t)
	hosts := fcall(t, "fake_live_host_allocs")
	buf, err := driver.Alloc[int32](f.ctx, 1024)
	require.NoError(t, err)
	defer buf.Close()
	fcall(t, "fake_set_copy_delay_us", 2000)
	for round := 0; round < 10; round++ {
		h, err := driver.AllocHost[int32](f.ctx, 1024, driver.HostAllocDefault)
		require.NoError(t, err)
		require.NoError(t, buf.CopyToPinnedAsync(f.s, h))
		require.NoError(t, buf.CopyFromPinnedAsync(f.s, h))
		ltRaceN(4, 3, func(g int) {
			if g%2 == 0 {
				ltClosedOr(t, "CopyToPinnedAsync", buf.CopyToPinnedAsync(f.s, h))
			} else {
				ltClosedOr(t, "CopyFromPinnedAsync", buf.CopyFromPinnedAsync(f.s, h))
			}
		}, func() { assert.NoError(t, h.Close()) })
	}
	require.NoError(t, f.s.Synchronize())
	fcall(t, "fake_set_copy_delay_us", 0)
	assert.Equal(t, hosts, fcall(t, "fake_live_host_allocs"))
	ltNoBadUses(t)
}

// TestRegisteredHasCleanup: a Registered dropped without Close is
// unregistered, and its slice unpinned, by a cleanup; without one the pages
// would stay registered for the life of the process.
func TestRegisteredHasCleanup(t *testing.T) {
	f := ltSetup(t)
	regs := fcall(t, "fake_live_registrations")
	lifetime.Flush()
	pinned := lifetime.ReadStats().Pinned
	func() {
		for i := 0; i < 4; i++ {
			r, err := driver.RegisterHost(f.ctx, make([]int32, 1024))
			require.NoError(t, err)
			require.Len(t, r.Slice(), 1024)
		}
	}()
	assert.Equal(t, regs+4, fcall(t, "fake_live_registrations"))
	assert.True(t, ltSettle(func() bool { return fcall(t, "fake_live_registrations") == regs }), "the cleanups unregistered the memory")
	assert.True(t, ltSettle(func() bool { return lifetime.ReadStats().Pinned == pinned }), "and unpinned it")
	ltNoBadUses(t)
}
