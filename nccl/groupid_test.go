//go:build linux

package nccl

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// grow uses depth frames of stack, so that the goroutine's stack is moved.
func grow(depth int) int64 {
	var pad [64]byte
	if depth == 0 {
		return groupID() + int64(pad[0])
	}
	return grow(depth - 1)
}

// TestGroupIDIsTheGoroutines: groupID is non-zero, the same for one
// goroutine across yields and a stack that grew and moved, and differs
// between goroutines alive at once.
func TestGroupIDIsTheGoroutines(t *testing.T) {
	const n = 64
	ids := make([]int64, n)
	var start, done sync.WaitGroup
	start.Add(n)
	done.Add(n)
	for i := range ids {
		go func() {
			defer done.Done()
			id := groupID()
			start.Done()
			start.Wait() // all alive at once
			runtime.Gosched()
			assert.Equal(t, id, grow(10000), "after the stack moved")
			assert.Equal(t, id, groupID())
			ids[i] = id
		}()
	}
	done.Wait()
	seen := map[int64]bool{}
	for _, id := range ids {
		assert.NotZero(t, id)
		assert.False(t, seen[id], "two goroutines alive at once share %#x", id)
		seen[id] = true
	}
}
