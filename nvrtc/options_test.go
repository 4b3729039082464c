package nvrtc_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/internal/rtc"
	"github.com/purecuda/cuda/loader"
	"github.com/purecuda/cuda/nvrtc"
)

func TestOptionRendering(t *testing.T) {
	args, err := nvrtc.Options{
		Arch: "sm_90", Std: "c++17",
		Defines:      map[string]string{"N": "4", "DEBUG": "", "A": "x y"},
		IncludePaths: []string{"/inc", "rel"},
		Debug:        true, LineInfo: true, FastMath: true, RelocatableDeviceCode: true, LTO: true,
		MaxRegisters: 32,
		Extra:        []string{"--extra-device-vectorization"},
	}.Args()
	require.NoError(t, err)
	assert.Equal(t, []string{
		"-arch=sm_90", "-std=c++17", "-DA=x y", "-DDEBUG", "-DN=4", "-I/inc", "-Irel",
		"-G", "-lineinfo", "-use_fast_math", "-rdc=true", "-dlto", "-maxrregcount=32",
		"--extra-device-vectorization",
	}, args)

	none, err := nvrtc.Options{}.Args()
	require.NoError(t, err)
	assert.Empty(t, none)
	virt, err := nvrtc.Options{Arch: "compute_80"}.Args()
	require.NoError(t, err)
	assert.Equal(t, []string{"-arch=compute_80"}, virt)
}

func TestBadOptions(t *testing.T) {
	for _, o := range []nvrtc.Options{
		{Arch: "hopper"}, {Arch: "sm_90 -G"}, {Defines: map[string]string{"": "1"}},
		{Defines: map[string]string{"A B": ""}}, {IncludePaths: []string{""}}, {MaxRegisters: -1},
	} {
		_, err := o.Args()
		assert.ErrorIs(t, err, nvrtc.ErrBadOptions, "%+v", o)
		_, err = nvrtc.Compile("__global__ void k(){}", o)
		assert.ErrorIs(t, err, nvrtc.ErrBadOptions, "Compile checks options before NVRTC runs")
	}
	_, err := nvrtc.Compile("  \n", nvrtc.Options{})
	assert.ErrorIs(t, err, nvrtc.ErrBadOptions)
	assert.ErrorContains(t, err, "empty source")
}

func TestCompileErrorFormatting(t *testing.T) {
	err := error(&nvrtc.CompileError{
		Err: &nvrtc.Error{Func: "nvrtcCompileProgram", Code: 6},
		Log: "program.cu(3): error: identifier \"x\" is undefined\n\n",
	})
	assert.Equal(t, "nvrtc: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6): compilation\nprogram.cu(3): error: identifier \"x\" is undefined", err.Error())
	assert.ErrorIs(t, err, nvrtc.ErrCompilation)
	assert.NotErrorIs(t, err, nvrtc.ErrInvalidOption)
	var ce *nvrtc.CompileError
	assert.True(t, errors.As(err, &ce))
	var ne *nvrtc.Error
	require.True(t, errors.As(err, &ne))
	assert.Equal(t, nvrtc.ErrCompilation, ne.Code)
	assert.Equal(t, "NVRTC_ERROR_COMPILATION", ne.Code.String())
	assert.Equal(t, "compilation", nvrtc.ErrCompilation.Message())
	assert.ErrorIs(t, err, rtc.NVRTC_ERROR_COMPILATION, "internal code may compare with the raw table's codes")
	assert.Equal(t, "nvrtcResult(99) (99): unknown status", nvrtc.Status(99).Error(), "an unknown status names the C type")
	// The constants are nvrtc.h's values.
	assert.EqualValues(t, rtc.NVRTC_ERROR_COMPILATION, nvrtc.ErrCompilation)
	assert.EqualValues(t, rtc.NVRTC_ERROR_INVALID_OPTION, nvrtc.ErrInvalidOption)
	assert.EqualValues(t, rtc.NVRTC_ERROR_INVALID_INPUT, nvrtc.ErrInvalidInput)
	assert.EqualValues(t, rtc.NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID, nvrtc.ErrNameExpression)
}

func TestOutputImage(t *testing.T) {
	r := &nvrtc.Output{PTX: []byte("ptx")}
	assert.Equal(t, []byte("ptx"), r.Image())
	r.CUBIN = []byte("cubin")
	assert.Equal(t, []byte("cubin"), r.Image())
}

func TestWithoutLibrary(t *testing.T) {
	if _, err := nvrtc.LibraryPath(); err == nil {
		t.Skip("NVRTC is present here: see the GPU-machine tests")
	}
	if gputest.Required() {
		t.Fatal("PURECUDA_REQUIRE_GPU is set but NVRTC does not load")
	}
	_, err := nvrtc.Compile("__global__ void k(){}", nvrtc.Options{})
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.ErrorContains(t, err, "NVRTC library not found")
	assert.ErrorContains(t, err, "libnvrtc.so.13")
	_, _, err = nvrtc.Version()
	assert.ErrorIs(t, err, loader.ErrNotFound)
	_, err = nvrtc.SupportedArchs()
	assert.ErrorIs(t, err, loader.ErrNotFound)
}
