package driver_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
)

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
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, fill := e.ctx, e.fn["fill"]
			if w%2 == 1 {
				ctx, fill = created, createdFill
			}
			if err := stressWorker(ctx, fill, w, ops, n); err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func stressWorker(ctx *driver.Context, fill *driver.Function, w, ops, n int) error {
	r := rand.New(rand.NewPCG(uint64(w), 7))
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		return err
	}
	defer s.Close()
	ev, err := ctx.NewEvent(driver.EventDisableTiming)
	if err != nil {
		return err
	}
	defer ev.Close()
	var live []*driver.Buffer[int32]
	defer func() {
		for _, b := range live {
			b.Close()
		}
	}()
	host := make([]int32, n)
	for i := 0; i < ops; i++ {
		switch r.IntN(8) {
		case 0:
			runtime.Gosched()
		case 1:
			if i%97 == 0 {
				runtime.GC()
			}
		case 2:
			runtime.LockOSThread()
			runtime.Gosched()
			runtime.UnlockOSThread()
		}
		op := r.IntN(6)
		if len(live) == 0 {
			op = 0
		}
		switch op {
		case 0: // alloc
			b, err := driver.Alloc[int32](ctx, n)
			if err != nil {
				return check(err)
			}
			live = append(live, b)
		case 1: // synchronous copy round trip
			b := live[r.IntN(len(live))]
			for j := range host {
				host[j] = int32(i + j)
			}
			if err := b.CopyFromHost(host); err != nil {
				return check(err)
			}
			clear(host)
			if err := b.CopyToHost(host); err != nil {
				return check(err)
			}
			if host[n-1] != int32(i+n-1) {
				return fmt.Errorf("copy round trip: got %d, want %d", host[n-1], i+n-1)
			}
		case 2: // launch and read back
			b := live[r.IntN(len(live))]
			v := int32(r.IntN(1 << 20))
			if err := s.Launch(fill, driver.Grid(1), driver.Block(n), b, v, int32(n)); err != nil {
				return check(err)
			}
			if err := b.CopyToHostAsync(s, host); err != nil {
				return check(err)
			}
			if err := s.Synchronize(); err != nil {
				return check(err)
			}
			if host[0] != v || host[n-1] != v+int32(n-1) {
				return fmt.Errorf("kernel result: got %d..%d, want %d..%d", host[0], host[n-1], v, v+int32(n-1))
			}
		case 3: // event
			if err := ev.Record(s); err != nil {
				return check(err)
			}
			if err := ev.Synchronize(); err != nil {
				return check(err)
			}
		case 4: // stream sync
			if err := s.Synchronize(); err != nil {
				return check(err)
			}
		case 5: // free
			k := r.IntN(len(live))
			if err := live[k].Close(); err != nil {
				return check(err)
			}
			live = append(live[:k], live[k+1:]...)
		}
	}
	return s.Synchronize()
}

func check(err error) error {
	if errors.Is(err, driver.ErrInvalidContext) {
		return fmt.Errorf("CUDA_ERROR_INVALID_CONTEXT: the binding failed: %w", err)
	}
	return err
}
