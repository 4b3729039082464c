package graph

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/driver"
)

// Every exported method of every type of the package, called on a nil or
// zero value with zero arguments, returns (an error, where it returns one)
// and never panics (new(Exec).Err() among them).
func TestZeroValuesNeverPanic(t *testing.T) {
	values := []any{
		(*Graph)(nil), new(Graph), (*Exec)(nil), new(Exec), (*StreamCapture)(nil), new(StreamCapture),
		Node{}, Condition{}, Builder{}, Builder{g: new(Graph)},
		Builder{g: new(Graph), ctx: new(driver.Context)}, Builder{}.On(new(driver.Context)), (*Graph)(nil).On(nil),
		(*InstantiateError)(nil), (*UpdateError)(nil), &InstantiateError{}, &UpdateError{},
	}
	calls := 0
	for _, v := range values {
		rv := reflect.ValueOf(v)
		for i := 0; i < rv.NumMethod(); i++ {
			m := rv.Method(i)
			name := fmt.Sprintf("%T.%s", v, rv.Type().Method(i).Name)
			args := make([]reflect.Value, m.Type().NumIn())
			for j := range args {
				in := m.Type().In(j)
				if m.Type().IsVariadic() && j == len(args)-1 {
					args[j] = reflect.Zero(in)
					continue
				}
				args[j] = reflect.Zero(in)
			}
			var out []reflect.Value
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s panicked: %v", name, p)
					}
				}()
				if m.Type().IsVariadic() {
					out = m.CallSlice(args)
				} else {
					out = m.Call(args)
				}
			}()
			calls++
			method := rv.Type().Method(i).Name
			if n := len(out); n > 0 && m.Type().Out(n-1) == reflect.TypeFor[error]() && errorExpected(v) && !noErrorZero[method] {
				assert.False(t, out[n-1].IsNil(), "%s on a nil or zero value returned no error", name)
			}
		}
	}
	assert.Greater(t, calls, 100)
}

// noErrorZero are methods that succeed on a nil or zero value by design:
// closing or aborting nothing does nothing.
var noErrorZero = map[string]bool{"Close": true, "Abort": true}

// errorExpected reports whether calls on v must fail: every nil or zero
// graph object; the error types describe themselves.
func errorExpected(v any) bool {
	switch v.(type) {
	case *InstantiateError, *UpdateError:
		return false
	}
	return true
}
