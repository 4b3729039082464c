package cu_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/cu"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/loader"
)

func TestEnumString(t *testing.T) {
	assert.Equal(t, "CUDA_SUCCESS", cu.CUDA_SUCCESS.String())
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", cu.CUDA_ERROR_OUT_OF_MEMORY.String())
	assert.Equal(t, "CUresult(123456)", cu.CUresult(123456).String())
	assert.Equal(t, "CU_GRAPH_NODE_TYPE_KERNEL", cu.CU_GRAPH_NODE_TYPE_KERNEL.String())
	assert.Equal(t, "CU_LAUNCH_ATTRIBUTE_COOPERATIVE", cu.CU_LAUNCH_ATTRIBUTE_COOPERATIVE.String())
	assert.Equal(t, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT", cu.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT.String())
	assert.Equal(t, "CUjit_option(-7)", cu.CUjit_option(-7).String())
}

func TestErrorFormatting(t *testing.T) {
	err := error(&cu.Error{Func: "cuMemAlloc", Code: cu.CUDA_ERROR_OUT_OF_MEMORY})
	assert.Equal(t, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", err.Error())
	assert.ErrorIs(t, err, cu.CUDA_ERROR_OUT_OF_MEMORY)
	assert.NotErrorIs(t, err, cu.CUDA_ERROR_INVALID_VALUE)
	assert.NotErrorIs(t, err, cu.ErrNotSupported)
	assert.Equal(t, "CUDA_ERROR_INVALID_VALUE (1): invalid value", cu.CUDA_ERROR_INVALID_VALUE.Error())
	assert.Equal(t, "no error", cu.CUDA_SUCCESS.Message())
	assert.Equal(t, "unknown status", cu.CUresult(-5).Message())
	assert.Equal(t, "stream capture invalidated", cu.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.Message())

	ns := error(&cu.Error{Func: "cuFoo", Code: cu.CUDA_ERROR_NOT_SUPPORTED})
	assert.ErrorIs(t, ns, cu.ErrNotSupported)

	wrapped := errors.Join(errors.New("context"), err)
	assert.ErrorIs(t, wrapped, cu.CUDA_ERROR_OUT_OF_MEMORY)
	var ce *cu.Error
	assert.ErrorAs(t, wrapped, &ce)
	assert.Equal(t, "cuMemAlloc", ce.Func)
}

// TestErrorTypes: the table builds its errors through the installed
// constructors (package driver installs its own), and by default as *Error
// and *SymbolError.
func TestErrorTypes(t *testing.T) {
	err := cu.CallError("cuMemAlloc", cu.CUDA_ERROR_OUT_OF_MEMORY)
	var ce *cu.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, cu.Error{Func: "cuMemAlloc", Code: cu.CUDA_ERROR_OUT_OF_MEMORY}, *ce)
	se := &cu.SymbolError{Func: "cuX", ABI: 12080}
	assert.Same(t, se, cu.SymbolErrorOf(se))

	type mine struct{ error }
	cu.SetErrorTypes(cu.ErrorTypes{
		Call:   func(fn string, code cu.CUresult) error { return mine{fmt.Errorf("%s/%d", fn, code)} },
		Symbol: func(e *cu.SymbolError) error { return mine{fmt.Errorf("symbol %s", e.Func)} },
	})
	defer cu.SetErrorTypes(cu.ErrorTypes{}) // back to the defaults
	assert.Equal(t, mine{fmt.Errorf("cuMemAlloc/2")}, cu.CallError("cuMemAlloc", cu.CUDA_ERROR_OUT_OF_MEMORY))
	assert.Equal(t, mine{fmt.Errorf("symbol cuX")}, cu.SymbolErrorOf(se))
	cu.SetErrorTypes(cu.ErrorTypes{})
	assert.IsType(t, &cu.Error{}, cu.CallError("cuInit", cu.CUDA_ERROR_UNKNOWN))
}

func TestSymbolError(t *testing.T) {
	err := error(&cu.SymbolError{Func: "cuGraphAddNode", ABI: 12030, Driver: 12020, Reason: "needs a newer driver"})
	assert.Equal(t, "cuGraphAddNode: not available (needs driver API 12.3, driver is 12.2): needs a newer driver", err.Error())
	assert.ErrorIs(t, err, cu.ErrNotSupported)
	assert.Equal(t, "13.0", cu.FormatVersion(13000))
	assert.Equal(t, "12.8", cu.FormatVersion(12080))
	assert.Equal(t, "unknown", cu.FormatVersion(0))
}

// TestWithoutDriver: on a machine without libcuda every call returns the
// loader's error (listing where it looked) instead of panicking.
func TestWithoutDriver(t *testing.T) {
	if _, _, err := cu.Load(); err == nil {
		t.Skip("a driver is present here; covered by the GPU tests")
	}
	if gputest.Required() {
		t.Fatal("PURECUDA_REQUIRE_GPU is set but the driver does not load")
	}
	err := cu.Init(0)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	var v int32
	assert.ErrorIs(t, cu.DriverGetVersion(&v), loader.ErrNotFound)
	assert.ErrorIs(t, cu.LaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, nil, nil), loader.ErrNotFound)
	assert.ErrorIs(t, cu.TexRefSetMipmapLevelBias(0, 1.5), loader.ErrNotFound, "the RegisterFunc path too")
	res := cu.ResolveAll()
	assert.Len(t, res, 459)
	for _, r := range res {
		assert.ErrorIs(t, r.Err, loader.ErrNotFound)
	}
}

// purecuda passes handle-map ids where C takes a callback's void* user
// data. Held in a Go pointer, an id would be followed by the garbage
// collector, and an id can look like a heap address: a race-enabled stress
// once died with "found pointer to free object" when a slot's generation
// reached 0xc0 (ids 0xc0_0000_00xx point into the race heap at
// 0xc000000000). So every such parameter and field is a uintptr.
func TestUserDataIsNeverAGoPointer(t *testing.T) {
	u := reflect.TypeFor[uintptr]()
	for name, fn := range map[string]any{
		"LaunchHostFunc": cu.LaunchHostFunc, "StreamAddCallback": cu.StreamAddCallback,
		"LogsRegisterCallback": cu.LogsRegisterCallback, "DeviceRegisterAsyncNotification": cu.DeviceRegisterAsyncNotification,
	} {
		ft := reflect.TypeOf(fn)
		found := false
		for i := range ft.NumIn() {
			if ft.In(i) == u {
				found = true
			}
			assert.NotEqual(t, reflect.TypeFor[unsafe.Pointer](), ft.In(i), "%s parameter %d", name, i)
		}
		assert.True(t, found, "%s takes its user data as uintptr", name)
	}
	assert.Equal(t, u, reflect.TypeOf(cu.UserObjectCreate).In(1), "UserObjectCreate's ptr")
	for _, st := range []reflect.Type{reflect.TypeFor[cu.CUDA_HOST_NODE_PARAMS_v1](), reflect.TypeFor[cu.CUDA_HOST_NODE_PARAMS_v2]()} {
		f, ok := st.FieldByName("UserData")
		require.True(t, ok, st.Name())
		assert.Equal(t, u, f.Type, "%s.UserData", st.Name())
	}
}
