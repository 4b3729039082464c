package nccl

import (
	"reflect"
	"strconv"

	"github.com/purecuda/cuda/internal/ncclraw"
)

// Op is a reduction operation: how the ranks' values are combined
// (ncclRedOp_t).
type Op int32

// The reductions. Each applies element by element across the ranks.
const (
	Sum  Op = 0 // ncclSum: the sum
	Prod Op = 1 // ncclProd: the product
	Max  Op = 2 // ncclMax: the largest value
	Min  Op = 3 // ncclMin: the smallest value
	Avg  Op = 4 // ncclAvg: the sum divided by the number of ranks
)

var opNames = [...]string{Sum: "Sum", Prod: "Prod", Max: "Max", Min: "Min", Avg: "Avg"}

// String is the operation's name, "Sum", or "Op(9)" for a value that is
// none of the above.
func (o Op) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// raw is o for NCCL; a value that is none of the reductions above is
// refused (NCCL would read it as an operation a communicator created).
func (o Op) raw() (ncclraw.RedOp, error) {
	if o < 0 || int(o) >= len(opNames) {
		return 0, invalid("%v is not a reduction: use Sum, Prod, Max, Min or Avg", o)
	}
	return ncclraw.RedOp(o), nil
}

// dataType is NCCL's data type for elements of type T: int8, uint8,
// int32, uint32, int64, uint64, float32 and float64, and types defined on
// them (type Celsius float32 is ncclFloat32). Any other type is refused
// with an error matching ErrInvalidArgument. It allocates nothing.
func dataType[T any]() (ncclraw.DataType, error) {
	switch any((*T)(nil)).(type) {
	case *float32:
		return ncclraw.Float32, nil
	case *float64:
		return ncclraw.Float64, nil
	case *int32:
		return ncclraw.Int32, nil
	case *uint32:
		return ncclraw.Uint32, nil
	case *int64:
		return ncclraw.Int64, nil
	case *uint64:
		return ncclraw.Uint64, nil
	case *int8:
		return ncclraw.Int8, nil
	case *uint8:
		return ncclraw.Uint8, nil
	}
	return dataTypeOfKind(reflect.TypeFor[T]())
}

// kindTypes are NCCL's data types by the Go kind they hold.
var kindTypes = map[reflect.Kind]ncclraw.DataType{
	reflect.Int8: ncclraw.Int8, reflect.Uint8: ncclraw.Uint8,
	reflect.Int32: ncclraw.Int32, reflect.Uint32: ncclraw.Uint32,
	reflect.Int64: ncclraw.Int64, reflect.Uint64: ncclraw.Uint64,
	reflect.Float32: ncclraw.Float32, reflect.Float64: ncclraw.Float64,
}

// dataTypeOfKind is dataType for a type that is not one of the eight
// itself: one defined on one of them, or a refusal.
func dataTypeOfKind(t reflect.Type) (ncclraw.DataType, error) {
	if dt, ok := kindTypes[t.Kind()]; ok {
		return dt, nil
	}
	hint := ""
	switch t.Kind() {
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		hint = " (its size depends on the platform: use int64 or uint64)"
	case reflect.Int16, reflect.Uint16:
		hint = " (NCCL reduces no 16-bit integers)"
	}
	return 0, invalid("NCCL has no data type for elements of type %v%s: use int8, uint8, int32, uint32, int64, uint64, float32 or float64, or a type defined on one of them", t, hint)
}
