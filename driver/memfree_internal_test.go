package driver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// handOff makes a hand-off of Close's reference on an allocation whose
// "free" only counts, as dropOwn does, without queuing it.
func handOff(freed *int) queuedClose {
	a := &allocation{}
	a.obj.Init(func() error { *freed++; return nil })
	closeFrees.mu.Lock()
	defer closeFrees.mu.Unlock()
	q := queuedClose{a: a, seq: closeFrees.next}
	closeFrees.next++
	return q
}

// waitCloseFrees waits for the hand-offs queued before it, released in any
// order; with none pending it reports false at once.
func TestWaitCloseFreesOutOfOrder(t *testing.T) {
	lifetime.Flush() // hand-offs of earlier tests
	require.False(t, waitCloseFrees(), "nothing pending")
	freed := 0
	qs := []queuedClose{handOff(&freed), handOff(&freed), handOff(&freed)}
	waited := make(chan bool)
	go func() { waited <- waitCloseFrees() }()
	require.NoError(t, qs[2].Release())
	require.NoError(t, qs[0].Release())
	select {
	case <-waited:
		t.Fatal("returned while a hand-off queued before it is pending")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, qs[1].Release())
	select {
	case ok := <-waited:
		assert.True(t, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("did not return once the hand-offs before it were released")
	}
	assert.Equal(t, 3, freed)
	assert.False(t, waitCloseFrees(), "nothing pending")
	closeFrees.mu.Lock()
	assert.Empty(t, closeFrees.done)
	closeFrees.mu.Unlock()
}
