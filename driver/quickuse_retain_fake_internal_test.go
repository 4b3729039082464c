//go:build linux

package driver

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/seam"
)

// TestFakeQuickUseRetainFails: a Buffer copied by value, the original
// closed: the copy still reads
// open, its memory's references are gone: the Retain fails after another
// buffer was retained: seam.Use refuses, the stream's count is back to
// zero, the buffer retained first is released (on the queue), and the
// general path refuses the copy too.
func TestFakeQuickUseRetainFails(t *testing.T) {
	if !faketest.InChild(t) {
		return
	}
	x := newTwoContexts(t, false)
	s := x.sa
	a, err := Alloc[float32](x.ca, 16)
	require.NoError(t, err)
	defer a.Close()
	b, err := Alloc[float32](x.ca, 16)
	require.NoError(t, err)
	before := a.a.obj.Refs()
	cp := &Buffer[float32]{a: b.a, n: b.n, size: b.size}
	require.NoError(t, b.Close())
	time.Sleep(50 * time.Millisecond)
	q := quickOf(unsafe.Pointer(a), unsafe.Pointer(cp))
	assert.False(t, seam.Use(unsafe.Pointer(s), q))
	assert.Zero(t, s.inflight.Load()&streamCount)
	require.Eventually(t, func() bool { return a.a.obj.Refs() == before }, 5*time.Second, time.Millisecond)
	_, _, _, err = seam.UseOn("x", cp, s)
	assert.Error(t, err)
	faketest.NoBadUses(t)
}
