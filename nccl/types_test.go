package nccl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/errs"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/ncclraw"
)

type celsius float32

type level uint8

func TestDataTypeOfEachSupportedType(t *testing.T) {
	for name, c := range map[string]struct {
		got  func() (ncclraw.DataType, error)
		want ncclraw.DataType
	}{
		"int8":    {dataType[int8], ncclraw.Int8},
		"uint8":   {dataType[uint8], ncclraw.Uint8},
		"byte":    {dataType[byte], ncclraw.Uint8},
		"int32":   {dataType[int32], ncclraw.Int32},
		"rune":    {dataType[rune], ncclraw.Int32},
		"uint32":  {dataType[uint32], ncclraw.Uint32},
		"int64":   {dataType[int64], ncclraw.Int64},
		"uint64":  {dataType[uint64], ncclraw.Uint64},
		"float32": {dataType[float32], ncclraw.Float32},
		"float64": {dataType[float64], ncclraw.Float64},
		// Types defined on them travel as what they hold.
		"celsius":       {dataType[celsius], ncclraw.Float32},
		"level":         {dataType[level], ncclraw.Uint8},
		"time.Duration": {dataType[time.Duration], ncclraw.Int64},
	} {
		dt, err := c.got()
		require.NoError(t, err, name)
		assert.Equal(t, c.want, dt, name)
	}
}

func TestDataTypeRefusesOthers(t *testing.T) {
	for name, c := range map[string]struct {
		got  func() (ncclraw.DataType, error)
		want string
	}{
		"int":       {dataType[int], "elements of type int (its size depends on the platform: use int64 or uint64)"},
		"uint":      {dataType[uint], "type uint (its size depends"},
		"uintptr":   {dataType[uintptr], "type uintptr (its size depends"},
		"int16":     {dataType[int16], "type int16 (NCCL reduces no 16-bit integers)"},
		"uint16":    {dataType[uint16], "type uint16 (NCCL reduces no 16-bit integers)"},
		"bool":      {dataType[bool], "elements of type bool: use int8"},
		"complex64": {dataType[complex64], "type complex64"},
		"string":    {dataType[string], "type string"},
		"struct":    {dataType[struct{ A, B float32 }], "type struct { A float32; B float32 }"},
		"array":     {dataType[[2]float32], "type [2]float32"},
		"pointer":   {dataType[*float32], "type *float32"},
		"interface": {dataType[any], "type interface {}"},
		"func":      {dataType[func()], "type func()"},
	} {
		_, err := c.got()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.want, name)
		assert.Contains(t, err.Error(), "use int8, uint8, int32, uint32, int64, uint64, float32 or float64, or a type defined on one of them", name)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.ErrorIs(t, err, errs.InvalidArgument, name)
	}
}

// TestDataTypeAllocatesNothing: every collective asks for its element
// type's NCCL type, so the answer costs no allocation, defined types
// included.
func TestDataTypeAllocatesNothing(t *testing.T) {
	if gputest.RaceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = dataType[float32]() }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = dataType[uint64]() }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = dataType[celsius]() }))
}

func TestOp(t *testing.T) {
	for o, r := range map[Op]ncclraw.RedOp{Sum: ncclraw.Sum, Prod: ncclraw.Prod, Max: ncclraw.Max, Min: ncclraw.Min, Avg: ncclraw.Avg} {
		got, err := o.raw()
		require.NoError(t, err, o.String())
		assert.Equal(t, r, got, o.String())
		assert.Equal(t, "nccl"+o.String(), r.String(), "Op's names are NCCL's without the prefix")
	}
	assert.Equal(t, "Op(5)", Op(5).String())
	assert.Equal(t, "Op(-1)", Op(-1).String())
	for _, bad := range []Op{-1, 5, Op(ncclraw.MaxRedOp)} {
		_, err := bad.raw()
		assert.ErrorIs(t, err, ErrInvalidArgument, bad.String())
		assert.ErrorContains(t, err, "is not a reduction: use Sum, Prod, Max, Min or Avg")
	}
}
