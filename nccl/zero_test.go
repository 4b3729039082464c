package nccl_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/nccl"
)

// TestZeroComm: every method of a nil *Comm and of new(Comm), called
// through reflection so that none is missed, with zero arguments and with
// usable-looking ones, returns an error matching ErrInvalidArgument (a
// zero Comm's Close is nil: it owns nothing) and never panics. No library
// or GPU is needed.
func TestZeroComm(t *testing.T) {
	for _, recv := range []struct {
		name string
		c    *nccl.Comm
	}{{"nil", nil}, {"new(Comm)", new(nccl.Comm)}} {
		v := reflect.ValueOf(recv.c)
		for i := 0; i < v.NumMethod(); i++ {
			m := v.Type().Method(i)
			for _, usable := range []bool{false, true} {
				args := make([]reflect.Value, m.Type.NumIn()-1)
				for j := range args {
					at := m.Type.In(j + 1)
					args[j] = reflect.Zero(at)
					if usable {
						switch {
						case at == reflect.TypeFor[context.Context]():
							args[j] = reflect.ValueOf(context.Background())
						case at == reflect.TypeFor[*driver.Stream]():
							args[j] = reflect.ValueOf(new(driver.Stream))
						case at == reflect.TypeFor[*nccl.Config]():
							args[j] = reflect.ValueOf(&nccl.Config{})
						}
					}
				}
				var out []reflect.Value
				assert.NotPanics(t, func() { out = v.Method(i).Call(args) }, "%s.%s", recv.name, m.Name)
				for _, o := range out {
					err, ok := o.Interface().(error)
					if !ok || o.IsNil() && !(m.Name == "Close" && recv.c != nil) {
						continue
					}
					if m.Name == "Close" && recv.c != nil {
						assert.NoError(t, err, "%s.Close owns nothing", recv.name)
						continue
					}
					assert.True(t, errors.Is(err, nccl.ErrInvalidArgument), "%s.%s: %v", recv.name, m.Name, err)
				}
				if len(out) > 0 && m.Type.Out(len(out)-1) == reflect.TypeFor[error]() && m.Name != "Close" &&
					out[len(out)-1].IsNil() {
					t.Errorf("%s.%s returned no error", recv.name, m.Name)
				}
			}
		}
	}
	var c *nccl.Comm
	assert.Equal(t, -1, c.Rank())
	assert.Equal(t, 0, c.Size())
	assert.Equal(t, -1, c.Device())
	assert.Nil(t, c.Context())
}

// TestZeroCommOperations: the operations refuse a nil or zero Comm, and
// Group a nil function, before NCCL is needed.
func TestZeroCommOperations(t *testing.T) {
	for _, c := range []*nccl.Comm{nil, new(nccl.Comm)} {
		b := new(driver.Buffer[float32])
		s := new(driver.Stream)
		for name, err := range map[string]error{
			"AllReduce":     nccl.AllReduce(c, s, b, b, nccl.Sum),
			"Broadcast":     nccl.Broadcast(c, s, b, b, 0),
			"Reduce":        nccl.Reduce(c, s, b, b, nccl.Sum, 0),
			"AllGather":     nccl.AllGather(c, s, b, b),
			"ReduceScatter": nccl.ReduceScatter(c, s, b, b, nccl.Sum),
			"Send":          nccl.Send(c, s, b, 0),
			"Recv":          nccl.Recv(c, s, b, 0),
		} {
			assert.ErrorIs(t, err, nccl.ErrInvalidArgument, name)
		}
	}
	assert.ErrorIs(t, nccl.Group(nil), nccl.ErrInvalidArgument)
	_, err := nccl.InitAll()
	assert.ErrorIs(t, err, nccl.ErrInvalidArgument)
	_, err = nccl.InitAll(nil)
	assert.ErrorIs(t, err, nccl.ErrInvalidArgument)
	_, err = nccl.InitRank(context.Background(), nil, nccl.UniqueID{}, 1, 0, nil)
	assert.ErrorIs(t, err, nccl.ErrInvalidArgument)
}
