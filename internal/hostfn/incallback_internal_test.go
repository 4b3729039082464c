package hostfn

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Invariant I8: InCallback tells goroutines apart by goroutineKey (the g
// on linux/amd64 and linux/arm64, else the id from the stack trace): the
// same within a goroutine, different between live ones. goroutineID, the
// fallback, parses the trace header.
func TestGoroutineIdentity_I8(t *testing.T) {
	k, id := goroutineKey(), goroutineID()
	assert.NotZero(t, k)
	assert.NotZero(t, id)
	assert.Equal(t, k, goroutineKey(), "stable within a goroutine")
	assert.Equal(t, id, goroutineID())
	type pair struct {
		k  uintptr
		id uint64
	}
	other := make(chan pair)
	hold := make(chan struct{})
	go func() {
		other <- pair{goroutineKey(), goroutineID()}
		<-hold
	}()
	o := <-other
	assert.NotEqual(t, k, o.k, "different between live goroutines")
	assert.NotEqual(t, id, o.id)
	close(hold)
}
