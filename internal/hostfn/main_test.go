package hostfn_test

import (
	"os"
	"sync"
	"testing"

	"github.com/purecuda/cuda/internal/hostfn"
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
			firstHostFn.fns[i], firstHostFn.errs[i] = hostfn.HostFn()
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
	os.Exit(m.Run())
}
