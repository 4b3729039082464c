// Package stress is a test helper: the mixed workload that the goroutine-
// migration stress tests of package driver run, on a real GPU
// (driver's tests) and against fakecuda (tests/fakedriver).
package stress

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/purecuda/cuda/driver"
)

// Target is a context and its fill kernel.
type Target struct {
	Ctx  *driver.Context
	Fill *driver.Function
}

// Run starts workers goroutines, worker w on targets[w%len(targets)], each
// running Worker, and returns their errors joined.
func Run(targets []Target, workers, ops, n int) error {
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := targets[w%len(targets)]
			if err := Worker(t.Ctx, t.Fill, w, ops, n); err != nil {
				errs[w] = fmt.Errorf("worker %d: %w", w, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Worker runs ops random operations on ctx — alloc, copy round trips,
// launches of fill (fill(int* out, int v, int n): out[i] = v + i), event
// records, stream syncs and frees — with scheduler, GC and thread-locking
// churn in between, and checks every result. A call that reached the driver
// without its context current is reported as such.
func Worker(ctx *driver.Context, fill *driver.Function, seed, ops, n int) error {
	r := rand.New(rand.NewPCG(uint64(seed), 7))
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
		if err := step(op, r, ctx, fill, s, ev, &live, host, i, n); err != nil {
			if errors.Is(err, driver.ErrInvalidContext) {
				return fmt.Errorf("a call ran without its context current: %w", err)
			}
			return err
		}
	}
	return s.Synchronize()
}

func step(op int, r *rand.Rand, ctx *driver.Context, fill *driver.Function, s *driver.Stream, ev *driver.Event,
	live *[]*driver.Buffer[int32], host []int32, i, n int) error {
	switch op {
	case 0: // alloc
		b, err := driver.Alloc[int32](ctx, n)
		if err != nil {
			return err
		}
		*live = append(*live, b)
	case 1: // synchronous copy round trip
		b := (*live)[r.IntN(len(*live))]
		for j := range host {
			host[j] = int32(i + j)
		}
		if err := b.CopyFromHost(ctx.LegacyStream(), host); err != nil {
			return err
		}
		clear(host)
		if err := b.CopyToHost(ctx.LegacyStream(), host); err != nil {
			return err
		}
		if host[n-1] != int32(i+n-1) {
			return fmt.Errorf("copy round trip: got %d, want %d", host[n-1], i+n-1)
		}
	case 2: // launch and read back
		b := (*live)[r.IntN(len(*live))]
		v := int32(r.IntN(1 << 20))
		if err := s.Launch(fill, driver.Grid(1), driver.Block(n), b, v, int32(n)); err != nil {
			return err
		}
		if err := b.CopyToHostAsync(s, host); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if host[0] != v || host[n-1] != v+int32(n-1) {
			return fmt.Errorf("kernel result: got %d..%d, want %d..%d", host[0], host[n-1], v, v+int32(n-1))
		}
	case 3: // event
		if err := ev.Record(s); err != nil {
			return err
		}
		return ev.Synchronize()
	case 4: // stream sync
		return s.Synchronize()
	case 5: // free
		k := r.IntN(len(*live))
		err := (*live)[k].Close()
		*live = append((*live)[:k], (*live)[k+1:]...)
		return err
	}
	return nil
}
