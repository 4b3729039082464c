package driver_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/seam"
	"github.com/purecuda/cuda/lifetime"
)

// Nil receivers and zero values are errors, never panics.
//
// Every exported method of every driver type is called, through reflection
// so that no method (and no method added later) is missed, on a nil pointer
// and on a zero value made with new, twice: once with every argument the
// zero value of its type (nil pointers, nil functions, empty slices), and
// once with usable-looking arguments (zero values of the driver's types
// made with new, functions that record being called, one-element slices,
// ones for numbers), so that argument checks do not hide the receiver's.
// No call may panic or hang, a returned error must match
// ErrInvalidArgument, ErrNilStream or ErrClosed, and no function argument
// may be called (a callback handed a handle of nothing). None of this needs
// a driver: it runs in every CI job.

// zeroReceivers are the receivers under test: a nil pointer and a zero
// value of each type.
func zeroReceivers() []struct {
	name string
	v    any
} {
	return []struct {
		name string
		v    any
	}{
		{"nil *Context", (*driver.Context)(nil)}, {"new(Context)", new(driver.Context)},
		{"nil *Stream", (*driver.Stream)(nil)}, {"new(Stream)", new(driver.Stream)},
		{"nil *Event", (*driver.Event)(nil)}, {"new(Event)", new(driver.Event)},
		{"nil *Buffer[int32]", (*driver.Buffer[int32])(nil)}, {"new(Buffer[int32])", new(driver.Buffer[int32])},
		{"nil *HostBuffer[int32]", (*driver.HostBuffer[int32])(nil)}, {"new(HostBuffer[int32])", new(driver.HostBuffer[int32])},
		{"nil *Registered[int32]", (*driver.Registered[int32])(nil)}, {"new(Registered[int32])", new(driver.Registered[int32])},
		{"nil *MemPool", (*driver.MemPool)(nil)}, {"new(MemPool)", new(driver.MemPool)},
		{"nil *Module", (*driver.Module)(nil)}, {"new(Module)", new(driver.Module)},
		{"nil *Library", (*driver.Library)(nil)}, {"new(Library)", new(driver.Library)},
		{"nil *Function", (*driver.Function)(nil)}, {"new(Function)", new(driver.Function)},
		{"nil *Args", (*driver.Args)(nil)}, {"new(Args)", new(driver.Args)},
		{"nil *Device", (*driver.Device)(nil)}, {"new(Device)", new(driver.Device)},
	}
}

// mayReturnNil lists methods that may succeed on a nil or zero receiver
// because there is nothing to do: closing a zero value, which owns nothing.
// A nil receiver's Close is still an error.
var mayReturnNil = map[string]bool{"Close": true}

var contextType = reflect.TypeFor[context.Context]()

// usableArg is a value of t that passes argument checks where it can, so
// that the receiver is what the method has to refuse. called is set when a
// function argument is called.
func usableArg(t reflect.Type, called *[]string, what string) reflect.Value {
	switch {
	case t == reflect.TypeFor[driver.GridDim]():
		return reflect.ValueOf(driver.Grid(1))
	case t == reflect.TypeFor[driver.BlockDim]():
		return reflect.ValueOf(driver.Block(1))
	case t == reflect.TypeFor[driver.LaunchConfig]():
		return reflect.ValueOf(driver.LaunchConfig{Grid: driver.Grid(1), Block: driver.Block(1)})
	case t == contextType:
		return reflect.ValueOf(context.Background())
	}
	switch t.Kind() {
	case reflect.Pointer:
		return reflect.New(t.Elem())
	case reflect.Func:
		return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
			*called = append(*called, what)
			out := make([]reflect.Value, t.NumOut())
			for i := range out {
				out[i] = reflect.Zero(t.Out(i))
			}
			return out
		})
	case reflect.Slice:
		return reflect.MakeSlice(t, 1, 1)
	case reflect.String:
		return reflect.ValueOf("x").Convert(t)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return reflect.ValueOf(1).Convert(t)
	case reflect.Float32, reflect.Float64:
		return reflect.ValueOf(1.0).Convert(t)
	}
	return reflect.Zero(t)
}

// argSets returns the argument lists to call m with: all zero values, and
// usable-looking ones. A variadic parameter gets no values in the first
// and one in the second.
func argSets(mt reflect.Type, called *[]string, what string) [][]reflect.Value {
	n := mt.NumIn()
	fixed := n
	if mt.IsVariadic() {
		fixed = n - 1
	}
	zero := make([]reflect.Value, fixed)
	usable := make([]reflect.Value, fixed)
	for i := 0; i < fixed; i++ {
		zero[i] = reflect.Zero(mt.In(i))
		usable[i] = usableArg(mt.In(i), called, what)
	}
	if mt.IsVariadic() {
		et := mt.In(n - 1).Elem()
		if et.Kind() == reflect.Interface {
			usable = append(usable, reflect.ValueOf(int32(1)))
		} else {
			usable = append(usable, usableArg(et, called, what))
		}
	}
	return [][]reflect.Value{zero, usable}
}

// callContained calls m with args and returns its results, or the panic it
// raised, or a timeout.
func callContained(m reflect.Value, args []reflect.Value) (out []reflect.Value, panicked any, hung bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				panicked = fmt.Sprintf("%v at %s", p, driverFrame(debug.Stack()))
			}
		}()
		out = m.Call(args)
	}()
	select {
	case <-done:
		return out, panicked, false
	case <-time.After(10 * time.Second):
		return nil, nil, true
	}
}

// driverFrame is the innermost frame of package driver in a stack, to say
// where a panic came from without a page of reflection frames.
func driverFrame(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "github.com/purecuda/cuda/driver.") && i+1 < len(lines) {
			return strings.TrimSpace(l) + " " + strings.TrimSpace(lines[i+1])
		}
	}
	return string(stack)
}

var errorType = reflect.TypeFor[error]()

// allowedZeroError reports whether err is one of the errors a nil or zero
// object may return.
func allowedZeroError(err error) bool {
	return errors.Is(err, driver.ErrInvalidArgument) || errors.Is(err, driver.ErrNilStream) || errors.Is(err, driver.ErrClosed)
}

func TestNilAndZeroReceiversNeverPanic(t *testing.T) {
	methods := 0
	for _, r := range zeroReceivers() {
		rv := reflect.ValueOf(r.v)
		rt := rv.Type()
		require.NotZero(t, rt.NumMethod(), "%s has exported methods", r.name)
		nilRecv := rv.IsNil()
		for i := 0; i < rt.NumMethod(); i++ {
			meth := rt.Method(i)
			what := r.name + "." + meth.Name
			m := rv.Method(i)
			var called []string
			for k, args := range argSets(m.Type(), &called, what) {
				variant := [...]string{"zero arguments", "usable arguments"}[k]
				methods++
				out, p, hung := callContained(m, args)
				if hung {
					t.Errorf("%s (%s) did not return within 10s", what, variant)
					continue
				}
				if p != nil {
					t.Errorf("%s (%s) panicked: %v", what, variant, p)
					continue
				}
				checkZeroResults(t, what+" ("+variant+")", meth.Name, nilRecv, m.Type(), out)
			}
			assert.Empty(t, called, "%s called its function argument on a nil or zero receiver", what)
		}
	}
	t.Logf("%d calls", methods)
}

// checkZeroResults checks what a method of a nil or zero receiver returned:
// an allowed error, and no reference from a Hold.
func checkZeroResults(t *testing.T, what, name string, nilRecv bool, mt reflect.Type, out []reflect.Value) {
	t.Helper()
	for i, v := range out {
		if v.Type() == reflect.TypeFor[lifetime.Ref]() {
			assert.False(t, v.Interface().(lifetime.Ref).Valid(), "%s returned a reference to nothing", what)
		}
		if mt.Out(i) != errorType {
			continue
		}
		err, _ := v.Interface().(error)
		if err == nil {
			if !nilRecv && mayReturnNil[name] {
				continue
			}
			t.Errorf("%s succeeded on a nil or zero receiver", what)
			continue
		}
		assert.True(t, allowedZeroError(err), "%s: error %q matches none of ErrInvalidArgument, ErrNilStream, ErrClosed", what, err)
	}
}

// TestNilAndZeroArguments: the package's functions given nil and zero
// objects return errors.
// call is one call of TestNilAndZeroArguments.
type call struct {
	name string
	f    func() error
}

// someExport is export data that names nothing, as another process might
// send it: 72 bytes of ones.
func someExport() driver.BufferExport {
	var e driver.BufferExport
	b := make([]byte, 72)
	for i := range b {
		b[i] = 1
	}
	_ = e.UnmarshalBinary(b)
	return e
}

func TestNilAndZeroArguments(t *testing.T) {
	second := func(_ any, err error) error { return err }
	var calls []call
	for _, c := range []*driver.Context{nil, new(driver.Context)} {
		calls = append(calls,
			call{fmt.Sprintf("Alloc(%v)", c), func() error { return second(driver.Alloc[int32](c, 4)) }},
			call{fmt.Sprintf("AllocManaged(%v)", c), func() error { return second(driver.AllocManaged[int32](c, 4)) }},
			call{fmt.Sprintf("AllocHost(%v)", c), func() error { return second(driver.AllocHost[int32](c, 4, 0)) }},
			call{fmt.Sprintf("RegisterHost(%v)", c), func() error { return second(driver.RegisterHost(c, make([]int32, 4))) }},
			call{fmt.Sprintf("RegisterHost(%v, nil)", c), func() error { return second(driver.RegisterHost[int32](c, nil)) }},
		)
	}
	for _, s := range []*driver.Stream{nil, new(driver.Stream)} {
		calls = append(calls,
			call{fmt.Sprintf("AllocAsync(%v)", s), func() error { return second(driver.AllocAsync[int32](s, 4)) }},
			call{fmt.Sprintf("AllocFromPool(%v, nil)", s), func() error { return second(driver.AllocFromPool[int32](s, nil, 4)) }},
			call{fmt.Sprintf("AllocFromPool(%v, new)", s), func() error { return second(driver.AllocFromPool[int32](s, new(driver.MemPool), 4)) }},
		)
	}
	for _, e := range []*driver.Event{nil, new(driver.Event)} {
		calls = append(calls,
			call{fmt.Sprintf("Elapsed(%v, %v)", e, e), func() error { return second(driver.Elapsed(e, e)) }},
			call{fmt.Sprintf("Elapsed(%v, new)", e), func() error { return second(driver.Elapsed(e, new(driver.Event))) }},
		)
	}
	for _, a := range []*driver.Args{nil, new(driver.Args)} {
		calls = append(calls, call{fmt.Sprintf("SetArg(%v)", a), func() error { return driver.SetArg(a, 0, int32(1)) }})
	}
	for _, b := range []*driver.Buffer[int32]{nil, new(driver.Buffer[int32])} {
		calls = append(calls, call{fmt.Sprintf("ExportBuffer(%v)", b), func() error { return second(driver.ExportBuffer(b)) }})
	}
	for _, p := range []*driver.MemPool{nil, new(driver.MemPool)} {
		calls = append(calls,
			call{fmt.Sprintf("ImportBuffer(%v, zero)", p), func() error { return second(driver.ImportBuffer[int32](p, driver.BufferExport{})) }},
			call{fmt.Sprintf("ImportBuffer(%v, data)", p), func() error { return second(driver.ImportBuffer[int32](p, someExport())) }},
		)
	}
	calls = append(calls,
		call{"(*BufferExport)(nil).UnmarshalBinary", func() error { return (*driver.BufferExport)(nil).UnmarshalBinary(nil) }},
		call{"BufferExport.UnmarshalBinary(nil)", func() error { return new(driver.BufferExport).UnmarshalBinary(nil) }},
	)
	calls = append(calls, ipcZeroCalls()...)
	for _, c := range calls {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v\n%s", c.name, p, debug.Stack())
				}
			}()
			err = c.f()
		}()
		if assert.Error(t, err, c.name) {
			assert.True(t, allowedZeroError(err), "%s: error %q matches none of ErrInvalidArgument, ErrNilStream, ErrClosed", c.name, err)
		}
	}
	// A nil *Args is a bad argument, not a closed object.
	assert.ErrorIs(t, driver.SetArg((*driver.Args)(nil), 0, int32(1)), driver.ErrInvalidArgument)
	assert.NotErrorIs(t, driver.SetArg((*driver.Args)(nil), 0, int32(1)), driver.ErrClosed)
	assert.ErrorIs(t, (*driver.Args)(nil).Close(), driver.ErrInvalidArgument)
	var s *driver.Stream
	assert.ErrorIs(t, s.LaunchArgs(nil, driver.Grid(1), driver.Block(1)), driver.ErrInvalidArgument)
}

// TestZeroTypesCovered: the receivers above cover every exported type of
// the package with pointer methods, so that a new type is not missed.
func TestZeroTypesCovered(t *testing.T) {
	covered := map[string]bool{}
	for _, r := range zeroReceivers() {
		name := reflect.TypeOf(r.v).Elem().Name()
		if i := strings.IndexByte(name, '['); i >= 0 {
			name = name[:i]
		}
		covered[name] = true
	}
	// Types whose pointers are handed out by the package (kept by hand:
	// reflection cannot list a package's types).
	for _, name := range []string{"Context", "Stream", "Event", "Buffer", "HostBuffer", "Registered", "MemPool",
		"Module", "Library", "Function", "Args", "Device"} {
		assert.True(t, covered[name], "%s is tested", name)
	}
}

// TestSeamHoldOfNilAndZero: the hold graph takes through the seam (no
// exported Hold) refuses every nil or zero receiver, and anything that is
// no driver object, with an allowed error and no reference; it never
// panics.
func TestSeamHoldOfNilAndZero(t *testing.T) {
	cases := zeroReceivers()
	cases = append(cases, struct {
		name string
		v    any
	}{"untyped nil", nil}, struct {
		name string
		v    any
	}{"an int", 1}, struct {
		name string
		v    any
	}{"a Buffer value", driver.Buffer[int32]{}})
	for _, c := range cases {
		var ref lifetime.Ref
		var err error
		require.NotPanics(t, func() { ref, err = seam.Hold(c.v) }, c.name)
		assert.False(t, ref.Valid(), "%s: a reference to nothing", c.name)
		if assert.Error(t, err, c.name) {
			assert.True(t, allowedZeroError(err), "%s: error %q matches none of ErrInvalidArgument, ErrNilStream, ErrClosed", c.name, err)
		}
	}
}
