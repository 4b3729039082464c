package driver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/gputest"
)

// allocated reports whether the driver still knows ptr as an allocation.
func allocated(ptr driver.DevicePtr) bool { return gputest.Allocated(uintptr(ptr)) }

// TestForgottenBufferIsFreed: the cleanup safety net frees a Buffer that
// became unreachable without Close.
func TestForgottenBufferIsFreed(t *testing.T) {
	e, _ := setup(t)
	var ptr driver.DevicePtr
	func() {
		b, err := driver.Alloc[float32](e.ctx, 1<<20)
		require.NoError(t, err)
		ptr = b.Ptr()
	}()
	require.NotZero(t, ptr)
	deadline := time.Now().Add(30 * time.Second)
	for allocated(ptr) && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	assert.False(t, allocated(ptr), "the forgotten buffer was freed")
}

func TestEventFlags(t *testing.T) {
	e, s := setup(t)
	for _, f := range []driver.EventFlags{driver.EventDefault, driver.EventBlockingSync, driver.EventDisableTiming,
		driver.EventInterprocess | driver.EventDisableTiming, driver.EventBlockingSync | driver.EventDisableTiming} {
		ev, err := e.ctx.NewEvent(f)
		require.NoError(t, err, "flags %#x", f)
		require.NoError(t, ev.Record(s))
		require.NoError(t, ev.Synchronize())
		require.NoError(t, ev.Close())
	}
	_, err := e.ctx.NewEvent(driver.EventInterprocess)
	assert.ErrorIs(t, err, driver.ErrInvalidValue, "interprocess events need timing disabled")
}

// TestLoadFatbinAndCubin loads the three kinds of image: PTX (the shared
// module), CUBIN (nvrtc's), and a fatbin made by nvcc where a toolkit is
// installed.
func TestLoadFatbinAndCubin(t *testing.T) {
	e, s := setup(t)
	nvcc, err := exec.LookPath("nvcc")
	if err != nil {
		nvcc = "/usr/local/cuda/bin/nvcc"
		if _, err := os.Stat(nvcc); err != nil {
			t.Skip("nvcc not found: a fatbin needs the CUDA toolkit to build")
		}
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "k.cu")
	require.NoError(t, os.WriteFile(src, []byte(`extern "C" __global__ void seven(int* p) { *p = 7; }`), 0o644))
	fat := filepath.Join(dir, "k.fatbin")
	out, err := exec.Command(nvcc, "-fatbin", "-arch="+e.dev.Arch(), "-o", fat, src).CombinedOutput()
	require.NoError(t, err, "nvcc: %s", out)
	img, err := os.ReadFile(fat)
	require.NoError(t, err)
	mod, err := e.ctx.LoadModule(img)
	require.NoError(t, err)
	defer mod.Close()
	f, err := mod.Function("seven")
	require.NoError(t, err)
	buf, err := driver.Alloc[int32](e.ctx, 1)
	require.NoError(t, err)
	defer buf.Close()
	require.NoError(t, s.Launch(f, driver.Grid(1), driver.Block(1), buf))
	require.NoError(t, s.Synchronize())
	got := make([]int32, 1)
	require.NoError(t, buf.CopyToHost(e.ctx.LegacyStream(), got))
	assert.Equal(t, int32(7), got[0])
}
