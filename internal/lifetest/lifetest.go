// Package lifetest holds the helpers the tests of purecuda's lifetime core
// share (lifetime, internal/release, internal/hostfn, internal/tables).
package lifetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/lifetime"
)

// AllocsOK skips a test that counts allocations under the race detector.
func AllocsOK(t *testing.T) {
	t.Helper()
	if RaceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
}

// DrainErrors forgets the errors other tests left behind.
func DrainErrors() { _ = lifetime.Errors() }

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t *testing.T, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "condition not reached in time", msg)
		}
		time.Sleep(time.Millisecond)
	}
}

// Settle waits for the release queue and returns the counters.
func Settle() lifetime.Stats {
	lifetime.Flush()
	return lifetime.ReadStats()
}

// RequireLiveCountsBack checks I11: the live counters are where they were.
func RequireLiveCountsBack(t *testing.T, before lifetime.Stats) {
	t.Helper()
	after := Settle()
	require.Equal(t, before.Objects, after.Objects, "Objects")
	require.Equal(t, before.Live, after.Live, "Live")
	require.Equal(t, before.Queued, after.Queued, "Queued")
	require.Equal(t, before.Pinned, after.Pinned, "Pinned")
	require.Equal(t, before.Tables, after.Tables, "Tables")
	require.Equal(t, before.Callbacks, after.Callbacks, "Callbacks")
}
