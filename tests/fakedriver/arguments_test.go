//go:build linux

package fakedriver_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
	"github.com/purecuda/cuda/nvrtc"
)

// TestLiveReceiversZeroArguments: every exported method of live
// objects, given zero arguments (nil pointers, nil functions, zero
// objects made with new, empty slices), returns without a panic, and no
// call reaches fakecuda with a bad handle or pointer. Closing methods are
// skipped (the objects stay live for the other calls).
func TestLiveReceiversZeroArguments(t *testing.T) {
	f := ltSetup(t)
	buf, err := driver.Alloc[int32](f.ctx, 16)
	require.NoError(t, err)
	defer buf.Close()
	ev, err := f.ctx.NewEvent(driver.EventDefault)
	require.NoError(t, err)
	defer ev.Close()
	hb, err := driver.AllocHost[int32](f.ctx, 16, 0)
	require.NoError(t, err)
	defer hb.Close()
	reg, err := driver.RegisterHost(f.ctx, make([]int32, 16))
	require.NoError(t, err)
	defer reg.Close()
	pool, err := f.ctx.NewMemPool()
	require.NoError(t, err)
	defer pool.Close()
	epool, err := f.ctx.NewExportableMemPool()
	require.NoError(t, err)
	defer epool.Close()
	ebuf, err := driver.AllocFromPool[int32](f.s, epool, 16)
	require.NoError(t, err)
	exp, err := driver.ExportBuffer(ebuf)
	require.NoError(t, err)
	file, err := epool.ExportFD()
	require.NoError(t, err)
	ipool, err := f.ctx.ImportMemPool(file)
	require.NoError(t, err)
	require.NoError(t, file.Close())
	defer ipool.Close()
	require.NoError(t, f.s.Synchronize())
	ibuf, err := driver.ImportBuffer[int32](ipool, exp)
	require.NoError(t, err)
	iev, err := f.ctx.NewEvent(driver.EventInterprocess | driver.EventDisableTiming)
	require.NoError(t, err)
	defer iev.Close()
	defer ebuf.Close() // after the import's Close
	defer ibuf.Close()
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	defer lib.Close()
	args, err := f.fill.NewArgs(buf, int32(1), int32(16))
	require.NoError(t, err)
	defer args.Close()
	kp, err := seam.Marshal(f.fill, f.ctx, []any{buf, int32(1), int32(16)})
	require.NoError(t, err)
	defer kp.Free()
	skip := map[string]bool{"Close": true, "Free": true, "TakeRefs": true}
	for _, recv := range []any{f.ctx, f.s, ev, buf, hb, reg, pool, f.mod, lib, f.fill, args, kp, f.ctx.Device(), f.ctx.LegacyStream(),
		epool, ipool, ibuf, iev, &exp} {
		rv := reflect.ValueOf(recv)
		for i := 0; i < rv.NumMethod(); i++ {
			name := rv.Type().Method(i).Name
			if skip[name] {
				continue
			}
			m := rv.Method(i)
			mt := m.Type()
			in := make([]reflect.Value, mt.NumIn())
			for j := range in {
				in[j] = reflect.Zero(mt.In(j))
			}
			if mt.IsVariadic() {
				in = in[:len(in)-1]
			}
			what := rv.Type().String() + "." + name
			var out []reflect.Value
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s with zero arguments panicked: %v", what, p)
					}
				}()
				out = m.Call(in)
			}()
			ltDispose(t, name, out)
		}
	}
	require.NoError(t, f.ctx.Synchronize())
	ltNoBadUses(t)
}

// ltDispose releases what a call made: references, kernel parameters, and
// objects made by New*, Load*, Compile*, Alloc*, Slice, PrimaryContext and
// DefaultMemPool (not objects a getter returns, such as Buffer.Context).
func ltDispose(t *testing.T, method string, out []reflect.Value) {
	t.Helper()
	makes := method == "Slice" || method == "PrimaryContext" || method == "DefaultMemPool" || method == "ExportFD"
	for _, p := range []string{"New", "Load", "Compile", "Alloc"} {
		makes = makes || strings.HasPrefix(method, p)
	}
	for _, v := range out {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			continue
		}
		switch x := v.Interface().(type) {
		case lifetime.Ref:
			assert.NoError(t, x.Release())
		case seam.Params:
			x.Free()
		case interface{ Close() error }:
			if makes {
				assert.NoError(t, x.Close(), "closing what %s made", method)
			}
		}
	}
}

// TestNULBytesRefused: names and NVRTC input with an embedded NUL byte are
// refused instead of being cut short by C (Function("fill\x00junk") must
// not find fill).
func TestNULBytesRefused(t *testing.T) {
	f := ltSetup(t)
	_, err := f.mod.Function("fill\x00junk")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "Module.Function")
	_, _, err = f.mod.Global("answer\x00")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "Module.Global")
	lib, err := driver.LoadLibrary([]byte("FAKE library"))
	require.NoError(t, err)
	defer lib.Close()
	_, err = lib.Function("fill\x00junk")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "Library.Function")
	_, err = lib.Function("fill")
	assert.NoError(t, err, "the control")
	_, err = driver.DeviceByPCIBusID("0000:00:00.0\x00junk")
	assert.ErrorIs(t, err, driver.ErrInvalidArgument, "DeviceByPCIBusID")

	// NVRTC refuses before it is loaded (so this needs no libnvrtc).
	const src = `extern "C" __global__ void k() {}`
	for name, o := range map[string]nvrtc.Options{
		"option":            {Extra: []string{"-DX\x00Y"}},
		"define name":       {Defines: map[string]string{"A\x00B": ""}},
		"define value":      {Defines: map[string]string{"A": "1\x002"}},
		"include path":      {IncludePaths: []string{"/tmp\x00/x"}},
		"header name":       {Headers: map[string]string{"h.h\x00": "int x;"}},
		"header content":    {Headers: map[string]string{"h.h": "int x;\x00garbage"}},
		"name expression":   {NameExpressions: []string{"k\x00"}},
		"program name":      {Name: "p.cu\x00"},
		"standard":          {Std: "c++17\x00"},
		"architecture name": {Arch: "sm_90\x00"},
	} {
		_, err := nvrtc.Compile(src, o)
		assert.ErrorIs(t, err, nvrtc.ErrBadOptions, name)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
		_, _, err = f.ctx.CompileModule(src, o)
		assert.ErrorIs(t, err, nvrtc.ErrBadOptions, "CompileModule: %s", name)
	}
	_, err = nvrtc.Compile(src+"\x00garbage", nvrtc.Options{})
	assert.ErrorIs(t, err, nvrtc.ErrBadOptions, "source")
	_, _, err = f.ctx.CompileModule(src+"\x00garbage", nvrtc.Options{})
	assert.ErrorIs(t, err, nvrtc.ErrBadOptions, "CompileModule: source")
}
