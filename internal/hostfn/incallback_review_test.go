package hostfn_test

// Review tests for c190aba (hostfn.InCallback; Object's last release in a
// callback queues the destroy).

import (
	"github.com/purecuda/cuda/internal/hostfn"
	"github.com/purecuda/cuda/internal/lifetest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

//go:noinline
func atDepth(n int, f func()) {
	if n == 0 {
		f()
		return
	}
	atDepth(n-1, f)
}

// Passing: InCallback holds in a worker (the portable path) also after an
// earlier callback on a worker called runtime.Goexit, is false again after
// the callbacks, and is false in a goroutine the callback starts and does
// not wait for (which does not deadlock: the callback returns).
func TestInCallbackReviewIdentityAcrossGoexit(t *testing.T) {
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

// Passing: destroys queued from a callback run in the order of the
// releases, after the callback, and dependents' releases chained from a
// queued destroy run at once on the release goroutine (no second queuing).
func TestInCallbackReviewDestroyOrderKept(t *testing.T) {
	lifetest.DrainErrors()
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var parent, a, b lifetime.Object
	parent.Init(func() error { note("parent"); return nil })
	require.True(t, parent.Hold())
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
