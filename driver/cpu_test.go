package driver_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/loader"
)

func TestErrorValues(t *testing.T) {
	err := error(&driver.Error{Func: "cuMemAlloc", Code: driver.Status(2)})
	assert.Equal(t, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", err.Error())
	assert.ErrorIs(t, err, driver.ErrOutOfMemory)
	assert.NotErrorIs(t, err, driver.ErrInvalidValue)
	assert.ErrorIs(t, &driver.Error{Func: "x", Code: driver.Status(801)}, driver.ErrNotSupported)
	assert.ErrorIs(t, &driver.Error{Func: "x", Code: driver.Status(801)}, driver.ErrCUDANotSupported)
	assert.ErrorIs(t, &driver.SymbolError{Func: "cuX", ABI: 12030, Driver: 12000}, driver.ErrNotSupported)
	assert.Equal(t, "CUDA_ERROR_INVALID_PTX (218): invalid ptx", driver.ErrInvalidPtx.Error())
	assert.ErrorIs(t, driver.ErrStreamCaptureInvalidated, driver.Status(901))

	// errors.As reaches the fields through wrapping; the Err constants are
	// Status values, comparable with a Code.
	wrapped := fmt.Errorf("loading: %w", err)
	var de *driver.Error
	require.True(t, errors.As(wrapped, &de))
	assert.Equal(t, "cuMemAlloc", de.Func)
	assert.Equal(t, driver.ErrOutOfMemory, de.Code)
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", de.Code.String())
	assert.Equal(t, "out of memory", de.Code.Message())
	assert.Equal(t, "CUresult(4242)", driver.Status(4242).String())
	assert.Equal(t, "unknown status", driver.Status(4242).Message())
	se := error(&driver.SymbolError{Func: "cuGraphAddNode", ABI: 12030, Driver: 12020, Reason: "needs a newer driver"})
	assert.Equal(t, "cuGraphAddNode: not available (needs driver API 12.3, driver is 12.2): needs a newer driver", se.Error())
	assert.NotErrorIs(t, se, driver.ErrOutOfMemory)
}

// TestPublicTypes: the enums are driver's own types, with the raw table's
// values and names for printing.
func TestPublicTypes(t *testing.T) {
	assert.Equal(t, "AttrWarpSize", driver.AttrWarpSize.String())
	assert.Equal(t, "AttrMaxSharedMemoryPerBlock", driver.AttrSharedMemoryPerBlock.String(), "an alias prints as the first name of its value")
	assert.Equal(t, "DeviceAttribute(-3)", driver.DeviceAttribute(-3).String())
	assert.Equal(t, "FuncAttrNumRegs", driver.FuncAttrNumRegs.String())
	assert.Equal(t, "PoolAttrReleaseThreshold", driver.PoolAttrReleaseThreshold.String())
	assert.Equal(t, "LimitStackSize", driver.LimitStackSize.String())
	assert.Equal(t, "CachePreferL1", driver.CachePreferL1.String())
	assert.Equal(t, "LimitStackSize", fmt.Sprint(driver.LimitStackSize))
}

func TestNilObjectsAreErrors(t *testing.T) {
	var s *driver.Stream
	assert.ErrorIs(t, s.Synchronize(), driver.ErrNilStream)
	assert.ErrorIs(t, s.Launch(nil, driver.Grid(1), driver.Block(1)), driver.ErrNilStream)
	assert.ErrorIs(t, s.LaunchHostFunc(func() {}), driver.ErrNilStream)
	assert.ErrorIs(t, s.Close(), driver.ErrNilStream)
	_, err := s.Query()
	assert.ErrorIs(t, err, driver.ErrNilStream)
	var c *driver.Context
	_, err = c.NewStream(driver.StreamDefault)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorIs(t, c.Close(), driver.ErrInvalidArgument)
	_, err = driver.Alloc[int32](c, 4)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	var b *driver.Buffer[int32]
	assert.ErrorIs(t, b.Close(), driver.ErrInvalidArgument)
	assert.ErrorIs(t, b.CopyFromHost(c.LegacyStream(), []int32{1}), driver.ErrInvalidArgument)
	assert.Zero(t, b.Ptr())
	var e *driver.Event
	assert.ErrorIs(t, e.Close(), driver.ErrInvalidArgument)
	var m *driver.Module
	_, err = m.Function("k")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	var a *driver.Args
	assert.ErrorIs(t, a.Close(), driver.ErrInvalidArgument)
	assert.ErrorIs(t, driver.SetArg(a, 0, int32(1)), driver.ErrInvalidArgument, "nil Args are a bad argument, not a closed object")
}

func TestAllocSizeChecks(t *testing.T) {
	// These fail on the sizes, before a context is needed.
	_, err := driver.Alloc[int32](nil, 0)
	assert.ErrorContains(t, err, "the count must be positive")
	_, err = driver.Alloc[int32](nil, -5)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = driver.Alloc[[1 << 20]byte](nil, 1<<50)
	assert.ErrorContains(t, err, "overflow")
	_, err = driver.Alloc[*int](nil, 1)
	assert.ErrorContains(t, err, "holds Go pointers")
	_, err = driver.Alloc[struct{ S string }](nil, 1)
	assert.ErrorContains(t, err, "holds Go pointers")
	_, err = driver.Alloc[struct{}](nil, 1)
	assert.ErrorContains(t, err, "size 0")
	_, err = driver.AllocHost[int32](nil, 0, driver.HostAllocDefault)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
}

func TestDims(t *testing.T) {
	assert.Equal(t, driver.GridDim{X: 4, Y: 1, Z: 1}, driver.Grid(4))
	assert.Equal(t, driver.BlockDim{X: 4, Y: 2, Z: 1}, driver.Block(4, 2))
	assert.Equal(t, driver.GridDim{X: 4, Y: 2, Z: 3}, driver.Grid(4, 2, 3))
	assert.Equal(t, -1, driver.Grid(1, 1, 1, 1).Z, "too many dimensions are rejected at launch")
	assert.Equal(t, driver.ClusterDim{X: 2, Y: 1, Z: 1}, driver.Cluster(2))
	// Grid and block are types of their own, so that swapping them in a
	// launch does not compile: every launch takes the grid first.
	grid, block := reflect.TypeFor[driver.GridDim](), reflect.TypeFor[driver.BlockDim]()
	require.NotEqual(t, grid, block)
	for name, fn := range map[string]any{"Stream.Launch": (*driver.Stream).Launch, "Stream.LaunchArgs": (*driver.Stream).LaunchArgs} {
		ft := reflect.TypeOf(fn)
		assert.Equal(t, grid, ft.In(2), name)
		assert.Equal(t, block, ft.In(3), name)
	}
	assert.False(t, grid.AssignableTo(block) || block.AssignableTo(grid))
}

func TestInitWithoutDriver(t *testing.T) {
	if err := driver.Init(); err == nil {
		t.Skip("a driver is present: see the GPU tests")
	} else if gputest.Required() {
		t.Fatalf("PURECUDA_REQUIRE_GPU is set: %v", err)
	} else {
		assert.ErrorIs(t, err, loader.ErrNotFound)
		assert.ErrorIs(t, err, driver.ErrNoGPU)
		assert.Contains(t, err.Error(), "libcuda.so.1")
		_, err2 := driver.DeviceByOrdinal(0)
		assert.True(t, errors.Is(err2, loader.ErrNotFound))
		assert.ErrorIs(t, err2, driver.ErrNoGPU)
		_, err2 = driver.DeviceCount()
		require.Error(t, err2)
		assert.ErrorIs(t, err2, driver.ErrNoGPU)
		_, err2 = driver.LibraryPath()
		assert.ErrorIs(t, err2, driver.ErrNoGPU, "the loader's own error, unwrapped by Init, matches too")
	}
}
