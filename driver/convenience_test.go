package driver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/driver"
)

// TestConvenienceArgumentChecks: the conveniences refuse bad arguments
// before calling CUDA, so these run without a GPU.
func TestConvenienceArgumentChecks(t *testing.T) {
	_, err := driver.AllocZeroed[int32](nil, 0)
	assert.ErrorContains(t, err, "the count must be positive")
	_, err = driver.AllocZeroed[int32](nil, 4)
	assert.ErrorIs(t, err, driver.ErrNilStream)
	_, err = driver.AllocZeroed[*int](nil, 4)
	assert.ErrorContains(t, err, "holds Go pointers")

	_, err = driver.AllocCopy[float32](nil, nil)
	assert.ErrorContains(t, err, "the count must be positive", "nothing to copy")
	_, err = driver.AllocCopy(nil, []float32{1, 2})
	assert.ErrorIs(t, err, driver.ErrNilStream)
	assert.ErrorContains(t, err, "AllocCopy")

	var nilBuf *driver.Buffer[float32]
	_, err = nilBuf.ToHost(nil)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	_, err = (&driver.Buffer[float32]{}).ToHost(nil)
	assert.ErrorIs(t, err, driver.ErrClosed, "a zero Buffer was never opened")
	_, err = nilBuf.Slice(0, 1)
	assert.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorIs(t, nilBuf.MemsetFloat32(nil, 1), driver.ErrInvalidArgument)
	assert.ErrorIs(t, nilBuf.MemsetFloat32Async(nil, 1), driver.ErrNilStream)
	assert.ErrorIs(t, (&driver.Buffer[float32]{}).MemsetFloat32(nil, 1), driver.ErrClosed)
	assert.Zero(t, nilBuf.Size())
	assert.Zero(t, (&driver.Buffer[float32]{}).Size())
}
