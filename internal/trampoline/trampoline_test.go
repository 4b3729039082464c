package trampoline_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/trampoline"
)

func TestOnceEntriesRunOnceAndGo(t *testing.T) {
	before := trampoline.Len()
	n := 0
	id := trampoline.Register(&trampoline.Entry{Fn: func() { n++ }, Once: true})
	assert.Equal(t, before+1, trampoline.Len())
	trampoline.Invoke(id)
	trampoline.Invoke(id)
	assert.Equal(t, 1, n)
	assert.Equal(t, before, trampoline.Len())
	assert.False(t, trampoline.Unregister(id))
}

func TestPersistentEntries(t *testing.T) {
	n := 0
	id := trampoline.Register(&trampoline.Entry{Fn: func() { n++ }})
	for i := 0; i < 3; i++ {
		trampoline.Invoke(id)
	}
	assert.Equal(t, 3, n)
	assert.True(t, trampoline.Unregister(id))
	trampoline.Invoke(id)
	assert.Equal(t, 3, n)
}

func TestPanicIsRecoveredAndReported(t *testing.T) {
	var got any
	var stack []byte
	id := trampoline.Register(&trampoline.Entry{Fn: func() { panic("boom") }, Once: true,
		OnPanic: func(p any, s []byte) { got, stack = p, s }})
	require.NotPanics(t, func() { trampoline.Invoke(id) })
	assert.Equal(t, "boom", got)
	assert.Contains(t, string(stack), "trampoline_test")
	id = trampoline.Register(&trampoline.Entry{Fn: func() { panic("unheard") }, Once: true})
	assert.NotPanics(t, func() { trampoline.Invoke(id) }, "no OnPanic: still recovered")
	assert.NotPanics(t, func() { trampoline.Invoke(123456789) }, "unknown ids are ignored")
}

func TestHostFnIsMadeOnce(t *testing.T) {
	a, err := trampoline.HostFn()
	require.NoError(t, err)
	b, err := trampoline.HostFn()
	require.NoError(t, err)
	assert.NotZero(t, a)
	assert.Equal(t, a, b)
}
