package hostfn_test

import (
	"errors"
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// inCallbackSink records whether the PanicSink a callback's panic goes to
// runs as part of the callback.
type inCallbackSink struct{ in, called atomic.Bool }

func (s *inCallbackSink) CallbackPanicked(any, []byte) {
	s.in.Store(hostfn.InCallback())
	s.called.Store(true)
}

// Invariant I8: a callback runs while a CUDA thread waits for it, so the
// last release of an Object inside one (a host function closing the last
// reference of a buffer) does not run the destroy there: the release queue
// runs it after, on a goroutine of its own. InCallback tells the two
// apart, and also holds in the PanicSink a callback's panic reaches.
func TestInCallbackDefersDestroy_I8(t *testing.T) {
	lifetest.DrainErrors()
	assert.False(t, hostfn.InCallback(), "a test goroutine")
	boom := errors.New("destroy failed")
	var destroyedIn, destroyed atomic.Bool
	var obj lifetime.Object
	obj.Init(func() error {
		destroyedIn.Store(hostfn.InCallback())
		destroyed.Store(true)
		return boom
	})
	var in atomic.Bool
	var closeErr error
	id := hostfn.Register(hostfn.Callback{Once: true, Fn: func() {
		in.Store(hostfn.InCallback())
		closeErr = obj.Close()
		assert.False(t, destroyed.Load(), "not destroyed in the callback")
	}})
	hostfn.Invoke(id)
	assert.True(t, in.Load(), "InCallback in a callback")
	assert.NoError(t, closeErr, "the destroy runs later: its error goes to Errors")
	lifetime.Flush()
	assert.True(t, destroyed.Load(), "destroyed once the queue ran")
	assert.False(t, destroyedIn.Load(), "the destroy ran outside the callback")
	errs := lifetime.Errors()
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], boom)
	assert.True(t, obj.Destroyed())

	sink := &inCallbackSink{}
	id = hostfn.Register(hostfn.Callback{Once: true, Sink: sink, Fn: func() { panic("in a host function") }})
	hostfn.Invoke(id)
	require.True(t, sink.called.Load())
	assert.True(t, sink.in.Load(), "InCallback in the PanicSink")
	assert.False(t, hostfn.InCallback(), "after the callbacks")

	// Outside callbacks a last release destroys at once, even while a
	// callback runs elsewhere.
	release := make(chan struct{})
	started := make(chan struct{})
	id = hostfn.Register(hostfn.Callback{Once: true, Fn: func() { close(started); <-release }})
	go hostfn.Invoke(id)
	<-started
	var now lifetime.Object
	ran := false
	now.Init(func() error { ran = true; return nil })
	require.NoError(t, now.Close())
	assert.True(t, ran, "destroyed at once outside the callback")
	close(release)
	lifetest.DrainErrors()
}

// InCallback costs one atomic load while no callback runs.
func BenchmarkInCallbackIdle(b *testing.B) {
	for b.Loop() {
		if hostfn.InCallback() {
			b.Fatal("no callback runs")
		}
	}
}
