package rtc_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/internal/rtc"
	"github.com/purecuda/cuda/loader"
)

func TestResultErrors(t *testing.T) {
	err := error(&rtc.Error{Func: "nvrtcCompileProgram", Code: rtc.NVRTC_ERROR_COMPILATION})
	assert.Equal(t, "nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6): compilation", err.Error())
	assert.ErrorIs(t, err, rtc.NVRTC_ERROR_COMPILATION)
	assert.NotErrorIs(t, err, rtc.NVRTC_ERROR_INVALID_OPTION)
	assert.Equal(t, "NVRTC_ERROR_INVALID_OPTION", rtc.NVRTC_ERROR_INVALID_OPTION.String())
	assert.Equal(t, "Result(99)", rtc.Result(99).String())
	assert.Equal(t, "unknown status", rtc.Result(99).Message())
	assert.Equal(t, "no error", rtc.NVRTC_SUCCESS.Message())
}

// TestErrorType: failed calls are built by the installed constructor
// (package nvrtc installs its own), by default as *Error.
func TestErrorType(t *testing.T) {
	assert.Equal(t, &rtc.Error{Func: "nvrtcVersion", Code: rtc.NVRTC_ERROR_INVALID_INPUT}, rtc.CallError("nvrtcVersion", rtc.NVRTC_ERROR_INVALID_INPUT))
	rtc.SetErrorType(func(fn string, code rtc.Result) error { return fmt.Errorf("mine: %s %d", fn, code) })
	defer rtc.SetErrorType(nil) // back to the default
	assert.EqualError(t, rtc.CallError("nvrtcVersion", rtc.NVRTC_ERROR_INVALID_INPUT), "mine: nvrtcVersion 3")
	rtc.SetErrorType(nil)
	assert.IsType(t, &rtc.Error{}, rtc.CallError("nvrtcVersion", rtc.NVRTC_ERROR_INVALID_INPUT))
}

func TestWithoutNVRTC(t *testing.T) {
	if _, err := rtc.Load(); err == nil {
		t.Skip("NVRTC is present here; covered by the nvrtc package's tests")
	}
	var major, minor int32
	err := rtc.Version(&major, &minor)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	assert.Contains(t, err.Error(), "NVRTC library not found")
	s, err := rtc.GetErrorString(rtc.NVRTC_ERROR_COMPILATION)
	assert.Nil(t, s)
	assert.ErrorIs(t, err, loader.ErrNotFound)
	for _, r := range rtc.ResolveAll() {
		assert.ErrorIs(t, r.Err, loader.ErrNotFound)
	}
}
