package hostfn_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
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

//go:noinline
func atDepth(n int, f func()) {
	if n == 0 {
		f()
		return
	}
	atDepth(n-1, f)
}

// InCallback holds in a worker (the portable path) also after an
// earlier callback on a worker called runtime.Goexit, is false again after
// the callbacks, and is false in a goroutine the callback starts and does
// not wait for (which does not deadlock: the callback returns).
func TestInCallbackIdentityAcrossGoexit(t *testing.T) {
	lifetest.DrainErrors()
	for range 3 {
		id := hostfn.Register(hostfn.Callback{Once: true, Fn: func() { runtime.Goexit() }})
		hostfn.Invoke(id)
		var in atomic.Bool
		spawned := make(chan bool, 1)
		id = hostfn.Register(hostfn.Callback{Once: true, Fn: func() {
			in.Store(hostfn.InCallback())
			go func() { spawned <- hostfn.InCallback() }()
		}})
		hostfn.Invoke(id)
		assert.True(t, in.Load())
		assert.False(t, <-spawned)
		assert.False(t, hostfn.InCallback())
	}
}

// Destroys queued from a callback run in the order of the
// releases, after the callback, and dependents' releases chained from a
// queued destroy run at once on the release goroutine (no second queuing).
func TestInCallbackDestroyOrderKept(t *testing.T) {
	lifetest.DrainErrors()
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var parent, a, b lifetime.Object
	parent.Init(func() error { note("parent"); return nil })
	require.True(t, parent.Retain())
	a.Init(func() error { note("a"); return lifetime.Counted(parent.Release()) })
	b.Init(func() error { note("b"); return nil })
	require.NoError(t, parent.Close())
	id := hostfn.Register(hostfn.Callback{Once: true, Fn: func() {
		_ = a.Close()
		_ = b.Close()
		note("callback returns")
	}})
	hostfn.Invoke(id)
	lifetime.Flush()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"callback returns", "a", "parent", "b"}, order)
	assert.Empty(t, lifetime.Errors())
}

// BenchmarkInCallbackBusyDeep times InCallback at a stack depth of 100
// while a callback runs elsewhere: what every last release pays then.
func BenchmarkInCallbackBusyDeep(b *testing.B) {
	release, started := make(chan struct{}), make(chan struct{})
	id := hostfn.Register(hostfn.Callback{Once: true, Fn: func() { close(started); <-release }})
	go hostfn.Invoke(id)
	<-started
	defer close(release)
	atDepth(100, func() {
		for b.Loop() {
			if hostfn.InCallback() {
				b.Fatal("not a callback")
			}
		}
	})
}
