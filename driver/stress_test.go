package driver_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/internal/stress"
)

// TestLeavesThreadContext: a bound call restores the thread's context, so a
// context destroyed elsewhere cannot break later stream work on the thread.
func TestLeavesThreadContext(t *testing.T) {
	e, s := setup(t)
	require.NoError(t, stress.LeftCurrent(e.ctx, s))
}

// TestGoroutineMigrationStress: 64 goroutines, 1000 mixed operations each,
// over the primary context and a created one, with scheduler, GC and
// thread-locking churn in between. Nothing may crash, no call may fail with
// CUDA_ERROR_INVALID_CONTEXT, and every result must be right.
func TestGoroutineMigrationStress(t *testing.T) {
	e, _ := setup(t)
	created, err := e.dev.NewContext(driver.ContextSchedAuto)
	require.NoError(t, err)
	defer created.Close()
	createdMod, err := created.LoadModule(e.ptx)
	require.NoError(t, err)
	defer createdMod.Close()
	createdFill, err := createdMod.Function("fill")
	require.NoError(t, err)

	const workers, ops, n = 64, 1000, 256
	require.NoError(t, stress.Run([]stress.Target{{Ctx: e.ctx, Fill: e.fn["fill"]}, {Ctx: created, Fill: createdFill}}, workers, ops, n))
}
