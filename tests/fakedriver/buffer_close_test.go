//go:build linux

package fakedriver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/lifetime"
)

// copyBehindHeldKernel launches copyi(out, in, n) on s, which reads in
// only once the returned release is called: a Close that waited for the
// kernel would not return before then, however fast or slow the machine.
func copyBehindHeldKernel(t *testing.T, f *fixture, s *driver.Stream, out, in *driver.Buffer[int32]) (release func()) {
	t.Helper()
	copyi, err := f.mod.Function("copyi")
	require.NoError(t, err)
	release = hold(t, "fake_set_kernel_delay_us")
	require.NoError(t, s.Launch(copyi, g1, b1, out, in, int32(in.Len())))
	return release
}

// returnsWhileHeld runs fn and fails the test if fn does not return
// within 30 s while the fake's work is held (it waits for that work);
// release is called either way, before the test goes on.
func returnsWhileHeld(t *testing.T, release func(), msg string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		require.NoError(t, err, msg)
	case <-time.After(30 * time.Second):
		release()
		<-done
		t.Fatal(msg + ": it waited for the kernel")
	}
}

// TestBufferCloseDoesNotWaitForTheDevice: closing a buffer that a queued
// kernel still reads returns at once, although cuMemFree waits for the
// context's work (the fake's does, as libcuda's). The memory stays valid
// for the kernel (the fake counts any use of freed memory), which copies
// the right values, and is freed once the kernel is done.
func TestBufferCloseDoesNotWaitForTheDevice(t *testing.T) {
	f := ltSetup(t)
	allocs := fcall(t, "fake_live_allocations")
	in, err := driver.Alloc[int32](f.ctx, 64)
	require.NoError(t, err)
	require.NoError(t, f.s.Launch(f.fill, g1, b1, in, int32(100), int32(64)))
	out, err := driver.AllocManaged[int32](f.ctx, 64)
	require.NoError(t, err)
	defer out.Close()
	release := copyBehindHeldKernel(t, f, f.s, out, in)

	start := time.Now()
	returnsWhileHeld(t, release, "Close", in.Close)
	took := time.Since(start)
	assert.Equal(t, allocs+2, fcall(t, "fake_live_allocations"), "not freed while the kernel may read it")
	assert.Zero(t, in.Ptr(), "closed at once")
	require.NoError(t, in.Close(), "idempotent")

	release()
	require.NoError(t, f.s.Synchronize())
	host, err := out.HostSlice()
	require.NoError(t, err)
	for i, v := range host {
		require.Equal(t, int32(100+i), v, "element %d", i)
	}
	lifetime.Flush()
	assert.Equal(t, allocs+1, fcall(t, "fake_live_allocations"), "freed once the kernel is done")
	t.Logf("Close took %v in front of a held kernel", took)
}

// TestContextCloseAfterBufferCloseFreesEverything: two buffers, their
// stream and their context closed one after another while a kernel reads
// one and writes the other:
// none of the Closes waits for the kernel, the context outlives them until
// the memory is freed, and then everything is gone.
func TestContextCloseAfterBufferCloseFreesEverything(t *testing.T) {
	f := ltSetup(t)
	allocs, contexts := fcall(t, "fake_live_allocations"), fcall(t, "fake_live_contexts")
	c, err := f.ctx.Device().NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	mod, err := c.LoadModule([]byte("FAKE module"))
	require.NoError(t, err)
	copyi, err := mod.Function("copyi")
	require.NoError(t, err)
	s, err := c.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	in, err := driver.Alloc[int32](c, 16)
	require.NoError(t, err)
	out, err := driver.Alloc[int32](c, 16)
	require.NoError(t, err)
	release := hold(t, "fake_set_kernel_delay_us") // the kernel runs until released
	require.NoError(t, s.Launch(copyi, g1, b1, out, in, int32(16)))

	start := time.Now()
	returnsWhileHeld(t, release, "the four Closes", func() error {
		for _, cl := range []interface{ Close() error }{in, out, s, c} {
			if err := cl.Close(); err != nil {
				return err
			}
		}
		return nil
	})
	took := time.Since(start)
	assert.Equal(t, contexts+1, fcall(t, "fake_live_contexts"), "the context lives while its memory does")
	// The module's unload waits for its kernel (cuModuleUnload does, in
	// the fake as in libcuda): the kernel goes on first.
	release()
	require.NoError(t, mod.Close())

	settle(t, func() bool {
		return fcall(t, "fake_live_allocations") == allocs && fcall(t, "fake_live_contexts") == contexts
	}, "the memory and the context freed")
	t.Logf("four Closes took %v in front of a held kernel", took)
}

// TestAllocOutOfMemoryWaitsForClosedBuffers: an allocation that runs out
// of memory while buffers closed earlier wait for their free tries again
// once they are freed; with none waiting, out of memory is returned at once.
func TestAllocOutOfMemoryWaitsForClosedBuffers(t *testing.T) {
	f := ltSetup(t)
	allocs := fcall(t, "fake_live_allocations")

	faketest.FailNext(t, "cuMemAlloc", int32(driver.ErrOutOfMemory))
	_, err := driver.Alloc[int32](f.ctx, 16)
	require.ErrorIs(t, err, driver.ErrOutOfMemory, "nothing to wait for: no second try")

	in, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	out, err := driver.AllocManaged[int32](f.ctx, 16)
	require.NoError(t, err)
	defer out.Close()
	release := copyBehindHeldKernel(t, f, f.s, out, in)
	require.NoError(t, in.Close())
	faketest.FailNext(t, "cuMemAlloc", int32(driver.ErrOutOfMemory))
	type result struct {
		b   *driver.Buffer[int32]
		err error
	}
	allocated := make(chan result, 1)
	go func() {
		b, err := driver.Alloc[int32](f.ctx, 16)
		allocated <- result{b, err}
	}()
	// The closed buffer cannot be freed before the kernel runs: an Alloc
	// that returned now did not wait for it. (Waiting longer only makes a
	// wrong early return likelier to show.)
	time.Sleep(20 * time.Millisecond)
	select {
	case r := <-allocated:
		release()
		if r.err == nil {
			_ = r.b.Close()
		}
		t.Fatalf("Alloc returned (%v) while the closed buffer's free waited for the kernel", r.err)
	default:
	}
	release()
	r := <-allocated
	require.NoError(t, r.err, "the second try, after the closed buffer was freed")
	require.NoError(t, r.b.Close())
	require.NoError(t, f.s.Synchronize())
	lifetime.Flush()
	assert.Equal(t, allocs+1, fcall(t, "fake_live_allocations"))
}
