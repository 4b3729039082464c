//go:build linux

package nccl_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/internal/faketest"
	"github.com/purecuda/cuda/internal/gputest"
	"github.com/purecuda/cuda/nccl"
)

// TestOperationAllocsFromFake: queuing an operation allocates nothing in
// Go, outside a group (the quick path, in place or not, and a Send) and
// as a Group of one (once the group's storage exists).
func TestOperationAllocsFromFake(t *testing.T) {
	if gputest.RaceEnabled {
		t.Skip("sync.Pool drops frames at random under -race: allocation counts mean nothing")
	}
	if !faketest.InNCCLAndCUDAChild(t) {
		return
	}
	_, rs := fakeRanks(t, 1, nil)
	c, s := rs[0].c, rs[0].s
	a, b := upload(t, s, []float32{1, 2}), upload(t, s, []float32{0, 0})
	require.NoError(t, nccl.AllReduce(c, s, a, b, nccl.Sum))
	for name, f := range map[string]func() error{
		"AllReduce":          func() error { return nccl.AllReduce(c, s, a, b, nccl.Sum) },
		"AllReduce in place": func() error { return nccl.AllReduce(c, s, b, b, nccl.Max) },
		"Broadcast":          func() error { return nccl.Broadcast(c, s, a, b, 0) },
		"Group": func() error {
			return nccl.Group(func() error { return nccl.AllReduce(c, s, a, b, nccl.Sum) })
		},
	} {
		require.NoError(t, f(), name)
		runtime.GC()
		allocs := testing.AllocsPerRun(200, func() {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, name)
	}
	require.NoError(t, s.Synchronize())
}
