package driver_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/nvrtc"
)

func iota32(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(i)
	}
	return s
}

func TestAllocZeroed(t *testing.T) {
	gputest.Require(t)
	e, _ := setup(t)
	const n = 1 << 16
	// Dirty some memory first, so that a zeroed allocation that reuses it
	// is seen to be cleared.
	dirty, err := driver.Alloc[uint32](e.ctx, n)
	require.NoError(t, err)
	require.NoError(t, dirty.Memset32(e.ctx.LegacyStream(), 0xdeadbeef))
	require.NoError(t, dirty.Close())

	z, err := driver.AllocZeroed[uint32](e.ctx.LegacyStream(), n)
	require.NoError(t, err)
	defer z.Close()
	got, err := z.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, make([]uint32, n), got)

	odd, err := driver.AllocZeroed[[3]byte](e.ctx.LegacyStream(), 7) // 21 bytes: any size works
	require.NoError(t, err)
	defer odd.Close()
	got3, err := odd.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, make([][3]byte, 7), got3)
}

func TestAllocCopyAndToHost(t *testing.T) {
	gputest.Require(t)
	e, s := setup(t)
	src := []float64{1.5, -2, 3e100, 0, 7}
	b, err := driver.AllocCopy(e.ctx.LegacyStream(), src)
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, len(src), b.Len())
	assert.Equal(t, 8*len(src), b.Size())
	src[0] = 99 // the copy is done when AllocCopy returns
	got, err := b.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, []float64{1.5, -2, 3e100, 0, 7}, got)

	// ToHost reads what a kernel wrote.
	out, err := driver.Alloc[int32](e.ctx, 300)
	require.NoError(t, err)
	defer out.Close()
	require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(2), driver.Block(256), out, int32(10), int32(300)))
	require.NoError(t, s.Synchronize())
	ints, err := out.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	want := iota32(300)
	for i := range want {
		want[i] += 10
	}
	assert.Equal(t, want, ints)

	require.NoError(t, b.Close())
	_, err = b.ToHost(e.ctx.LegacyStream())
	assert.ErrorIs(t, err, driver.ErrClosed)
	_, err = driver.AllocCopy[int32](e.ctx.LegacyStream(), nil)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
}

// TestSliceViews: every operation on a view touches the view's elements
// only, and a view keeps the memory alive after its buffer is closed.
func TestSliceViews(t *testing.T) {
	gputest.Require(t)
	e, s := setup(t)
	const n = 1024
	src := iota32(n)
	b, err := driver.AllocCopy(e.ctx.LegacyStream(), src)
	require.NoError(t, err)
	defer b.Close()
	v, err := b.Slice(100, 200)
	require.NoError(t, err)
	defer v.Close()
	assert.Equal(t, 100, v.Len())
	assert.Equal(t, 400, v.Size())
	assert.Equal(t, b.Ptr()+400, v.Ptr())

	// Reads see the view's elements.
	got, err := v.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, src[100:200], got)
	part := make([]int32, 10)
	require.NoError(t, v.CopyToHost(e.ctx.LegacyStream(), part))
	assert.Equal(t, src[100:110], part)

	// Writes land in the view only.
	expect := append([]int32(nil), src...)
	require.NoError(t, v.CopyFromHost(e.ctx.LegacyStream(), []int32{-1, -2, -3}))
	copy(expect[100:], []int32{-1, -2, -3})
	require.NoError(t, v.Memset32(e.ctx.LegacyStream(), 7)) // the whole view
	for i := 100; i < 200; i++ {
		expect[i] = 7
	}
	w, err := v.Slice(50, 60) // b[150:160]
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.CopyFromHostAsync(s, []int32{42, 43}))
	require.NoError(t, w.Memset8Async(s, 0))
	require.NoError(t, w.CopyFromHostAsync(s, []int32{44}))
	require.NoError(t, s.Synchronize())
	for i := 150; i < 160; i++ {
		expect[i] = 0
	}
	expect[150] = 44
	all, err := b.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, expect, all)

	// A view as a kernel argument passes its own address.
	k, err := b.Slice(500, 600)
	require.NoError(t, err)
	defer k.Close()
	require.NoError(t, s.Launch(e.fn["fill"], driver.Grid(1), driver.Block(128), k, int32(1000), int32(k.Len())))
	args, err := e.fn["fill"].NewArgs(k, int32(2000), int32(10))
	require.NoError(t, err)
	require.NoError(t, s.LaunchArgs(args, driver.Grid(1), driver.Block(32)))
	require.NoError(t, args.Close())
	require.NoError(t, s.Synchronize())
	for i := 0; i < 100; i++ {
		expect[500+i] = int32(1000 + i)
	}
	for i := 0; i < 10; i++ {
		expect[500+i] = int32(2000 + i)
	}
	all, err = b.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, expect, all)

	// Device-to-device copies between views.
	require.NoError(t, w.CopyFrom(e.ctx.LegacyStream(), view(t, k, 0, 10)))
	copy(expect[150:160], expect[500:510])
	dst, err := b.Slice(0, 10)
	require.NoError(t, err)
	defer dst.Close()
	src10, err := b.Slice(500, 510)
	require.NoError(t, err)
	defer src10.Close()
	require.NoError(t, dst.CopyFromAsync(s, src10))
	require.NoError(t, s.Synchronize())
	copy(expect[0:10], expect[500:510])
	all, err = b.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	assert.Equal(t, expect, all)

	// The view outlives its buffer; closing the view leaves the buffer.
	require.NoError(t, b.Close())
	assert.Zero(t, b.Ptr())
	got, err = v.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err, "a view holds the memory after the buffer's Close")
	assert.Equal(t, expect[100:200], got)
	require.NoError(t, v.Close())
	got, err = w.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err, "closing one view leaves the others")
	assert.Equal(t, expect[150:160], got)
	_, err = v.ToHost(e.ctx.LegacyStream())
	assert.ErrorIs(t, err, driver.ErrClosed)
}

// view is b.Slice(from, to), closed when the test ends.
func view[T any](t *testing.T, b *driver.Buffer[T], from, to int) *driver.Buffer[T] {
	t.Helper()
	v, err := b.Slice(from, to)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// TestSliceOfStreamOrderedMemory: a view of memory allocated in stream
// order, used on another stream, keeps it until that stream's work is done.
func TestSliceOfStreamOrderedMemory(t *testing.T) {
	gputest.Require(t)
	e, s := setup(t)
	other, err := e.ctx.NewStream(driver.StreamNonBlocking)
	require.NoError(t, err)
	defer other.Close()
	b, err := driver.AllocAsync[int32](s, 256)
	require.NoError(t, err)
	require.NoError(t, b.Memset32Async(s, 1))
	require.NoError(t, s.Synchronize())
	v := view(t, b, 128, 256)
	require.NoError(t, b.Close())
	require.NoError(t, other.Launch(e.fn["fill"], driver.Grid(1), driver.Block(128), v, int32(5), int32(v.Len())))
	got := make([]int32, v.Len())
	require.NoError(t, v.CopyToHostAsync(other, got))
	require.NoError(t, other.Synchronize())
	for i, x := range got {
		require.Equal(t, int32(5+i), x, "element %d", i)
	}
	require.NoError(t, v.Close()) // the free is queued on s after other's work
	require.NoError(t, s.Synchronize())
}

// TestForgottenViewIsFreed: the memory of a closed buffer whose view became
// unreachable without Close is freed by the view's cleanup.
func TestForgottenViewIsFreed(t *testing.T) {
	gputest.Require(t)
	e, _ := setup(t)
	b, err := driver.Alloc[float32](e.ctx, 1<<20)
	require.NoError(t, err)
	ptr := b.Ptr()
	func() {
		v, err := b.Slice(10, 20)
		require.NoError(t, err)
		require.NoError(t, b.Close())
		assert.True(t, allocated(ptr), "the view holds the memory")
		require.NoError(t, v.MemsetFloat32(e.ctx.LegacyStream(), 1))
	}()
	deadline := time.Now().Add(5 * time.Second)
	for allocated(ptr) && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	assert.False(t, allocated(ptr), "freed once the forgotten view was collected")
}

func TestMemsetFloat32(t *testing.T) {
	gputest.Require(t)
	e, s := setup(t)
	b, err := driver.Alloc[float32](e.ctx, 1000)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.MemsetFloat32(e.ctx.LegacyStream(), 1.5))
	got, err := b.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	for i, x := range got {
		require.Equal(t, float32(1.5), x, "element %d", i)
	}
	v := view(t, b, 10, 20)
	require.NoError(t, v.MemsetFloat32Async(s, -0.25))
	require.NoError(t, s.Synchronize())
	got, err = b.ToHost(e.ctx.LegacyStream())
	require.NoError(t, err)
	for i, x := range got {
		want := float32(1.5)
		if i >= 10 && i < 20 {
			want = -0.25
		}
		require.Equal(t, want, x, "element %d", i)
	}
	assert.ErrorIs(t, b.MemsetFloat32Async(nil, 1), driver.ErrNilStream)
}

// TestErrorTypesFromTheDriver: a real failure is a *driver.Error, with the
// C function and status in its fields; an NVRTC failure is a *nvrtc.Error.
func TestErrorTypesFromTheDriver(t *testing.T) {
	gputest.Require(t)
	e, _ := setup(t)
	_, err := driver.Alloc[byte](e.ctx, 1<<50)
	var de *driver.Error
	require.True(t, errors.As(err, &de), "%T: %v", err, err)
	assert.Equal(t, "cuMemAlloc", de.Func)
	assert.Equal(t, driver.ErrOutOfMemory, de.Code)
	assert.ErrorIs(t, err, driver.ErrOutOfMemory)

	_, err = nvrtc.Compile("__global__ void k() { undefined_thing; }", nvrtc.Options{})
	var ne *nvrtc.Error
	require.True(t, errors.As(err, &ne), "%T: %v", err, err)
	assert.Equal(t, "nvrtcCompileProgram", ne.Func)
	assert.Equal(t, nvrtc.ErrCompilation, ne.Code)

	major, minor, err := driver.Version()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, major, 12)
	assert.GreaterOrEqual(t, minor, 0)
	rmajor, rminor, err := nvrtc.Version()
	require.NoError(t, err)
	t.Logf("driver CUDA %d.%d, NVRTC %d.%d", major, minor, rmajor, rminor)
}
