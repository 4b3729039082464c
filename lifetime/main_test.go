package lifetime_test

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// firstHostFn records what HostFn returned to goroutines that all made the
// process's first calls at once, before any test ran (I7 is checked by
// TestHostFnMadeOnce_I7).
var firstHostFn struct {
	fns  []uintptr
	errs []error
}

func TestMain(m *testing.M) {
	const n = 32
	firstHostFn.fns = make([]uintptr, n)
	firstHostFn.errs = make([]error, n)
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			firstHostFn.fns[i], firstHostFn.errs[i] = lifetime.HostFn()
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
	os.Exit(m.Run())
}

// allocsOK skips a test that counts allocations under the race detector.
func allocsOK(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
}

// drainErrors forgets the errors other tests left behind.
func drainErrors() { _ = lifetime.Errors() }

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "condition not reached in time", msg)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle waits for the release queue and returns the counters.
func settle() lifetime.Stats {
	lifetime.Flush()
	return lifetime.ReadStats()
}

// requireLiveCountsBack checks I11: the live counters are where they were.
func requireLiveCountsBack(t *testing.T, before lifetime.Stats) {
	t.Helper()
	after := settle()
	require.Equal(t, before.Objects, after.Objects, "Objects")
	require.Equal(t, before.Live, after.Live, "Live")
	require.Equal(t, before.Queued, after.Queued, "Queued")
	require.Equal(t, before.Pinned, after.Pinned, "Pinned")
	require.Equal(t, before.Tables, after.Tables, "Tables")
	require.Equal(t, before.Callbacks, after.Callbacks, "Callbacks")
}
